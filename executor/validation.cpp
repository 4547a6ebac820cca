#include "dtsim/executor/validation.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/executor/calibration_targets.hpp"
#include "dtsim/executor/measured_result.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/strategy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace dtsim::executor {
namespace {

std::size_t kind_index(sim::TaskKind k) {
    return static_cast<std::size_t>(std::find(kTaskKinds.begin(), kTaskKinds.end(), k) - kTaskKinds.begin());
}

// The rank that spent the longest in compute: on cores of unequal speed the
// others wait for it inside their collectives, so their collective times mix
// waiting with communication; its own times are the step's critical path.
int critical_rank(const sim::Plan& plan, const ExecResult& measured, std::size_t first) {
    int best = 0;
    double most = -1;
    const std::size_t ranks = measured.timings.front().size();
    for (std::size_t r = 0; r < ranks; ++r) {
        double compute = 0;
        for (std::size_t s = first; s < measured.timings.size(); ++s)
            for (std::size_t t = 0; t < plan.tasks.size(); ++t)
                if (plan.tasks[t].kind == sim::TaskKind::compute) {
                    const auto& m = measured.timings[s][r][t];
                    compute += static_cast<double>(m.end_ns - m.start_ns);
                }
        if (compute > most) {
            most = compute;
            best = static_cast<int>(r);
        }
    }
    return best;
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
    const std::size_t first = first_measured_step(measured);
    c.rank = critical_rank(plan, measured, first);
    for (std::size_t t = 0; t < plan.tasks.size(); ++t) {
        const std::size_t k = kind_index(plan.tasks[t].kind);
        const auto& timing = predicted.schedule.timings[t];
        c.predicted_kind_s[k] += static_cast<double>(timing.end_ns - timing.start_ns) * 1e-9;
        std::vector<double> samples;
        for (std::size_t s = first; s < measured.timings.size(); ++s) {
            const auto& m = measured.timings[s][static_cast<std::size_t>(c.rank)][t];
            samples.push_back(static_cast<double>(m.end_ns - m.start_ns) * 1e-9);
        }
        const double measured_s = median(std::move(samples));
        c.measured_kind_s[k] += measured_s;
        c.tasks.push_back({static_cast<int>(t), sim::task_name(plan, *predicted.workload, plan.tasks[t]),
                           plan.tasks[t].kind, static_cast<double>(timing.end_ns - timing.start_ns) * 1e-9,
                           measured_s});
    }
    return c;
}

std::vector<TaskComparison> furthest_tasks(const Comparison& c, std::size_t n) {
    std::vector<TaskComparison> out = c.tasks;
    std::stable_sort(out.begin(), out.end(), [](const TaskComparison& a, const TaskComparison& b) {
        return std::abs(a.predicted_s - a.measured_s) > std::abs(b.predicted_s - b.measured_s);
    });
    if (out.size() > n) out.resize(n);
    return out;
}

Comparison compare_bracketed(const sim::SimResult& before, const sim::SimResult& after, const ExecResult& measured) {
    Comparison c = compare(before, measured);
    const Comparison later = compare(after, measured);
    c.predicted_s = (c.predicted_s + later.predicted_s) / 2;
    for (std::size_t k = 0; k < kTaskKinds.size(); ++k)
        c.predicted_kind_s[k] = (c.predicted_kind_s[k] + later.predicted_kind_s[k]) / 2;
    for (std::size_t t = 0; t < c.tasks.size(); ++t)
        c.tasks[t].predicted_s = (c.tasks[t].predicted_s + later.tasks[t].predicted_s) / 2;
    c.predicted_peak_bytes = std::max(c.predicted_peak_bytes, later.predicted_peak_bytes);
    return c;
}

std::vector<ValidationCase> validation_cases(const std::vector<sim::Config>& configs,
                                             profiler::CalibrationTargets* all) {
    std::vector<ValidationCase> out;
    for (const sim::Config& config : configs) {
        ValidationCase c{config, std::make_shared<const models::Workload>(sim::build_workload(config)), {}};
        const sim::Plan plan = sim::lower(*c.workload, config);
        add_calibration_targets(c.targets, *c.workload, plan);
        if (all) add_calibration_targets(*all, *c.workload, plan);
        out.push_back(std::move(c));
    }
    return out;
}

ValidationRun validate_case(const ValidationCase& c, const calib::Calibration& cal, BracketedRefresh* bracket,
                            ExecOptions options) {
    ValidationRun run;
    run.predicted = sim::simulate(c.workload, c.config, bracket ? bracket->before() : cal);
    // Replay runs exactly the Plan's ops at their shapes: what the simulator priced.
    options.mode = Mode::replay;
    run.measured = execute(run.predicted.plan, *c.workload, c.config, options);
    if (bracket) run.predicted_after = sim::simulate(c.workload, c.config, bracket->after_run());
    if (run.measured.rank == 0)
        run.comparison = run.predicted_after ? compare_bracketed(run.predicted, *run.predicted_after, run.measured)
                                             : compare(run.predicted, run.measured);
    return run;
}

}  // namespace dtsim::executor
