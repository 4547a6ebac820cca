#include "dtsim/sim/timeline.hpp"

#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/report.hpp"

#include <fmt/format.h>

namespace dtsim::sim {

Timeline make_timeline(const SimResult& r, const Config& config, const std::string& hardware) {
    Timeline tl;
    const int world = config.topology.world_size();
    tl.title = fmt::format("{} {} on {}x {} (predicted)", config.model, config.strategy, world, hardware);
    // Data-parallel ranks are symmetric: one representative rank stands for all.
    tl.ranks.push_back(world > 1 ? fmt::format("rank 0 (representative of {} ranks)", world) : "rank 0");
    for (const auto& s : r.plan.streams) tl.streams.push_back(s.name);
    tl.events.reserve(r.plan.tasks.size());
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        TimelineEvent e;
        e.stream = t.stream;
        e.name = task_name(r.plan, *r.workload, t);
        e.category = std::string(to_string(t.kind));
        e.start_ns = r.schedule.timings[i].start_ns;
        e.dur_ns = r.schedule.timings[i].end_ns - e.start_ns;
        e.args.push_back({"task", static_cast<std::int64_t>(i)});
        e.args.push_back({"phase", std::string(to_string(t.phase))});
        e.args.push_back({"micro_step", static_cast<std::int64_t>(t.micro_step)});
        if (t.layer >= 0) e.args.push_back({"layer", r.workload->layers[static_cast<std::size_t>(t.layer)].name});
        if (t.bucket >= 0) e.args.push_back({"bucket", static_cast<std::int64_t>(t.bucket)});
        if (t.bytes > 0) e.args.push_back({"bytes", t.bytes});
        if (t.kind == TaskKind::collective)
            e.args.push_back(
                {"group_size", static_cast<std::int64_t>(r.plan.groups[static_cast<std::size_t>(t.group)].size)});
        e.args.push_back({"standalone_ns", r.duration_ns[i]});
        if (!r.schedule.straggler_wait_ns.empty() && r.schedule.straggler_wait_ns[i] > 0)
            e.args.push_back({"waited_for_slowest_rank_ns", r.schedule.straggler_wait_ns[i]});
        const auto deps = r.plan.deps_of(t);
        e.deps.assign(deps.begin(), deps.end());  // events are the tasks, in order
        tl.events.push_back(std::move(e));
    }
    // A stream that ran two tasks at once (gloo's two lanes: CollectiveLanes)
    // gets a second track for the overlapping ones, so that no track holds
    // overlapping events (Chrome's viewers and the GUI draw one row a track).
    std::vector<std::vector<std::int64_t>> lane_end(r.plan.streams.size());  // per stream, per lane
    std::vector<std::vector<int>> lane_track(r.plan.streams.size());
    for (auto& e : tl.events) {
        auto& ends = lane_end[static_cast<std::size_t>(e.stream)];
        auto& tracks = lane_track[static_cast<std::size_t>(e.stream)];
        std::size_t lane = 0;
        while (lane < ends.size() && ends[lane] > e.start_ns) ++lane;
        if (lane == ends.size()) {
            ends.push_back(0);
            if (lane == 0) {
                tracks.push_back(e.stream);
            } else {
                tracks.push_back(static_cast<int>(tl.streams.size()));
                tl.streams.push_back(
                    fmt::format("{} (lane {})", r.plan.streams[static_cast<std::size_t>(e.stream)].name, lane + 1));
            }
        }
        ends[lane] = e.start_ns + e.dur_ns;
        e.stream = tracks[lane];
    }
    for (const auto& s : r.schedule.memory) tl.device_memory_bytes.push_back({0, s.time_ns, s.total_bytes});
    for (int c = 0; c < kMemCategories; ++c) {
        const auto category = static_cast<MemCategory>(c);
        const std::int64_t bytes = r.schedule.peak_breakdown[static_cast<std::size_t>(c)];
        if (!is_host(category) && bytes > 0)
            tl.device_memory_peak.emplace_back(std::string(to_string(category)), bytes);
    }
    if (r.schedule.peak_host_bytes > 0)
        for (const auto& s : r.schedule.memory) tl.host_memory_bytes.push_back({0, s.time_ns, s.host_bytes});
    return tl;
}

void name_collective_streams(Timeline& tl, std::string_view library) {
    constexpr std::string_view kPlanName = "nccl";
    for (auto& s : tl.streams)
        if (s.starts_with(kPlanName) && (s.size() == kPlanName.size() || s[kPlanName.size()] == ' '))
            s.replace(0, kPlanName.size(), library);
}

Timeline make_timeline(const SimResult& r, const Config& config, const calib::Calibration& calibration) {
    Timeline tl = make_timeline(r, config, calibration.name);
    name_collective_streams(tl, calibration.provenance.collective_library());
    if (!calibration.nccl.present()) return tl;
    const CostModel cost(calibration, parse_nccl_env(config.env));
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.kind != TaskKind::collective) continue;
        if (const auto choice =
                cost.nccl_choice(t.collective, t.bytes, r.plan.groups[static_cast<std::size_t>(t.group)], t.dtype))
            tl.events[i].args.push_back(
                {"nccl", fmt::format("{}/{}", to_string(choice->algo), to_string(choice->proto))});
    }
    return tl;
}

}  // namespace dtsim::sim
