#include "dtsim/sim/plan.hpp"

#include "dtsim/common/error.hpp"

#include <algorithm>

namespace dtsim::sim {

std::string_view to_string(TaskKind k) {
    switch (k) {
        case TaskKind::compute: return "compute";
        case TaskKind::collective: return "collective";
        case TaskKind::copy: return "copy";
        case TaskKind::host_compute: return "host";
        case TaskKind::io: return "io";
    }
    return "?";
}

std::string_view to_string(Phase p) {
    switch (p) {
        case Phase::forward: return "forward";
        case Phase::backward: return "backward";
        case Phase::recompute: return "recompute";
        case Phase::optimizer: return "optimizer";
        case Phase::gradient_copy: return "gradient_copy";
        case Phase::compression: return "compression";
        case Phase::communication: return "communication";
        case Phase::transfer: return "transfer";
        case Phase::parameter_copy: return "parameter_copy";
    }
    return "?";
}

std::string_view to_string(MemCategory c) {
    switch (c) {
        case MemCategory::parameters: return "parameters";
        case MemCategory::gradients: return "gradients";
        case MemCategory::optimizer_states: return "optimizer_states";
        case MemCategory::activations: return "activations";
        case MemCategory::buckets: return "buckets";
        case MemCategory::gathered: return "gathered";
        case MemCategory::error_feedback: return "error_feedback";
        case MemCategory::other: return "other";
        case MemCategory::host: return "host";
    }
    return "?";
}

std::string_view to_string(OptimizerImpl i) {
    switch (i) {
        case OptimizerImpl::fused: return "fused";
        case OptimizerImpl::foreach: return "foreach";
        case OptimizerImpl::for_loop: return "for-loop";
    }
    return "?";
}

std::string_view to_string(Transfer t) {
    switch (t) {
        case Transfer::none: return "none";
        case Transfer::h2d: return "h2d";
        case Transfer::d2h: return "d2h";
        case Transfer::nvme_read: return "nvme_read";
        case Transfer::nvme_write: return "nvme_write";
    }
    return "?";
}

std::string_view to_string(CollectiveRole r) {
    switch (r) {
        case CollectiveRole::other: return "other";
        case CollectiveRole::bucket: return "bucket";
        case CollectiveRole::compressed: return "compressed";
        case CollectiveRole::uncompressed: return "uncompressed";
        case CollectiveRole::powersgd_p: return "powersgd_p";
        case CollectiveRole::powersgd_q: return "powersgd_q";
        case CollectiveRole::parameter_gather: return "parameter_gather";
        case CollectiveRole::gradient_reduce: return "gradient_reduce";
    }
    return "?";
}

int Plan::add_stream(std::string name, TaskKind kind) {
    streams.push_back({std::move(name), kind});
    return static_cast<int>(streams.size()) - 1;
}

int Plan::add_group(CommGroup g) {
    DTSIM_ASSERT(g.nodes >= 1 && g.size >= g.nodes && g.size % g.nodes == 0, "group must spread evenly over nodes");
    for (std::size_t i = 0; i < groups.size(); ++i)
        if (groups[i].size == g.size && groups[i].nodes == g.nodes) return static_cast<int>(i);
    groups.push_back(g);
    return static_cast<int>(groups.size()) - 1;
}

int Plan::add_task(Task t, std::span<const std::int32_t> task_deps) {
    DTSIM_ASSERT(t.stream >= 0 && t.stream < static_cast<int>(streams.size()), "task on an unknown stream");
    const auto id = static_cast<std::int32_t>(tasks.size());
    t.dep_begin = static_cast<std::uint32_t>(deps.size());
    t.dep_count = 0;
    for (std::int32_t d : task_deps) {
        if (d < 0) continue;  // "no dependency" placeholders
        DTSIM_ASSERT(d < id, "a task may only depend on earlier tasks");
        deps.push_back(d);
        ++t.dep_count;
    }
    t.mem_begin = static_cast<std::uint32_t>(memory.size());
    t.mem_count = 0;
    tasks.push_back(t);
    return id;
}

void Plan::alloc(MemCategory c, std::int64_t bytes) {
    DTSIM_ASSERT(!tasks.empty() && bytes >= 0, "alloc needs a task and a non-negative size");
    if (bytes == 0) return;
    memory.push_back({c, bytes});
    ++tasks.back().mem_count;
}

void Plan::release(MemCategory c, std::int64_t bytes) {
    DTSIM_ASSERT(!tasks.empty() && bytes >= 0, "release needs a task and a non-negative size");
    if (bytes == 0) return;
    memory.push_back({c, -bytes});
    ++tasks.back().mem_count;
}

std::span<const std::int32_t> Plan::shards_of(std::size_t task) const {
    const auto it =
        std::lower_bound(task_shard_refs.begin(), task_shard_refs.end(), task,
                         [](const TaskShards& r, std::size_t t) { return static_cast<std::size_t>(r.task) < t; });
    if (it == task_shard_refs.end() || static_cast<std::size_t>(it->task) != task) return {};
    return {task_shards.data() + it->begin, it->count};
}

int Plan::add_shard_group(std::span<const std::int32_t> params, int ranks) {
    DTSIM_ASSERT(ranks >= 1, "a shard group spans at least one rank");
    shards.push_back(
        {static_cast<std::uint32_t>(shard_params.size()), static_cast<std::uint32_t>(params.size()), ranks});
    shard_params.insert(shard_params.end(), params.begin(), params.end());
    return static_cast<int>(shards.size()) - 1;
}

void Plan::set_role(CollectiveRole role, std::span<const std::int32_t> shard_groups) {
    DTSIM_ASSERT(!tasks.empty() && tasks.back().kind == TaskKind::collective, "a role belongs to a collective");
    Task& t = tasks.back();
    t.role = role;
    if (shard_groups.empty()) return;
    task_shard_refs.push_back({static_cast<std::int32_t>(tasks.size()) - 1,
                               static_cast<std::uint32_t>(task_shards.size()),
                               static_cast<std::uint32_t>(shard_groups.size())});
    for (std::int32_t g : shard_groups) {
        DTSIM_ASSERT(g >= 0 && g < static_cast<std::int32_t>(shards.size()), "a collective moves known shard groups");
        task_shards.push_back(g);
    }
}

}  // namespace dtsim::sim
