// Task timings from CUPTI activity records (execute_cuda.hpp): pure, so that
// tests check it on synthetic records without a GPU.
#include "dtsim/executor/execute_cuda.hpp"

#include "cuda_backend.hpp"
#include "dtsim/common/error.hpp"

#include <algorithm>

namespace dtsim::executor {

std::optional<std::vector<TaskTiming>> task_timings_from_cupti(
    const sim::Plan& plan, std::span<const profiler::cuda::ActivityRecord> records,
    const std::unordered_map<std::uint32_t, int>& task_of_correlation, const CuptiStep& step) {
    const std::size_t n = plan.tasks.size();
    DTSIM_ASSERT(step.launched.size() == n && step.host_start_ns.size() == n && step.host_end_ns.size() == n,
                 "CuptiStep needs one entry per task");
    auto rel = [&](std::uint64_t ns) {
        return ns > step.t0_ns ? static_cast<std::int64_t>(ns - step.t0_ns) : std::int64_t{0};
    };
    std::vector<TaskTiming> out(n);
    std::vector<char> seen(n, 0);
    for (const auto& r : records) {
        auto it = task_of_correlation.find(r.correlation);
        if (it == task_of_correlation.end() || it->second < 0 || static_cast<std::size_t>(it->second) >= n) continue;
        const auto i = static_cast<std::size_t>(it->second);
        const std::int64_t start = rel(r.start_ns), end = std::max(rel(r.end_ns), start);
        out[i] = seen[i] ? TaskTiming{std::min(out[i].start_ns, start), std::max(out[i].end_ns, end)}
                         : TaskTiming{start, end};
        seen[i] = 1;
    }
    std::vector<std::int64_t> stream_end(plan.streams.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        const auto& t = plan.tasks[i];
        auto& last = stream_end[static_cast<std::size_t>(t.stream)];
        if (cuda::is_host_task(t)) {
            const std::int64_t start = rel(step.host_start_ns[i]);
            out[i] = {start, std::max(rel(step.host_end_ns[i]), start)};
        } else if (!seen[i]) {
            if (step.launched[i] != 0) return std::nullopt;
            std::int64_t at = last;
            for (auto d : plan.deps_of(t)) at = std::max(at, out[static_cast<std::size_t>(d)].end_ns);
            out[i] = {at, at};
        }
        last = std::max(last, out[i].end_ns);
    }
    return out;
}

}  // namespace dtsim::executor
