#include "dtsim/executor/validation.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/executor/measured_result.hpp"

#include <algorithm>
#include <vector>

namespace dtsim::executor {
namespace {

std::size_t kind_index(sim::TaskKind k) {
    return static_cast<std::size_t>(std::find(kTaskKinds.begin(), kTaskKinds.end(), k) - kTaskKinds.begin());
}

}  // namespace

Comparison compare(const sim::SimResult& predicted, const ExecResult& measured) {
    const auto& plan = predicted.plan;
    DTSIM_ASSERT(!measured.timings.empty() && measured.timings.front().front().size() == plan.tasks.size(),
                 "the measured run must execute the predicted plan");
    Comparison c;
    c.predicted_s = predicted.metrics.step_time_s;
    c.measured_s = measured.median_step_time_s;
    c.predicted_peak_bytes = predicted.metrics.peak_memory_bytes;
    c.measured_peak_bytes = measured.peak_memory_bytes;
    const std::size_t first = measured.timings.size() > 1 ? 1 : 0;  // the first step is warm-up
    for (std::size_t t = 0; t < plan.tasks.size(); ++t) {
        const std::size_t k = kind_index(plan.tasks[t].kind);
        const auto& timing = predicted.schedule.timings[t];
        c.predicted_kind_s[k] += static_cast<double>(timing.end_ns - timing.start_ns) * 1e-9;
        std::vector<double> samples;
        for (std::size_t s = first; s < measured.timings.size(); ++s) {
            const auto& m = measured.timings[s][0][t];
            samples.push_back(static_cast<double>(m.end_ns - m.start_ns) * 1e-9);
        }
        c.measured_kind_s[k] += median(std::move(samples));
    }
    return c;
}

}  // namespace dtsim::executor
