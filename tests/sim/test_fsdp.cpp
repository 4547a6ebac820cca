// FSDP (strategy-semantics.md §3, §6, §8): bytes per step, ordering of
// all-gathers, reductions and offload copies, model-state memory, prefetch and
// rate-limiter effects, no_sync accumulation, determinism. Expected values are
// computed here from the workload's layers and the wrapping rules.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config fsdp_config(const std::string& model, int nodes, int gpus_per_node) {
    Config c;
    c.model = model;
    c.strategy = "fsdp";
    c.topology = {nodes, gpus_per_node};
    c.micro_batch = 1;
    c.seq_len = 1024;
    c.precision = Precision::bf16_mixed;
    return c;
}

SimResult run(const Config& c) {
    return simulate(c, calib::load_hardware("h100-sxm"));
}

// The transformer wrapping rule: one unit per distinct block, in order of first
// appearance; index 0 (the root) holds the layers outside blocks.
struct Wrap {
    std::vector<std::int64_t> numel;  // [0] = root
    std::vector<int> unit_of;         // by layer
};

Wrap transformer_units(const models::Workload& w) {
    Wrap out{{0}, {}};
    std::map<int, int> by_block;
    for (const auto& layer : w.layers) {
        int u = 0;
        if (layer.block >= 0) {
            auto [it, inserted] = by_block.emplace(layer.block, static_cast<int>(out.numel.size()));
            if (inserted) out.numel.push_back(0);
            u = it->second;
        }
        out.unit_of.push_back(u);
        out.numel[static_cast<std::size_t>(u)] += layer.param_count();
    }
    return out;
}

std::int64_t padded(std::int64_t numel, int n) {
    return (numel + n - 1) / n * n;
}

std::int64_t sum_padded(const std::vector<std::int64_t>& numel, int n, std::size_t from = 0) {
    std::int64_t s = 0;
    for (std::size_t i = from; i < numel.size(); ++i) s += padded(numel[i], n);
    return s;
}

std::int64_t shard_total(const std::vector<std::int64_t>& numel, int n) {
    return sum_padded(numel, n) / n;
}

const std::string& stream_name(const SimResult& r, const Task& t) {
    return r.plan.streams[static_cast<std::size_t>(t.stream)].name;
}

bool is_fsdp_collective(const SimResult& r, const Task& t) {
    if (t.kind != TaskKind::collective) return false;
    const std::string& s = stream_name(r, t);
    return s == "shard group" || s == "all-reduce";
}

struct Traffic {
    std::int64_t bytes = 0;
    int count = 0;
    std::vector<int> group_sizes;
};

Traffic traffic(const SimResult& r, CollectiveKind kind) {
    Traffic out;
    for (const Task& t : r.plan.tasks)
        if (is_fsdp_collective(r, t) && t.collective == kind) {
            out.bytes += t.bytes;
            ++out.count;
            out.group_sizes.push_back(r.plan.groups[static_cast<std::size_t>(t.group)].size);
        }
    return out;
}

bool mentions(const SimResult& r, const std::string& text) {
    return std::any_of(r.plan.notes.begin(), r.plan.notes.end(),
                       [&](const std::string& n) { return n.find(text) != std::string::npos; });
}

bool all_equal(const std::vector<int>& v, int value) {
    return std::all_of(v.begin(), v.end(), [&](int x) { return x == value; });
}

std::int64_t resident(const SimResult& r, MemCategory c) {
    return r.plan.resident[static_cast<std::size_t>(c)];
}
std::int64_t at_peak(const SimResult& r, MemCategory c) {
    return r.metrics.peak_breakdown[static_cast<std::size_t>(c)];
}

// Highest value a memory category reaches over the step, replaying the plan's
// deltas at the scheduled times (frees at a task's end before allocations at
// the same instant, as the engine does).
std::int64_t max_over_step(const SimResult& r, MemCategory c) {
    std::vector<std::pair<std::int64_t, std::int64_t>> events;  // (time, delta)
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i)
        for (const auto& d : r.plan.memory_of(r.plan.tasks[i]))
            if (d.category == c && d.bytes != 0)
                events.emplace_back(d.bytes > 0 ? r.schedule.timings[i].start_ns : r.schedule.timings[i].end_ns,
                                    d.bytes);
    std::sort(events.begin(), events.end());  // at equal times negative deltas first
    std::int64_t now = r.plan.resident[static_cast<std::size_t>(c)], best = now;
    for (const auto& [time, delta] : events) {
        now += delta;
        best = std::max(best, now);
    }
    return best;
}

}  // namespace

TEST_CASE("fsdp is registered with torch's knob names and PyTorch >= 2.1 defaults") {
    const auto& s = strategies().find("fsdp");
    std::map<std::string, std::string> defaults;
    for (const auto& k : s.value.knobs) defaults[k.name] = k.default_value;
    CHECK(defaults["sharding_strategy"] == "FULL_SHARD");
    CHECK(defaults["backward_prefetch"] == "BACKWARD_PRE");
    CHECK(defaults["forward_prefetch"] == "false");
    CHECK(defaults["limit_all_gathers"] == "true");
    CHECK(defaults["cpu_offload"] == "false");
    CHECK(defaults["no_sync"] == "true");
    CHECK(defaults["param_dtype"] == "auto");
    CHECK(defaults["reduce_dtype"] == "auto");
    CHECK(defaults["auto_wrap_policy"] == "transformer");
    CHECK(defaults["min_num_params"] == "1e8");
    Config c = fsdp_config("gpt2", 1, 8);
    c.knobs = {{"sharding_strategy", "ZERO3"}};
    CHECK_THROWS_AS(run(c), ConfigError);
    c.knobs = {{"min_num_params", "1e6"}};  // only meaningful with the size policy
    CHECK_THROWS_AS(run(c), ConfigError);
}

TEST_CASE("fsdp bytes per step follow the unit rule (§8)") {
    Config c = fsdp_config("gpt2-xl", 2, 8);
    const int world = 16;

    SECTION("FULL_SHARD: gather in forward and again in backward (not the root), reduce-scatter once") {
        c.knobs = {{"reduce_dtype", "fp32"}};
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        REQUIRE(u.numel.size() == 49);  // 48 blocks + the root
        const Traffic ag = traffic(r, CollectiveKind::allgather);
        const Traffic rs = traffic(r, CollectiveKind::reduce_scatter);
        CHECK(ag.bytes == 2 * sum_padded(u.numel, world) * 2 - padded(u.numel[0], world) * 2);
        CHECK(ag.count == 2 * 48 + 1);
        CHECK(rs.bytes == sum_padded(u.numel, world) * 4);
        CHECK(rs.count == 49);
        CHECK(all_equal(ag.group_sizes, world));
        CHECK(all_equal(rs.group_sizes, world));
        CHECK(traffic(r, CollectiveKind::allreduce).count == 0);
        CHECK(mentions(r,
                       "sharded over 16 ranks; all-gathers in bf16 before each unit's forward and again before "
                       "its backward"));
        CHECK(mentions(r, "reduce-scatters in fp32."));
        // Each collective carries its type, for calibrations that price types apart (gloo's fp16 sums).
        for (const auto& t : r.plan.tasks) {
            if (t.kind != TaskKind::collective) continue;
            CHECK(t.dtype == (t.collective == CollectiveKind::allgather ? DType::bf16 : DType::fp32));
        }
    }
    SECTION("reduce_dtype follows param_dtype by default") {
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        CHECK(traffic(r, CollectiveKind::reduce_scatter).bytes == sum_padded(u.numel, world) * 2);
        c.precision = Precision::fp32;
        SimResult full = run(c);
        CHECK(traffic(full, CollectiveKind::allgather).bytes ==
              2 * sum_padded(u.numel, world) * 4 - padded(u.numel[0], world) * 4);
        CHECK(traffic(full, CollectiveKind::reduce_scatter).bytes == sum_padded(u.numel, world) * 4);
    }
    SECTION("SHARD_GRAD_OP gathers once") {
        c.knobs = {{"sharding_strategy", "SHARD_GRAD_OP"}};
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        CHECK(traffic(r, CollectiveKind::allgather).bytes == sum_padded(u.numel, world) * 2);
        CHECK(traffic(r, CollectiveKind::allgather).count == 49);
        CHECK(traffic(r, CollectiveKind::reduce_scatter).bytes == sum_padded(u.numel, world) * 2);
        CHECK(mentions(r, "sharded over 16 ranks; all-gathers in bf16 before each unit's forward, kept unsharded"));
        CHECK_FALSE(mentions(r, "all-reduce"));
    }
    SECTION("NO_SHARD all-reduces each unit's flat gradient and gathers nothing") {
        c.knobs = {{"sharding_strategy", "NO_SHARD"}};
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        const Traffic ar = traffic(r, CollectiveKind::allreduce);
        CHECK(ar.bytes == r.workload->param_count() * 2);
        CHECK(ar.count == static_cast<int>(u.numel.size()));
        CHECK(all_equal(ar.group_sizes, world));
        CHECK(traffic(r, CollectiveKind::allgather).count == 0);
        CHECK(traffic(r, CollectiveKind::reduce_scatter).count == 0);
        // The note names the per-unit all-reduce and its dtype, and no all-gathers.
        CHECK(mentions(r, "all-reduced in bf16"));
        CHECK_FALSE(mentions(r, "all-gather"));
        CHECK_FALSE(mentions(r, "sharded"));
    }
    SECTION("HYBRID_SHARD shards inside the node and all-reduces the shard across nodes") {
        c.knobs = {{"sharding_strategy", "HYBRID_SHARD"}, {"reduce_dtype", "fp32"}};
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        const int node = 8;
        const Traffic ag = traffic(r, CollectiveKind::allgather);
        const Traffic rs = traffic(r, CollectiveKind::reduce_scatter);
        const Traffic ar = traffic(r, CollectiveKind::allreduce);
        CHECK(ag.bytes == 2 * sum_padded(u.numel, node) * 2 - padded(u.numel[0], node) * 2);
        CHECK(rs.bytes == sum_padded(u.numel, node) * 4);
        CHECK(ar.bytes == shard_total(u.numel, node) * 4);
        CHECK(ar.count == 49);
        CHECK(all_equal(ag.group_sizes, node));
        CHECK(all_equal(rs.group_sizes, node));
        CHECK(all_equal(ar.group_sizes, 2));
        CHECK(mentions(r, "sharded over the 8 ranks of each node"));
        CHECK(mentions(r, "all-gathers in bf16 before each unit's forward and again before its backward"));
        CHECK(mentions(r, "reduce-scatters in fp32, then the gradient shard all-reduced in fp32 across 2 nodes"));
    }
    SECTION("_HYBRID_SHARD_ZERO2 gathers once, inside the node") {
        c.knobs = {{"sharding_strategy", "_HYBRID_SHARD_ZERO2"}};
        SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        CHECK(traffic(r, CollectiveKind::allgather).bytes == sum_padded(u.numel, 8) * 2);
        CHECK(traffic(r, CollectiveKind::allreduce).bytes == shard_total(u.numel, 8) * 2);
    }
}

TEST_CASE("fsdp size_based_auto_wrap_policy groups consecutive layers up to min_num_params") {
    Config c = fsdp_config("gpt2-medium", 1, 8);
    c.knobs = {{"auto_wrap_policy", "size"}, {"min_num_params", "3e7"}, {"reduce_dtype", "fp32"}};
    SimResult r = run(c);
    // Greedy grouping; the layers left over form the root.
    std::vector<std::int64_t> expected;
    std::int64_t sum = 0;
    for (const auto& layer : r.workload->layers) {
        sum += layer.param_count();
        if (sum >= 30'000'000) {
            expected.push_back(padded(sum, 8) * 4);
            sum = 0;
        }
    }
    if (sum > 0) expected.push_back(padded(sum, 8) * 4);
    REQUIRE(expected.size() > 5);
    std::vector<std::int64_t> got;
    for (const Task& t : r.plan.tasks)
        if (is_fsdp_collective(r, t) && t.collective == CollectiveKind::reduce_scatter) got.push_back(t.bytes);
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    CHECK(got == expected);
}

TEST_CASE("fsdp ordering: gathers before use, reductions after the gradient, the step after every reduction") {
    for (bool offload : {false, true})
        for (bool checkpointing : {false, true}) {
            CAPTURE(offload, checkpointing);
            Config c = fsdp_config("gpt2-large", 2, 8);
            c.micro_batch = 2;
            c.activation_checkpointing = checkpointing;
            if (offload) c.knobs = {{"cpu_offload", "true"}};
            SimResult r = run(c);
            const Wrap u = transformer_units(*r.workload);
            const auto& tasks = r.plan.tasks;
            const auto& at = r.schedule.timings;
            // The latest all-gather of each unit issued so far, and the unit's latest forward task.
            std::vector<int> latest_gather(u.numel.size(), -1), latest_forward(u.numel.size(), -1);
            std::vector<int> last_backward_of_unit(u.numel.size(), -1);
            int last_reduction_end_task = -1;
            std::int64_t last_reduction_end = 0, last_d2h_end = 0;
            int checked_compute = 0, checked_rs = 0, checked_h2d = 0;
            for (std::size_t i = 0; i < tasks.size(); ++i) {
                const Task& t = tasks[i];
                if (t.kind == TaskKind::collective && t.collective == CollectiveKind::allgather) {
                    latest_gather[static_cast<std::size_t>(t.bucket)] = static_cast<int>(i);
                    if (offload) {
                        // Its H2D copy of the fp32 shard is the copy issued just before it, for the same unit.
                        REQUIRE(i > 0);
                        const Task& copy = tasks[i - 1];
                        REQUIRE(copy.transfer == Transfer::h2d);
                        CHECK(copy.bucket == t.bucket);
                        CHECK(at[i - 1].end_ns <= at[i].start_ns);
                        ++checked_h2d;
                    }
                }
                if (t.kind == TaskKind::compute && t.layer >= 0) {
                    const auto unit = static_cast<std::size_t>(u.unit_of[static_cast<std::size_t>(t.layer)]);
                    const int g = latest_gather[unit];
                    REQUIRE(g >= 0);
                    CHECK(at[static_cast<std::size_t>(g)].end_ns <= at[i].start_ns);
                    CHECK(tasks[static_cast<std::size_t>(g)].micro_step == t.micro_step);
                    // FULL_SHARD frees a child after forward: backward uses a second gather.
                    if (t.phase != Phase::forward && unit != 0) CHECK(g > latest_forward[unit]);
                    if (t.phase == Phase::forward) latest_forward[unit] = static_cast<int>(i);
                    if (t.phase == Phase::backward) last_backward_of_unit[unit] = static_cast<int>(i);
                    ++checked_compute;
                }
                if (t.kind == TaskKind::collective && t.collective == CollectiveKind::reduce_scatter) {
                    // After the unit's last backward task (its lowest layer's, issued just before).
                    const int b = last_backward_of_unit[static_cast<std::size_t>(t.bucket)];
                    REQUIRE(b >= 0);
                    CHECK(
                        tasks[static_cast<std::size_t>(b)].layer ==
                        static_cast<int>(std::find(u.unit_of.begin(), u.unit_of.end(), t.bucket) - u.unit_of.begin()));
                    CHECK(at[static_cast<std::size_t>(b)].end_ns <= at[i].start_ns);
                    ++checked_rs;
                }
                if (is_fsdp_collective(r, t) && t.collective != CollectiveKind::allgather &&
                    at[i].end_ns >= last_reduction_end) {
                    last_reduction_end = at[i].end_ns;
                    last_reduction_end_task = static_cast<int>(i);
                }
                if (t.transfer == Transfer::d2h) last_d2h_end = std::max(last_d2h_end, at[i].end_ns);
            }
            CHECK(checked_compute > 0);
            CHECK(checked_rs == static_cast<int>(u.numel.size()));
            CHECK(checked_h2d == (offload ? 2 * static_cast<int>(u.numel.size()) - 1 : 0));
            REQUIRE(last_reduction_end_task >= 0);
            int steps = 0;
            for (std::size_t i = 0; i < tasks.size(); ++i) {
                if (tasks[i].phase != Phase::optimizer) continue;
                ++steps;
                CHECK(at[i].start_ns >= last_reduction_end);
                CHECK(tasks[i].kind == (offload ? TaskKind::host_compute : TaskKind::compute));
                if (offload) CHECK(at[i].start_ns >= last_d2h_end);
            }
            CHECK(steps == 1);
            if (offload) {
                CHECK(r.metrics.d2h_bytes == 4 * shard_total(u.numel, 16));
                // FULL_SHARD unshards every child twice and the root once.
                CHECK(r.metrics.h2d_bytes == 4 * (2 * shard_total(u.numel, 16) - padded(u.numel[0], 16) / 16));
            }
        }
}

TEST_CASE("fsdp model states: 16 bytes per owned parameter (§3.9, §8)") {
    const auto sharded_states = [](const SimResult& r, int n) {
        return 16 * shard_total(transformer_units(*r.workload).numel, n);
    };
    SECTION("FULL_SHARD over 16 ranks: 16 Psi / N from padded units") {
        SimResult r = run(fsdp_config("gpt2-xl", 2, 8));
        const std::int64_t owned = shard_total(transformer_units(*r.workload).numel, 16);
        CHECK(resident(r, MemCategory::parameters) == 4 * owned);
        CHECK(resident(r, MemCategory::optimizer_states) == 8 * owned);
        // The fp32 gradient shard is not resident: it comes with each unit's reduction.
        CHECK(resident(r, MemCategory::gradients) == 0);
        CHECK(max_over_step(r, MemCategory::gradients) >= 4 * owned);
        CHECK(resident(r, MemCategory::parameters) + resident(r, MemCategory::optimizer_states) ==
              sharded_states(r, 16) * 3 / 4);
        CHECK(at_peak(r, MemCategory::parameters) == 4 * owned);
        CHECK(at_peak(r, MemCategory::optimizer_states) == 8 * owned);
        // The unsharded bf16 parameters replace autocast's weight copies.
        CHECK(at_peak(r, MemCategory::other) == 0);
        CHECK(max_over_step(r, MemCategory::gathered) > 0);
    }
    SECTION("HYBRID_SHARD shards over the node") {
        Config c = fsdp_config("gpt2-xl", 2, 8);
        c.knobs = {{"sharding_strategy", "HYBRID_SHARD"}};
        SimResult r = run(c);
        CHECK(resident(r, MemCategory::parameters) + resident(r, MemCategory::optimizer_states) ==
              sharded_states(r, 8) * 3 / 4);
        CHECK(max_over_step(r, MemCategory::gradients) >= sharded_states(r, 8) / 4);
    }
    SECTION("NO_SHARD keeps 16 Psi") {
        Config c = fsdp_config("gpt2-xl", 2, 8);
        c.knobs = {{"sharding_strategy", "NO_SHARD"}};
        SimResult r = run(c);
        const std::int64_t psi = r.workload->param_count();
        CHECK(resident(r, MemCategory::parameters) == 4 * psi);
        CHECK(resident(r, MemCategory::optimizer_states) == 8 * psi);
        // The flat gradients, all-reduced unit by unit, are all there at the step.
        CHECK(resident(r, MemCategory::gradients) == 0);
        CHECK(max_over_step(r, MemCategory::gradients) >= 4 * psi);
        CHECK(max_over_step(r, MemCategory::gathered) == 0);
    }
    SECTION("SGD keeps no optimizer state") {
        Config c = fsdp_config("gpt2-xl", 2, 8);
        c.optimizer = OptimizerKind::sgd;
        SimResult r = run(c);
        CHECK(resident(r, MemCategory::optimizer_states) == 0);
        CHECK(resident(r, MemCategory::parameters) == 4 * shard_total(transformer_units(*r.workload).numel, 16));
    }
    SECTION("cpu_offload moves every model state to the host") {
        Config c = fsdp_config("gpt2-xl", 2, 8);
        c.knobs = {{"cpu_offload", "true"}};
        SimResult r = run(c);
        for (MemCategory m : {MemCategory::parameters, MemCategory::gradients, MemCategory::optimizer_states})
            CHECK(resident(r, m) == 0);
        // Only the transient unsharded gradients remain on the device.
        CHECK(at_peak(r, MemCategory::parameters) == 0);
        CHECK(at_peak(r, MemCategory::optimizer_states) == 0);
        CHECK(r.metrics.host_memory_bytes >= sharded_states(r, 16));
        CHECK(r.metrics.host_compute_s > 0);
    }
    SECTION("SHARD_GRAD_OP holds every unit's unsharded parameters from forward to backward") {
        Config c = fsdp_config("gpt2-xl", 2, 8);
        c.knobs = {{"sharding_strategy", "SHARD_GRAD_OP"}};
        SimResult r = run(c);
        CHECK(max_over_step(r, MemCategory::gathered) == sum_padded(transformer_units(*r.workload).numel, 16) * 2);
        SimResult full = run(fsdp_config("gpt2-xl", 2, 8));
        CHECK(max_over_step(full, MemCategory::gathered) < max_over_step(r, MemCategory::gathered) / 4);
    }
    SECTION("llama2-70b FULL_SHARD on 8 GPUs does not fit") {
        Config c = fsdp_config("llama2-70b", 1, 8);
        SimResult r = run(c);
        CHECK(r.metrics.peak_memory_bytes >= 16 * r.workload->param_count() / 8);
        CHECK_FALSE(r.metrics.fits);
    }
}

TEST_CASE("fsdp prefetch and the rate limiter (§3.4, §3.5)") {
    Config c = fsdp_config("gpt2-xl", 2, 8);
    c.micro_batch = 8;
    SimResult pre = run(c);
    SECTION("limit_all_gathers=false can only raise peak gathered memory") {
        for (bool forward_prefetch : {false, true})
            for (const char* backward : {"BACKWARD_PRE", "BACKWARD_POST", "NONE"}) {
                CAPTURE(forward_prefetch, backward);
                Config k = c;
                k.knobs = {{"forward_prefetch", forward_prefetch ? "true" : "false"}, {"backward_prefetch", backward}};
                const std::int64_t limited = max_over_step(run(k), MemCategory::gathered);
                k.knobs.emplace_back("limit_all_gathers", "false");
                CHECK(max_over_step(run(k), MemCategory::gathered) >= limited);
            }
        // With forward_prefetch nothing but the limiter holds the all-gathers back.
        Config k = c;
        k.knobs = {{"forward_prefetch", "true"}, {"limit_all_gathers", "false"}};
        const std::int64_t unlimited = max_over_step(run(k), MemCategory::gathered);
        k.knobs = {{"forward_prefetch", "true"}};
        CHECK(unlimited > max_over_step(run(k), MemCategory::gathered));
    }
    SECTION("backward_prefetch NONE exposes the backward all-gathers") {
        Config k = c;
        k.knobs = {{"backward_prefetch", "NONE"}};
        SimResult none = run(k);
        CHECK(none.metrics.step_time_s > pre.metrics.step_time_s);
        CHECK(none.metrics.exposed_comm_s > pre.metrics.exposed_comm_s);
        CHECK(max_over_step(none, MemCategory::gathered) <= max_over_step(pre, MemCategory::gathered));
    }
    SECTION("BACKWARD_POST issues the next all-gather during this unit's backward: PRE <= POST < NONE") {
        Config k = c;
        k.knobs = {{"backward_prefetch", "BACKWARD_POST"}};
        SimResult post = run(k);
        k.knobs = {{"backward_prefetch", "NONE"}};
        SimResult none = run(k);
        CHECK(pre.metrics.step_time_s <= post.metrics.step_time_s);
        CHECK(post.metrics.step_time_s < none.metrics.step_time_s);
        CHECK(post.metrics.exposed_comm_s < none.metrics.exposed_comm_s);
        // Each backward all-gather of a block but the first (the last block's, issued by its own
        // pre-backward hook) waits, under NONE, for the backward of the block before it (the
        // compute task just before the unit's first backward task); under BACKWARD_POST it
        // starts during that block's backward.
        const auto check = [](const SimResult& r, bool overlapped) {
            const Wrap u = transformer_units(*r.workload);
            const auto& tasks = r.plan.tasks;
            const auto& at = r.schedule.timings;
            std::vector<int> first_backward(u.numel.size(), -1);
            std::vector<int> compute_before(u.numel.size(), -1);
            int previous_compute = -1;
            for (std::size_t i = 0; i < tasks.size(); ++i) {
                const Task& t = tasks[i];
                if (t.kind != TaskKind::compute || t.layer < 0) continue;
                const auto unit = static_cast<std::size_t>(u.unit_of[static_cast<std::size_t>(t.layer)]);
                if (t.phase == Phase::backward && first_backward[unit] < 0) {
                    first_backward[unit] = static_cast<int>(i);
                    compute_before[unit] = previous_compute;
                }
                previous_compute = static_cast<int>(i);
            }
            int backward_gathers = 0, overlapping = 0;
            for (std::size_t i = 0; i < tasks.size(); ++i) {
                const Task& t = tasks[i];
                if (!is_fsdp_collective(r, t) || t.collective != CollectiveKind::allgather) continue;
                const auto unit = static_cast<std::size_t>(t.bucket);
                if (unit == 0 || static_cast<int>(i) < compute_before[unit]) continue;  // a forward all-gather
                const int before = compute_before[unit];
                const Task& b = tasks[static_cast<std::size_t>(before)];
                // The first one follows the root's backward (the output layers) and is not prefetched.
                if (b.phase != Phase::backward || u.unit_of[static_cast<std::size_t>(b.layer)] == 0) continue;
                ++backward_gathers;
                overlapping += at[i].start_ns < at[static_cast<std::size_t>(before)].end_ns;
            }
            CHECK(backward_gathers == static_cast<int>(u.numel.size()) - 2);
            CHECK(overlapping == (overlapped ? backward_gathers : 0));
        };
        check(post, true);
        check(none, false);
    }
    SECTION("forward_prefetch is not slower") {
        Config k = c;
        k.knobs = {{"forward_prefetch", "true"}};
        CHECK(run(k).metrics.step_time_s <= pre.metrics.step_time_s);
    }
}

TEST_CASE("fsdp gradient accumulation under no_sync (§3.3, §6)") {
    Config c = fsdp_config("gpt2-large", 2, 8);
    SimResult one = run(c);
    c.grad_accum = 3;
    SimResult three = run(c);
    const Wrap u = transformer_units(*three.workload);
    const std::int64_t owned = shard_total(u.numel, 16);
    // One reduction per step, in the last micro-step.
    CHECK(traffic(three, CollectiveKind::reduce_scatter).bytes == traffic(one, CollectiveKind::reduce_scatter).bytes);
    for (const Task& t : three.plan.tasks)
        if (is_fsdp_collective(three, t) && t.collective == CollectiveKind::reduce_scatter) CHECK(t.micro_step == 2);
    // FULL_SHARD still gathers in every micro-step.
    CHECK(traffic(three, CollectiveKind::allgather).bytes == 3 * traffic(one, CollectiveKind::allgather).bytes);
    // The unsharded bf16 gradients of every unit accumulate; the fp32 shards come with
    // the last micro-step's reductions, each replacing its unit's unsharded gradient.
    CHECK(max_over_step(three, MemCategory::gradients) >= sum_padded(u.numel, 16) * 2);
    CHECK(max_over_step(three, MemCategory::gradients) < sum_padded(u.numel, 16) * 2 + 4 * owned);
    CHECK(max_over_step(one, MemCategory::gradients) < sum_padded(u.numel, 16) * 2);
    CHECK(three.metrics.peak_memory_bytes > one.metrics.peak_memory_bytes);

    SECTION("SHARD_GRAD_OP keeps the parameters unsharded across micro-steps: gathers only in the first") {
        c.knobs = {{"sharding_strategy", "SHARD_GRAD_OP"}};
        SimResult r = run(c);
        const Traffic ag = traffic(r, CollectiveKind::allgather);
        CHECK(ag.count == static_cast<int>(u.numel.size()));
        CHECK(ag.bytes == sum_padded(u.numel, 16) * 2);
        for (const Task& t : r.plan.tasks)
            if (is_fsdp_collective(r, t) && t.collective == CollectiveKind::allgather) CHECK(t.micro_step == 0);
    }
}

TEST_CASE("fsdp without no_sync reduces every micro-step and accumulates sharded gradients (§3.3, §6)") {
    Config c = fsdp_config("llama2-7b", 1, 8);
    const int k = 4;
    c.grad_accum = k;
    SimResult with = run(c);  // the default: no_sync()
    c.knobs = {{"no_sync", "false"}};
    SimResult without = run(c);
    Config one_config = fsdp_config("llama2-7b", 1, 8);
    SimResult one = run(one_config);
    const Wrap u = transformer_units(*without.workload);
    const Traffic rs_with = traffic(with, CollectiveKind::reduce_scatter);
    const Traffic rs_without = traffic(without, CollectiveKind::reduce_scatter);
    CHECK(rs_without.bytes == k * rs_with.bytes);
    CHECK(rs_without.count == k * static_cast<int>(u.numel.size()));
    std::vector<int> per_micro_step(k, 0);
    for (const Task& t : without.plan.tasks)
        if (is_fsdp_collective(without, t) && t.collective == CollectiveKind::reduce_scatter)
            ++per_micro_step[static_cast<std::size_t>(t.micro_step)];
    CHECK(all_equal(per_micro_step, static_cast<int>(u.numel.size())));
    // FULL_SHARD re-gathers every micro-step either way.
    CHECK(traffic(without, CollectiveKind::allgather).bytes == traffic(with, CollectiveKind::allgather).bytes);
    CHECK(traffic(without, CollectiveKind::allgather).bytes == k * traffic(one, CollectiveKind::allgather).bytes);
    // No unsharded gradient is held across micro-steps: the peak is one micro-step's,
    // plus, after the first, one unit's unsharded gradient beside every kept fp32 shard.
    CHECK(max_over_step(without, MemCategory::gradients) < max_over_step(with, MemCategory::gradients));
    CHECK(max_over_step(without, MemCategory::gradients) >= max_over_step(one, MemCategory::gradients));
    const std::int64_t largest_unit = *std::max_element(u.numel.begin(), u.numel.end());
    CHECK(max_over_step(without, MemCategory::gradients) - max_over_step(one, MemCategory::gradients) <=
          padded(largest_unit, 8) * 2);
    CHECK(max_over_step(with, MemCategory::gradients) >= sum_padded(u.numel, 8) * 2);
    CHECK(at_peak(without, MemCategory::gradients) < at_peak(with, MemCategory::gradients));
    CHECK(without.metrics.peak_memory_bytes < with.metrics.peak_memory_bytes);
    CHECK(mentions(without, "a gradient reduction every micro-step"));
    CHECK_FALSE(mentions(without, "unsharded gradients accumulate"));

    SECTION("SHARD_GRAD_OP frees after every backward, so it gathers every micro-step") {
        c.knobs = {{"no_sync", "false"}, {"sharding_strategy", "SHARD_GRAD_OP"}};
        SimResult r = run(c);
        CHECK(traffic(r, CollectiveKind::allgather).count == k * static_cast<int>(u.numel.size()));
        CHECK(traffic(r, CollectiveKind::reduce_scatter).bytes == rs_without.bytes);
    }
}

TEST_CASE("fsdp cpu_offload steps torch.optim.Adam on the CPU (§3.6)") {
    Config c = fsdp_config("gpt2-xl", 2, 8);
    c.knobs = {{"cpu_offload", "true"}};
    SimResult r = run(c);
    const auto cal = calib::load_hardware("h100-sxm");
    REQUIRE(cal.host.cpu_torch_adam_params_per_s > 0);
    const std::int64_t owned = shard_total(transformer_units(*r.workload).numel, 16);
    int steps = 0;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.phase != Phase::optimizer) continue;
        ++steps;
        CHECK(t.kind == TaskKind::host_compute);
        CHECK(t.torch_cpu_optimizer);
        const std::int64_t duration = r.schedule.timings[i].end_ns - r.schedule.timings[i].start_ns;
        const double expected = static_cast<double>(owned) / cal.host.cpu_torch_adam_params_per_s * 1e9;
        CHECK(std::abs(static_cast<double>(duration) - expected) <= 1.0);
    }
    CHECK(steps == 1);
}

TEST_CASE("fsdp is deterministic: byte-identical reports") {
    Config c = fsdp_config("gpt2-large", 4, 8);
    c.grad_accum = 2;
    c.knobs = {{"sharding_strategy", "HYBRID_SHARD"}, {"forward_prefetch", "true"}, {"cpu_offload", "true"}};
    const auto cal = calib::load_hardware("h100-sxm");
    const std::string a = report_json(simulate(c, cal), c, cal).dump(2);
    const std::string b = report_json(simulate(c, cal), c, cal).dump(2);
    CHECK(a == b);
}

TEST_CASE("fsdp on one rank runs as NO_SHARD without collectives") {
    Config c = fsdp_config("gpt2", 1, 1);
    SimResult r = run(c);
    CHECK(r.metrics.collectives.empty());
    CHECK(resident(r, MemCategory::parameters) == 4 * r.workload->param_count());
}

TEST_CASE("fsdp: one process group, one NCCL stream: all-gathers and reduce-scatters never overlap (§3.4)") {
    // ProcessGroupNCCL launches every collective of a group on that group's one
    // NCCL stream, in issue order, whichever user stream (FSDP's unshard or
    // post-backward stream) issued it. And _post_backward_hook calls
    // _post_backward_reshard (BACKWARD_POST's prefetch of the next unit) before
    // _reduce_grad, so under BACKWARD_POST the next all-gather is issued before
    // this unit's reduce-scatter and the reduce-scatter queues behind it.
    for (const char* prefetch : {"BACKWARD_POST", "BACKWARD_PRE"}) {
        INFO(prefetch);
        Config c = fsdp_config("gpt2-xl", 2, 8);  // inter-node: the collectives are long
        c.micro_batch = 4;
        c.knobs = {{"backward_prefetch", prefetch}};
        const SimResult r = run(c);
        std::vector<std::int32_t> shard;  // the shard group's collectives, in issue order
        for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
            const Task& t = r.plan.tasks[i];
            if (t.kind == TaskKind::collective &&
                (t.collective == CollectiveKind::allgather || t.collective == CollectiveKind::reduce_scatter))
                shard.push_back(static_cast<std::int32_t>(i));
        }
        REQUIRE(shard.size() > 2);
        std::set<int> streams;
        for (auto i : shard) streams.insert(r.plan.tasks[static_cast<std::size_t>(i)].stream);
        CHECK(streams.size() == 1);
        // No two of them run at once: each starts after the one issued before it ends.
        for (std::size_t k = 1; k < shard.size(); ++k)
            CHECK(r.schedule.timings[static_cast<std::size_t>(shard[k])].start_ns >=
                  r.schedule.timings[static_cast<std::size_t>(shard[k - 1])].end_ns);
        if (std::string(prefetch) != "BACKWARD_POST") continue;
        // In backward, a reduce-scatter issued right after an all-gather follows the
        // all-gather of the next unit, not its own unit's (which the issue order
        // RS(u), AG(u+1) of a reduce-before-prefetch hook would give).
        int checked = 0;
        for (std::size_t k = 1; k < shard.size(); ++k) {
            const Task& t = r.plan.tasks[static_cast<std::size_t>(shard[k])];
            const Task& before = r.plan.tasks[static_cast<std::size_t>(shard[k - 1])];
            if (t.collective != CollectiveKind::reduce_scatter || before.collective != CollectiveKind::allgather)
                continue;
            CHECK(before.bucket != t.bucket);
            ++checked;
        }
        CHECK(checked > 10);
    }
}

TEST_CASE("fsdp fp32 gradient shards exist from each unit's reduce-scatter until zero_grad (_post_backward_hook)") {
    // torch's _post_backward_hook -> _reduce_grad -> _accumulate_sharded_grad: each
    // unit's reduce-scatter output, cast to the flat parameter's fp32, is kept in
    // _saved_grad_shard; zero_grad(set_to_none=True) after the step frees it.
    Config c = fsdp_config("gpt2-xl", 2, 8);
    SimResult r = run(c);
    const Wrap u = transformer_units(*r.workload);
    const int n = 16;
    std::int64_t kept_at_reductions = 0, freed_at_step = 0;
    int reductions = 0;
    for (const Task& t : r.plan.tasks) {
        std::int64_t up = 0, down = 0;
        for (const auto& d : r.plan.memory_of(t))
            if (d.category == MemCategory::gradients) (d.bytes > 0 ? up : down) += d.bytes;
        if (is_fsdp_collective(r, t) && t.collective == CollectiveKind::reduce_scatter) {
            ++reductions;
            const std::int64_t numel = u.numel[static_cast<std::size_t>(t.bucket)];
            CHECK(up == 4 * (padded(numel, n) / n));  // this unit's fp32 shard, nothing else
            kept_at_reductions += up;
        } else if (t.phase == Phase::optimizer) {
            CHECK(up == 0);
            freed_at_step -= down;
        }
    }
    CHECK(reductions > 40);
    CHECK(kept_at_reductions == 4 * shard_total(u.numel, n));
    CHECK(freed_at_step == kept_at_reductions);
    // The peak (in forward, with the activations) holds none of them; before this
    // rule it held all (4 B per owned parameter).
    CHECK(at_peak(r, MemCategory::gradients) < 4 * shard_total(u.numel, n));

    SECTION("with CPU offload the host keeps a pinned gradient shard for good (_cpu_grad)") {
        c.knobs = {{"cpu_offload", "true"}};
        SimResult o = run(c);
        CHECK(resident(o, MemCategory::host) == 16 * shard_total(transformer_units(*o.workload).numel, n));
        CHECK(max_over_step(o, MemCategory::gradients) >= 4 * shard_total(u.numel, n));
    }
}

TEST_CASE(
    "Lightning's FSDPStrategy (lightning:fsdp, fsdp_cpu_offload) against torch's constructor: wrapping, "
    "precision, and a report that says which applied") {
    // Lightning strategies/fsdp.py: no auto_wrap_policy unless given, so
    // FullyShardedDataParallel(model) makes one unit; FSDPPrecision under
    // bf16-mixed (Lightning >= 2.6): MixedPrecision(bf16, bf16) with autocast.
    Config lightning = fsdp_config("gpt2-xl", 1, 8);
    lightning.strategy = "lightning:fsdp";
    REQUIRE(resolve_lightning_name(lightning));
    CHECK(lightning.strategy == "fsdp");
    const SimResult l = run(lightning);
    const SimResult torch = run(fsdp_config("gpt2-xl", 1, 8));
    const Traffic l_ag = traffic(l, CollectiveKind::allgather);
    CHECK(l_ag.count == 1);  // the root, once: it stays unsharded from forward to backward
    CHECK(l_ag.bytes == padded(l.workload->param_count(), 8) * 2);
    CHECK(traffic(torch, CollectiveKind::allgather).count > 40);
    CHECK(mentions(l, "Lightning FSDPStrategy"));
    CHECK(mentions(l, "one FSDP unit for the whole model"));
    CHECK_FALSE(mentions(l, "torch FullyShardedDataParallel("));
    CHECK(mentions(torch, "torch FullyShardedDataParallel(auto_wrap_policy=transformer"));
    // One unit holds every parameter unsharded at once: a higher peak than per-block units.
    CHECK(l.metrics.peak_memory_bytes > torch.metrics.peak_memory_bytes);

    SECTION("the frontend knob itself carries Lightning's default, not the name") {
        Config c = fsdp_config("gpt2-xl", 1, 8);
        c.knobs = {{"frontend", "lightning"}};
        CHECK(traffic(run(c), CollectiveKind::allgather).count == 1);
    }
    SECTION("a given auto_wrap_policy wins over Lightning's default") {
        Config c = fsdp_config("gpt2-xl", 1, 8);
        c.strategy = "lightning:fsdp";
        c.knobs = {{"auto_wrap_policy", "transformer"}};
        resolve_lightning_name(c);
        const SimResult r = run(c);
        CHECK(traffic(r, CollectiveKind::allgather).count == traffic(torch, CollectiveKind::allgather).count);
        CHECK(mentions(r, "auto_wrap_policy=transformer"));
    }
    SECTION("fsdp_cpu_offload is Lightning's too") {
        Config c = fsdp_config("gpt2-xl", 1, 8);
        c.strategy = "fsdp_cpu_offload";
        resolve_lightning_name(c);
        const SimResult r = run(c);
        CHECK(r.metrics.host_compute_s > 0);
        CHECK(mentions(r, "Lightning FSDPStrategy"));
    }
    SECTION(
        "Lightning 2.1-2.5's fp32 parameters, as the note says to model them: fp32 all-gathers, bf16 "
        "reductions, autocast copies") {
        CHECK(mentions(l, "--set param_dtype=fp32 --set reduce_dtype=bf16"));
        Config c = lightning;
        c.knobs.emplace_back("param_dtype", "fp32");
        c.knobs.emplace_back("reduce_dtype", "bf16");
        const SimResult old = run(c);
        CHECK(traffic(old, CollectiveKind::allgather).bytes == 2 * l_ag.bytes);
        CHECK(traffic(old, CollectiveKind::reduce_scatter).bytes == traffic(l, CollectiveKind::reduce_scatter).bytes);
        CHECK(old.metrics.peak_memory_bytes > l.metrics.peak_memory_bytes);
        CHECK(mentions(old, "MixedPrecision(param_dtype=fp32, reduce_dtype=bf16)"));
    }
}

TEST_CASE(
    "FSDP's flat gradient is one copy pass per unit, paying first touch at every size under torch's allocator "
    "(the collectives' fresh buffers above 32 MiB)") {
    // One unit, fp32 (param_dtype fp32): the root's flat gradient is every parameter, 4 bytes each.
    Config c = fsdp_config("gpt2", 1, 8);
    c.precision = Precision::fp32;
    c.knobs = {{"auto_wrap_policy", "none"}};
    calib::Calibration cal = calib::load_hardware("a100-sxm");
    const SimResult r = simulate(c, cal);
    const std::int64_t params = r.workload->param_count();
    REQUIRE(params % 8 == 0);  // no padding on 8 ranks
    std::vector<std::size_t> passes;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i)
        if (r.plan.tasks[i].fresh_output) passes.push_back(i);
    REQUIRE(passes.size() == 1);
    const Task& flat = r.plan.tasks[passes.front()];
    CHECK(flat.phase == Phase::gradient_copy);
    CHECK(flat.bytes == 2 * params * 4);  // the views' gradients read, the flat one written
    // The reduce-scatter waits for it, through the predivide pass (_div_if_needed by 4 on 8 ranks).
    const auto waits_for = [&](const Task& t, std::size_t i) {
        for (std::uint32_t d = t.dep_begin; d < t.dep_begin + t.dep_count; ++d)
            if (r.plan.deps[d] == static_cast<std::int32_t>(i)) return true;
        return false;
    };
    bool reduce_after_flat = false;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& div = r.plan.tasks[i];
        if (div.phase != Phase::compression || !waits_for(div, passes.front())) continue;
        CHECK(div.bytes == 2 * params * 4);
        for (const Task& t : r.plan.tasks)
            if (t.kind == TaskKind::collective && t.collective == calib::CollectiveKind::reduce_scatter)
                reduce_after_flat |= waits_for(t, i);
    }
    CHECK(reduce_after_flat);

    // Under torch's allocator (host_memory_reuse false) against an allocator that keeps memory.
    cal.host.first_touch_gbps = 2.0;
    Config kept = c;
    kept.host_memory_reuse = true;
    const auto extra = [&](const std::string& backend, const Config& config) {
        cal.provenance.backend = backend;
        const SimResult fresh = simulate(config, cal);
        Config reuse = config;
        reuse.host_memory_reuse = true;
        const SimResult warm = simulate(reuse, cal);
        const auto a = CostModel(cal).price(fresh.plan, *fresh.workload);
        const auto b = CostModel(cal).price(warm.plan, *warm.workload);
        std::map<std::string, double> out;  // ns added, by kind of task
        for (std::size_t i = 0; i < a.size(); ++i) {
            const Task& t = fresh.plan.tasks[i];
            if (t.kind == TaskKind::collective)
                out[std::string(calib::to_string(t.collective))] += static_cast<double>(a[i] - b[i]);
            else if (t.fresh_output)
                out["flat"] += static_cast<double>(a[i] - b[i]);
        }
        return out;
    };
    const double bytes = static_cast<double>(params) * 4, ns_per_byte = 1 / 2.0;  // 2 GB/s
    // gloo: the all-gather's fresh flat temporary and its gathered output; the
    // reduce-scatter's clone of its input and its shard (62 MB, above 32 MiB too).
    // FULL_SHARD's root gathers once (it stays unsharded after forward).
    const auto gloo = extra("cpu-gloo-openblas", c);
    CHECK(gloo.at("allgather") == Approx(2 * bytes * ns_per_byte).epsilon(1e-6));
    CHECK(gloo.at("reduce_scatter") == Approx((bytes + bytes / 8) * ns_per_byte).epsilon(1e-6));
    CHECK(gloo.at("flat") == Approx(bytes * ns_per_byte).epsilon(1e-6));
    // MPI makes no temporaries: only what FSDP itself allocates.
    const auto mpi = extra("cpu-mpi-openblas", c);
    CHECK(mpi.at("allgather") == Approx(bytes * ns_per_byte).epsilon(1e-6));
    CHECK(mpi.at("reduce_scatter") == Approx(bytes / 8 * ns_per_byte).epsilon(1e-6));
    // A small model: the collectives' buffers under 32 MiB come back warm from
    // glibc's heap; the flat gradient, freed last, is trimmed and faulted in again.
    Config small = c;
    small.model = "mlp-2x1024";
    small.seq_len = 0;
    const double small_bytes = static_cast<double>(simulate(small, cal).workload->param_count()) * 4;
    REQUIRE(small_bytes < 32.0 * (1 << 20));
    const auto small_extra = extra("cpu-gloo-openblas", small);
    for (const auto& [kind, ns] : small_extra) {
        INFO(kind);
        if (kind == "flat")
            CHECK(ns == Approx(small_bytes * ns_per_byte).epsilon(1e-6));
        else
            CHECK(ns == 0);
    }
    CHECK(small_extra.count("flat") == 1);
}

TEST_CASE("FSDP divides each unit's gradient around its reduction by torch's predivide and postdivide factors") {
    // _reduce_grad: _div_if_needed(padded unsharded gradient, predivide) before the
    // reduce-scatter, _div_if_needed(shard, postdivide) after it; the factors are
    // DefaultState._get_gradient_predivide_factor(world) and world / it.
    struct Case {
        int ranks;
        std::int64_t predivide;  // 0: no pass
        bool postdivide;
    };
    for (const Case k : {Case{2, 2, false}, Case{4, 2, true}, Case{8, 4, true}, Case{16, 4, true}, Case{6, 4, true}}) {
        INFO(k.ranks << " ranks");
        Config c = fsdp_config("mlp-4x512", 1, k.ranks);
        c.seq_len = 0;
        c.precision = Precision::fp32;
        c.knobs = {{"auto_wrap_policy", "size"}, {"min_num_params", "262144"}};
        const SimResult r = run(c);
        std::int64_t units = 0, pre = 0, post = 0;
        for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
            const Task& t = r.plan.tasks[i];
            if (t.kind == TaskKind::collective && t.collective == calib::CollectiveKind::reduce_scatter) {
                ++units;
                // The reduce-scatter waits for a division over its whole (padded) input.
                bool after_division = false;
                for (std::uint32_t d = t.dep_begin; d < t.dep_begin + t.dep_count; ++d) {
                    const Task& dep = r.plan.tasks[static_cast<std::size_t>(r.plan.deps[d])];
                    after_division |= dep.phase == Phase::compression && dep.bytes == 2 * t.bytes;
                }
                CHECK(after_division);
            }
            if (t.phase != Phase::compression) continue;
            CHECK(t.kind == TaskKind::compute);
            CHECK(static_cast<double>(t.bytes) == Approx(8 * t.flops));  // fp32 read and written, one op each
            bool feeds_reduction = false;
            for (const Task& u : r.plan.tasks)
                for (std::uint32_t d = u.dep_begin; d < u.dep_begin + u.dep_count; ++d)
                    feeds_reduction |= r.plan.deps[d] == static_cast<std::int32_t>(i) && u.kind == TaskKind::collective;
            ++(feeds_reduction ? pre : post);
        }
        CHECK(units == 4);
        CHECK(pre == (k.predivide > 1 ? units : 0));
        CHECK(post == (k.postdivide ? units : 0));
    }
}

TEST_CASE("on a CPU backend FSDP's synchronous collectives hold the model's thread: no layer computes while one runs") {
    // _all_gather_flat_param and _reduce_grad call dist.all_gather / dist.reduce_scatter_single
    // without async_op: on GPUs the wait is a stream dependency, on CPU backends the calling thread
    // blocks in Work::wait().
    calib::Calibration gpu = calib::load_hardware("a100-sxm");
    calib::Calibration cpu = gpu;
    cpu.provenance.backend = "cpu-gloo-openblas";  // the same prices, a CPU backend's semantics
    using Settings = std::vector<std::pair<std::string, std::string>>;
    const std::vector<Settings> variants = {
        {{"sharding_strategy", "FULL_SHARD"}},
        {{"sharding_strategy", "SHARD_GRAD_OP"}},
        {{"sharding_strategy", "NO_SHARD"}},
        {{"sharding_strategy", "FULL_SHARD"}, {"backward_prefetch", "BACKWARD_POST"}},
        {{"sharding_strategy", "FULL_SHARD"}, {"backward_prefetch", "NONE"}},
        {{"sharding_strategy", "FULL_SHARD"}, {"forward_prefetch", "true"}},
    };
    // Under accumulation the next micro-step's first all-gathers wait too: the
    // model's thread issues them once the micro-step before returns from backward.
    for (const int accumulation : {1, 2})
        for (const Settings& knobs : variants) {
            INFO(knobs.back().first << "=" << knobs.back().second << ", grad_accum " << accumulation);
            Config c = fsdp_config("gpt2", 1, 8);
            c.knobs = knobs;
            c.grad_accum = accumulation;
            const SimResult on_gpu = simulate(c, gpu);
            const SimResult on_cpu = simulate(c, cpu);
            // Pairs of tasks, the first of kind `a` and the second of kind `b`, that run at once.
            auto overlapping = [](const SimResult& r, auto&& a, auto&& b) {
                int pairs = 0;
                for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
                    if (!a(r.plan.tasks[i])) continue;
                    for (std::size_t j = 0; j < r.plan.tasks.size(); ++j) {
                        if (j == i || !b(r.plan.tasks[j])) continue;
                        const auto& x = r.schedule.timings[i];
                        const auto& y = r.schedule.timings[j];
                        pairs += x.start_ns < y.end_ns && y.start_ns < x.end_ns;
                    }
                }
                return pairs;
            };
            const auto fsdp_collective = [](const Task& t) {
                return t.role == CollectiveRole::parameter_gather || t.role == CollectiveRole::gradient_reduce;
            };
            const auto layer_compute = [](const Task& t) { return t.kind == TaskKind::compute && t.layer >= 0; };
            const auto collective = [](const Task& t) { return t.kind == TaskKind::collective; };
            auto overlapped = [&](const SimResult& r) { return overlapping(r, fsdp_collective, layer_compute); };
            // Nor does a collective start while one it issued before runs: the backward prefetch's
            // all-gather queues behind the reduce-scatter before it (a torch 2.15 CPU profile of
            // FULL_SHARD over gloo: never one beside the other). Each pair counts twice here.
            auto collectives_overlapped = [&](const SimResult& r) { return overlapping(r, collective, collective); };
            CHECK(overlapped(on_gpu) > 0);
            CHECK(overlapped(on_cpu) == 0);
            CHECK(collectives_overlapped(on_cpu) == 0);
            CHECK(on_cpu.metrics.step_time_s > on_gpu.metrics.step_time_s);
            CHECK(on_cpu.metrics.exposed_comm_s > on_gpu.metrics.exposed_comm_s);
        }
    // DDP's reducer runs its allreduces asynchronously on every backend: the same plan.
    Config ddp = fsdp_config("gpt2", 1, 8);
    ddp.strategy = "ddp";
    ddp.knobs.clear();
    CHECK(simulate(ddp, cpu).metrics.step_time_s == simulate(ddp, gpu).metrics.step_time_s);
}

// ---- fsdp2: torch's fully_shard (_fsdp_collectives.py, _fsdp_param_group.py, torch 2.15)

namespace {

Config fully_shard_config(const std::string& model, int nodes, int gpus_per_node) {
    Config c = fsdp_config(model, nodes, gpus_per_node);
    c.strategy = "fsdp2";
    return c;
}

bool depends_on(const Plan& p, std::size_t task, std::int32_t on) {
    const auto deps = p.deps_of(p.tasks[task]);
    return std::find(deps.begin(), deps.end(), on) != deps.end();
}

}  // namespace

TEST_CASE("fsdp2 copies each all-gather out into the unsharded parameters before the unit computes") {
    const SimResult r = run(fully_shard_config("gpt2-medium", 1, 8));
    const Wrap u = transformer_units(*r.workload);
    const auto& tasks = r.plan.tasks;
    int gathers = 0, copies = 0;
    std::vector<std::int32_t> copy_outs;  // in program order
    std::vector<bool> in_backward;
    bool backward_started = false;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        const Task& t = tasks[i];
        if (t.kind == TaskKind::compute && t.phase == Phase::backward) backward_started = true;
        if (is_fsdp_collective(r, t) && t.collective == CollectiveKind::allgather) ++gathers;
        if (t.phase != Phase::parameter_copy) continue;
        ++copies;
        // split_with_sizes_copy reads the all-gather output and writes the parameters:
        // twice the unit in bf16, on the compute stream, after that unit's all-gather.
        const auto deps = r.plan.deps_of(t);
        REQUIRE(deps.size() == 1);
        const Task& gather = tasks[static_cast<std::size_t>(deps[0])];
        CHECK(gather.collective == CollectiveKind::allgather);
        CHECK(t.bytes == 2 * padded(u.numel[static_cast<std::size_t>(gather.bucket)], 8) * 2);
        CHECK(stream_name(r, t) == "compute");
        // The unit's next compute task waits for the copy.
        std::size_t next = i + 1;
        while (next < tasks.size() && (tasks[next].kind != TaskKind::compute || tasks[next].layer < 0)) ++next;
        REQUIRE(next < tasks.size());
        CHECK(depends_on(r.plan, next, static_cast<std::int32_t>(i)));
        copy_outs.push_back(static_cast<std::int32_t>(i));
        in_backward.push_back(backward_started);
    }
    CHECK(copies == gathers);
    // The all-gathers in flight: in forward, group k's waits for group k-2's copy-out
    // (all_gather_state); in backward the prefetch waits for the copy-out before it.
    for (std::size_t k = 0; k < copy_outs.size(); ++k) {
        const auto gather = static_cast<std::size_t>(r.plan.deps_of(tasks[static_cast<std::size_t>(copy_outs[k])])[0]);
        if (!in_backward[k] && k >= 2 && !in_backward[k - 2]) CHECK(depends_on(r.plan, gather, copy_outs[k - 2]));
        if (in_backward[k] && k >= 1 && in_backward[k - 1]) CHECK(depends_on(r.plan, gather, copy_outs[k - 1]));
    }
}

TEST_CASE("fsdp2 reduces through a chunk_cat copy-in, with AVG for bf16 and fp32 and divisions for fp16") {
    Config c = fully_shard_config("gpt2-medium", 1, 8);
    for (const char* reduce : {"bf16", "fp32", "fp16"}) {
        CAPTURE(reduce);
        c.knobs = {{"reduce_dtype", reduce}};
        const SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        const std::int64_t reduce_bytes = std::string(reduce) == "fp32" ? 4 : 2;
        int copy_ins = 0, divisions = 0;
        std::int64_t reduced = 0;
        for (const Task& t : r.plan.tasks) {
            divisions += t.phase == Phase::compression;
            if (is_fsdp_collective(r, t) && t.collective == CollectiveKind::reduce_scatter) {
                reduced += t.bytes;
                CHECK(t.bytes == padded(u.numel[static_cast<std::size_t>(t.bucket)], 8) * reduce_bytes);
            }
            if (t.phase == Phase::gradient_copy) {
                ++copy_ins;
                CHECK(t.fresh_output);  // a new reduce-scatter input
            }
        }
        CHECK(reduced == sum_padded(u.numel, 8) * reduce_bytes);
        CHECK(copy_ins == static_cast<int>(u.numel.size()));
        // fp16 alone risks overflow: a division before and after each reduce-scatter.
        CHECK(divisions == (std::string(reduce) == "fp16" ? 2 * copy_ins : 0));
    }
}

TEST_CASE("fsdp2 keeps a forward all-gather output until the next all-gather: one unit more than fsdp1, in forward") {
    // In forward wait_for_unshard keeps a group's all-gather output until the next
    // group has issued its all-gather (all_gather_state); the root's post_forward
    // frees the last one. So while an all-gather runs in forward FSDP2 holds the
    // unit computing, its kept output and the new output, where FSDP1, which
    // all-gathers into the flat parameter itself, holds two. In backward each
    // output is freed after its copy-out, and at the peak, early in backward,
    // both hold the same.
    Config c = fsdp_config("llama2-7b", 1, 8);
    c.micro_batch = 2;
    c.seq_len = 4096;
    const SimResult v1 = run(c);
    c.strategy = "fsdp2";
    const SimResult v2 = run(c);
    const Wrap u = transformer_units(*v2.workload);
    const std::int64_t block = padded(u.numel[1], 8) * 2;  // bf16
    CHECK(max_over_step(v2, MemCategory::gathered) - max_over_step(v1, MemCategory::gathered) == block);
    CHECK(at_peak(v2, MemCategory::gathered) == at_peak(v1, MemCategory::gathered));
    CHECK(v2.metrics.compute_s > v1.metrics.compute_s);  // the copy-outs
}

TEST_CASE("fsdp2 knobs: reshard_after_forward, a 2-D mesh, gradient sync under accumulation") {
    SECTION("reshard_after_forward: the blocks twice (auto), the root too (true), each group once (false)") {
        Config c = fully_shard_config("gpt2-medium", 1, 8);
        const Wrap u = transformer_units(*run(c).workload);
        const int blocks = static_cast<int>(u.numel.size()) - 1;
        CHECK(traffic(run(c), CollectiveKind::allgather).count == 1 + 2 * blocks);
        c.knobs = {{"reshard_after_forward", "true"}};
        CHECK(traffic(run(c), CollectiveKind::allgather).count == 2 + 2 * blocks);
        c.knobs = {{"reshard_after_forward", "false"}};
        CHECK(traffic(run(c), CollectiveKind::allgather).count == 1 + blocks);
    }
    SECTION("hsdp shards inside a node and all-reduces each shard across nodes") {
        Config c = fully_shard_config("gpt2-medium", 2, 8);
        c.knobs = {{"hsdp", "true"}};
        const SimResult r = run(c);
        const Wrap u = transformer_units(*r.workload);
        const Traffic ar = traffic(r, CollectiveKind::allreduce);
        CHECK(ar.count == static_cast<int>(u.numel.size()));
        CHECK(all_equal(ar.group_sizes, 2));
        CHECK(ar.bytes == shard_total(u.numel, 8) * 2);
        CHECK(all_equal(traffic(r, CollectiveKind::reduce_scatter).group_sizes, 8));
    }
    SECTION("accumulation reduce-scatters every micro-step unless gradient sync is off") {
        Config c = fully_shard_config("gpt2-medium", 1, 8);
        c.grad_accum = 2;
        const int units = static_cast<int>(transformer_units(*run(c).workload).numel.size());
        CHECK(traffic(run(c), CollectiveKind::reduce_scatter).count == 2 * units);
        c.knobs = {{"requires_gradient_sync", "false"}};
        CHECK(traffic(run(c), CollectiveKind::reduce_scatter).count == units);
    }
    SECTION("FSDP1's knobs are not fully_shard's") {
        Config c = fully_shard_config("gpt2-medium", 1, 8);
        c.knobs = {{"sharding_strategy", "FULL_SHARD"}};
        CHECK_THROWS_WITH(run(c), Catch::Contains("sharding_strategy"));
    }
}
