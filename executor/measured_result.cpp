#include "dtsim/executor/measured_result.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/executor/measured_memory.hpp"
#include "dtsim/sim/report.hpp"

#include <fmt/format.h>

#include <mpi.h>

#include <algorithm>

namespace dtsim::executor {

std::vector<std::vector<TaskTiming>> gather_on_rank0(const std::vector<TaskTiming>& mine, int rank, int world) {
    const std::size_t n = mine.size();
    std::vector<std::int64_t> flat;
    flat.reserve(n * 2);
    for (const auto& t : mine) {
        flat.push_back(t.start_ns);
        flat.push_back(t.end_ns);
    }
    std::vector<std::int64_t> all(rank == 0 ? flat.size() * static_cast<std::size_t>(world) : 0);
    if (MPI_Gather(flat.data(), static_cast<int>(flat.size()), MPI_INT64_T, all.data(), static_cast<int>(flat.size()),
                   MPI_INT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        throw Error("MPI_Gather of the task timings failed");
    if (rank != 0) return {mine};
    std::vector<std::vector<TaskTiming>> rows(static_cast<std::size_t>(world), std::vector<TaskTiming>(n));
    for (std::size_t q = 0; q < rows.size(); ++q)
        for (std::size_t i = 0; i < n; ++i) rows[q][i] = {all[(q * n + i) * 2], all[(q * n + i) * 2 + 1]};
    return rows;
}

void fill_step_times(ExecResult& r) {
    r.step_time_s.assign(r.timings.size(), 0.0);
    for (std::size_t s = 0; s < r.timings.size(); ++s) {
        std::int64_t end = 0;
        for (const auto& row : r.timings[s])
            for (const auto& t : row) end = std::max(end, t.end_ns);
        r.step_time_s[s] = static_cast<double>(end) * 1e-9;
    }
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

sim::Timeline make_measured_timeline(const ExecResult& r, const sim::Plan& plan, const models::Workload& w,
                                     const sim::Config& config) {
    sim::Timeline tl;
    tl.title = fmt::format("{} {} on {} {} ranks ({}, measured)", config.model, config.strategy, r.world_size,
                           to_string(r.backend), to_string(r.mode));
    for (int rank = 0; rank < r.world_size; ++rank) tl.ranks.push_back(fmt::format("rank {}", rank));
    for (const auto& s : plan.streams) tl.streams.push_back(s.name);
    sim::name_collective_streams(tl, runtime::collective_library(r.backend == Backend::cuda, r.transport));
    std::int64_t offset = 0;  // steps laid end to end
    for (std::size_t step = 0; step < r.timings.size(); ++step) {
        const auto& by_rank = r.timings[step];
        for (std::size_t rank = 0; rank < by_rank.size(); ++rank) {
            // This rank's step: its events are the Plan's tasks in order, so a
            // task's dependencies are at the same offsets from `first`.
            const auto first = static_cast<std::int32_t>(tl.events.size());
            for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
                const auto& t = plan.tasks[i];
                const auto& tm = by_rank[rank][i];
                sim::TimelineEvent e{static_cast<int>(rank),
                                     t.stream,
                                     sim::task_name(plan, w, t),
                                     std::string(to_string(t.kind)),
                                     offset + tm.start_ns,
                                     tm.end_ns - tm.start_ns,
                                     {},
                                     {}};
                for (const std::int32_t d : plan.deps_of(t)) e.deps.push_back(first + d);
                e.args = {{"task", static_cast<std::int64_t>(i)},
                          {"step", static_cast<std::int64_t>(step)},
                          {"phase", std::string(to_string(t.phase))},
                          {"micro_step", static_cast<std::int64_t>(t.micro_step)}};
                if (t.layer >= 0) e.args.push_back({"layer", w.layers[static_cast<std::size_t>(t.layer)].name});
                if (t.bucket >= 0) e.args.push_back({"bucket", static_cast<std::int64_t>(t.bucket)});
                if (t.bytes > 0) e.args.push_back({"bytes", t.bytes});
                tl.events.push_back(std::move(e));
            }
        }
        offset += static_cast<std::int64_t>(r.step_time_s[step] * 1e9) + 1;
    }
    return tl;
}

std::size_t first_measured_step(const ExecResult& r) {
    const auto steps = static_cast<int>(r.timings.size());
    return static_cast<std::size_t>(std::clamp(r.warmup_steps, 0, std::max(0, steps - 1)));
}

void finish_measured_result(ExecResult& r, const sim::Plan& plan, const models::Workload& w,
                            const sim::Config& config) {
    fill_step_times(r);
    MPI_Bcast(r.step_time_s.data(), static_cast<int>(r.step_time_s.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    const std::size_t first = first_measured_step(r);
    r.median_step_time_s = median({r.step_time_s.begin() + static_cast<std::ptrdiff_t>(first), r.step_time_s.end()});
    for (std::size_t step = first; step < r.timings.size(); ++step)
        for (const auto& row : r.timings[step])
            r.peak_memory_bytes = std::max(r.peak_memory_bytes, peak_memory_in_measured_order(plan, row));
    if (first < r.step_page_faults.size())
        r.page_faults_per_step =
            median({r.step_page_faults.begin() + static_cast<std::ptrdiff_t>(first), r.step_page_faults.end()});
    MPI_Allreduce(MPI_IN_PLACE, &r.page_faults_per_step, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    r.peak_rss_bytes = process_peak_rss_bytes();
    MPI_Allreduce(MPI_IN_PLACE, &r.peak_rss_bytes, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (r.rank == 0) r.timeline = make_measured_timeline(r, plan, w, config);
}

}  // namespace dtsim::executor
