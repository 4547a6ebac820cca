// Features every strategy shares through the StepBuilder: activation
// checkpointing, SyncBatchNorm, Lightning strategy names.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config gpt2_config() {
    Config c;
    c.model = "gpt2-medium";
    c.topology = {1, 8};
    c.micro_batch = 4;
    c.seq_len = 1024;
    c.precision = Precision::bf16_mixed;
    return c;
}

int count_phase(const Plan& plan, Phase phase) {
    return static_cast<int>(
        std::count_if(plan.tasks.begin(), plan.tasks.end(), [&](const Task& t) { return t.phase == phase; }));
}

}  // namespace

TEST_CASE("activation checkpointing recomputes every block layer once and cuts activation memory") {
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = gpt2_config();
    SimResult plain = simulate(c, cal);
    c.activation_checkpointing = true;
    SimResult ckpt = simulate(c, cal);
    int block_layers = 0;
    for (const auto& l : ckpt.workload->layers) block_layers += l.block >= 0;
    CHECK(count_phase(plain.plan, Phase::recompute) == 0);
    CHECK(count_phase(ckpt.plan, Phase::recompute) == block_layers);
    // Each recompute runs a layer's forward ops: the extra compute is the blocks' forward time.
    std::int64_t recompute_ns = 0, block_forward_ns = 0;
    for (std::size_t i = 0; i < ckpt.plan.tasks.size(); ++i) {
        const Task& t = ckpt.plan.tasks[i];
        if (t.phase == Phase::recompute) recompute_ns += ckpt.duration_ns[i];
        if (t.phase == Phase::forward && ckpt.workload->layers[static_cast<std::size_t>(t.layer)].block >= 0)
            block_forward_ns += ckpt.duration_ns[i];
    }
    CHECK(recompute_ns == block_forward_ns);
    CHECK(ckpt.metrics.compute_s > plain.metrics.compute_s);
    CHECK(ckpt.metrics.peak_memory_bytes < plain.metrics.peak_memory_bytes);
    // What stays saved through forward is one input per block plus the layers outside blocks.
    std::int64_t outside = 0;
    for (const auto& l : ckpt.workload->layers)
        if (l.block < 0) outside += l.saved_activation_bytes;
    const auto& first_block_layer =
        *std::find_if(ckpt.workload->layers.begin(), ckpt.workload->layers.end(), [](auto& l) { return l.block == 0; });
    std::int64_t blocks = 0;
    for (const auto& l : ckpt.workload->layers) blocks = std::max<std::int64_t>(blocks, l.block + 1);
    const std::int64_t kept = outside + blocks * first_block_layer.saved_activation_bytes;
    // At the end of forward, before any recompute, exactly that is held.
    std::int64_t at_forward_end = 0;
    for (std::size_t i = 0; i < ckpt.plan.tasks.size(); ++i) {
        const Task& t = ckpt.plan.tasks[i];
        if (t.phase != Phase::forward) continue;
        for (const auto& d : ckpt.plan.memory_of(t))
            if (d.category == MemCategory::activations) at_forward_end += d.bytes;
    }
    CHECK(at_forward_end == kept);
}

TEST_CASE("selective activation checkpointing by layer (torchtitan's ac_freq): every N-th block, counting from 1") {
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = gpt2_config();
    SimResult plain = simulate(c, cal);
    c.activation_checkpointing = true;
    SimResult full = simulate(c, cal);
    c.ac_freq = 2;
    SimResult every2 = simulate(c, cal);
    // The recomputed layers are exactly those of blocks 2, 4, ... (0-based 1, 3, ...).
    std::vector<int> expected, recomputed;
    for (std::size_t l = 0; l < every2.workload->layers.size(); ++l) {
        const int block = every2.workload->layers[l].block;
        if (block >= 0 && (block + 1) % 2 == 0) expected.push_back(static_cast<int>(l));
    }
    for (const Task& t : every2.plan.tasks)
        if (t.phase == Phase::recompute) recomputed.push_back(t.layer);
    std::sort(recomputed.begin(), recomputed.end());
    REQUIRE_FALSE(expected.empty());
    CHECK(recomputed == expected);
    CHECK(2 * static_cast<int>(recomputed.size()) == count_phase(full.plan, Phase::recompute));
    // Between no checkpointing and full checkpointing in both time and memory.
    CHECK(every2.metrics.step_time_s < full.metrics.step_time_s);
    CHECK(every2.metrics.step_time_s > plain.metrics.step_time_s);
    CHECK(every2.metrics.peak_memory_bytes > full.metrics.peak_memory_bytes);
    CHECK(every2.metrics.peak_memory_bytes < plain.metrics.peak_memory_bytes);
    // ac_freq means something only with checkpointing.
    c.activation_checkpointing = false;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--activation-checkpointing"));
}

TEST_CASE("with FSDP-like dependencies the recompute waits for what backward waits for") {
    // The StepBuilder hands backward()'s deps to the segment's first recompute task.
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = gpt2_config();
    c.activation_checkpointing = true;
    SimResult r = simulate(c, cal);
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.phase != Phase::backward || t.layer < 0) continue;
        if (r.workload->layers[static_cast<std::size_t>(t.layer)].block < 0) continue;
        // Every block layer's backward starts after some recompute of the same micro-step.
        bool after_recompute = false;
        for (std::size_t j = 0; j < i; ++j)
            after_recompute = after_recompute || (r.plan.tasks[j].phase == Phase::recompute &&
                                                  r.schedule.timings[j].end_ns <= r.schedule.timings[i].start_ns);
        CHECK(after_recompute);
    }
}

TEST_CASE("SyncBatchNorm adds a forward all-gather and a backward all-reduce per BatchNorm layer") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c;
    c.model = "resnet50";
    c.topology = {2, 8};
    c.micro_batch = 32;
    SimResult plain = simulate(c, cal);
    c.sync_batchnorm = true;
    SimResult synced = simulate(c, cal);
    int bn_layers = 0;
    std::int64_t gather_bytes = 0, reduce_bytes = 0;
    for (const auto& l : synced.workload->layers)
        if (l.buffer_bytes > 0) {
            ++bn_layers;
            const std::int64_t channels = (l.buffer_bytes - 8) / 8;
            gather_bytes += 16 * (2 * channels + 1) * 4;
            reduce_bytes += 2 * channels * 4;
        }
    REQUIRE(bn_layers == 53);
    std::int64_t got_gather = 0, got_reduce = 0;
    int gathers = 0;
    for (const auto& t : synced.plan.tasks) {
        if (t.kind != TaskKind::collective ||
            synced.plan.streams[static_cast<std::size_t>(t.stream)].name != "sync_batchnorm")
            continue;
        if (t.collective == CollectiveKind::allgather) got_gather += t.bytes, ++gathers;
        if (t.collective == CollectiveKind::allreduce) got_reduce += t.bytes;
    }
    CHECK(gathers == bn_layers);
    CHECK(got_gather == gather_bytes);
    CHECK(got_reduce == reduce_bytes);
    CHECK(synced.metrics.step_time_s > plain.metrics.step_time_s);
}

TEST_CASE("Lightning names map to strategies and knobs, and the user's --set still wins") {
    Config c;
    c.strategy = "deepspeed_stage_3_offload";
    c.knobs = {{"offload_param", "none"}};
    auto launch = resolve_lightning_name(c);
    REQUIRE(launch);
    CHECK(c.strategy == "deepspeed");
    // The alias's knobs come first, so the user's later value overrides.
    CHECK(c.knobs.back() == std::pair<std::string, std::string>{"offload_param", "none"});
    CHECK(std::find(c.knobs.begin(), c.knobs.end(), std::pair<std::string, std::string>{"stage", "3"}) !=
          c.knobs.end());

    Config spawn;
    spawn.strategy = "ddp_spawn_find_unused_parameters_true";
    auto how = resolve_lightning_name(spawn);
    REQUIRE(how);
    CHECK(spawn.strategy == "ddp");
    CHECK_THAT(*how, Catch::Contains("pickle"));

    Config plain;
    plain.strategy = "ddp";
    CHECK_FALSE(resolve_lightning_name(plain));
}
