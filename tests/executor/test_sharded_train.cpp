// Train mode under the sharded strategies (FSDP, DeepSpeed ZeRO 1/2/3): the
// parameters after K steps equal one process training on the global batch
// (tests/executor/reference_mlp.hpp) and are identical on every rank. One rank
// here (MPI singleton); the hidden [mpi2sharded] cases run on 2 ranks from
// tests/mpi/catch_2ranks.sh with [mpi2sharded].
#include "dtsim/common/error.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include "reference_mlp.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace dtsim;
using executor::ExecOptions;
using executor::ExecResult;
using executor::Mode;

namespace {

using Knobs = std::vector<std::pair<std::string, std::string>>;

int ranks() {
    executor::ensure_mpi();
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

struct Case {
    std::string strategy;
    Knobs knobs;
    int accum = 1;
    sim::OptimizerKind opt = sim::OptimizerKind::sgd;
    std::string model = "mlp-3x64";
};

std::string describe(const Case& k) {
    std::string s = k.model + " " + k.strategy;
    for (const auto& [key, value] : k.knobs) s += " " + key + "=" + value;
    return s + " grad_accum=" + std::to_string(k.accum) + " " + std::string(sim::to_string(k.opt));
}

sim::Config config_of(const Case& k, int world, std::int64_t micro_batch) {
    sim::Config c;
    c.model = k.model;
    c.strategy = k.strategy;
    c.topology = {1, world};
    c.micro_batch = micro_batch;
    c.grad_accum = k.accum;
    c.optimizer = k.opt;
    c.knobs = k.knobs;
    return c;
}

ExecResult execute(const sim::Config& c, Mode mode, int steps, double lr,
                   runtime::CommBackend transport = runtime::CommBackend::mpi, bool fresh_gradients = false) {
    const auto w = sim::build_workload(c);
    const auto plan = sim::lower(w, c);
    ExecOptions o;
    o.transport = transport;
    o.mode = mode;
    o.steps = steps;
    o.learning_rate = lr;
    o.fresh_gradients = fresh_gradients;
    return executor::execute(plan, w, c, o);
}

// Every rank holds the same bits.
bool identical_on_all_ranks(const std::vector<std::vector<float>>& params) {
    int same = 1;
    for (const auto& p : params) {
        std::vector<float> root = p;
        MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        if (!std::equal(root.begin(), root.end(), p.begin())) same = 0;
    }
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return same == 1;
}

// Trains `k` for 5 steps on `world` ranks and compares with the reference.
// `fresh_gradients`: as under --allocator torch, where gradients, their
// shards and the unsharded parameters come uninitialised from the allocator
// (often memory an earlier step freed) and every first write must assign.
void check_equals_reference(const Case& k, int world, runtime::CommBackend transport = runtime::CommBackend::mpi,
                            bool fresh_gradients = false) {
    INFO(describe(k) << " over " << runtime::to_string(transport) << (fresh_gradients ? ", fresh gradients" : ""));
    constexpr std::int64_t micro_batch = 4;
    constexpr int steps = 5;
    const auto c = config_of(k, world, micro_batch);
    const double lr = k.opt == sim::OptimizerKind::sgd ? 0.1 : 1e-3;
    const ExecResult r = execute(c, Mode::train, steps, lr, transport, fresh_gradients);
    CHECK(r.mode == Mode::train);
    CHECK(identical_on_all_ranks(r.parameters));
    const auto w = sim::build_workload(c);
    const auto ref =
        test::reference_train(w, micro_batch * world * k.accum, steps, lr, k.opt == sim::OptimizerKind::adam, 1);
    REQUIRE(r.parameters.size() == ref.params.size());
    for (std::size_t p = 0; p < ref.params.size(); ++p) {
        INFO("parameter " << p);
        CHECK(test::max_relative_diff(r.parameters[p], ref.params[p]) <
              test::parameter_tolerance(k.opt == sim::OptimizerKind::adam));
    }
    REQUIRE(r.loss.size() == ref.loss.size());
    for (std::size_t s = 0; s < ref.loss.size(); ++s) CHECK(r.loss[s] == Approx(ref.loss[s]).epsilon(1e-5));
}

// Per-layer FSDP units: mlp-3x64's Linear layers hold 64 x 64 + 64 parameters each.
const Knobs kLayerUnits = {{"auto_wrap_policy", "size"}, {"min_num_params", "4160"}};
// The same units under FSDP2: fully_shard on each Linear, then on the model.
const Knobs kLayerGroups = {{"units", "size"}, {"min_num_params", "4160"}};

}  // namespace

TEST_CASE("train mode: FSDP and ZeRO on one rank equal the reference MLP", "[executor]") {
    if (ranks() != 1) return;
    const std::vector<Case> cases = {
        {"fsdp", {{"sharding_strategy", "FULL_SHARD"}}, 1, sim::OptimizerKind::sgd},
        {"fsdp", {{"sharding_strategy", "FULL_SHARD"}}, 2, sim::OptimizerKind::adam},
        {"fsdp", kLayerUnits, 2, sim::OptimizerKind::sgd},
        {"fsdp", {{"sharding_strategy", "SHARD_GRAD_OP"}}, 1, sim::OptimizerKind::adam},
        // torch.optim's other two Adam implementations on the flat parameters.
        {"fsdp", {{"foreach", "false"}}, 1, sim::OptimizerKind::adam},
        {"fsdp", {{"fused", "true"}}, 2, sim::OptimizerKind::adam},
        {"deepspeed", {{"stage", "3"}}, 1, sim::OptimizerKind::sgd},
        {"deepspeed", {{"stage", "3"}, {"stage3_param_persistence_threshold", "0"}}, 2, sim::OptimizerKind::adam},
        {"deepspeed", {{"stage", "1"}}, 2, sim::OptimizerKind::sgd},
        {"deepspeed", {{"stage", "2"}, {"reduce_bucket_size", "5000"}}, 1, sim::OptimizerKind::adam},
        // What the plan makes of these on one rank, the executor runs: FSDP runs HYBRID_SHARD over a shard
        // group of one rank as NO_SHARD, and DeepSpeed's per-owner reduces reduce nothing.
        {"fsdp", {{"sharding_strategy", "HYBRID_SHARD"}}, 1, sim::OptimizerKind::sgd},
        {"deepspeed", {{"stage", "2"}, {"use_multi_rank_bucket_allreduce", "false"}}, 1, sim::OptimizerKind::sgd},
        // FSDP2 on one rank: nothing to all-gather or reduce-scatter.
        {"fsdp2", kLayerGroups, 2, sim::OptimizerKind::adam},
    };
    for (const bool fresh : {false, true})
        for (const auto& k : cases) check_equals_reference(k, 1, runtime::CommBackend::mpi, fresh);
}

TEST_CASE("train mode names the sharded configurations it cannot run and replay runs them", "[executor]") {
    if (ranks() != 1) return;
    const std::vector<std::pair<Case, std::string>> rejected = {
        // The executor reads the plan, not the knobs: each error names what in the plan it cannot run.
        {{"fsdp", {{"cpu_offload", "true"}}}, "offload"},
        {{"fsdp", {{"param_dtype", "bf16"}}}, "layers computing in bf16"},
        {{"deepspeed", {{"stage", "3"}, {"offload_optimizer", "cpu"}}, 1, sim::OptimizerKind::adam}, "offload"},
    };
    for (const auto& [k, what] : rejected) {
        INFO(describe(k));
        const auto c = config_of(k, 1, 4);
        CHECK_THROWS_AS(execute(c, Mode::train, 1, 0.1), ConfigError);
        CHECK_THROWS_WITH(execute(c, Mode::train, 1, 0.1), Catch::Contains(what));
        CHECK(execute(c, Mode::replay, 1, 0.1).step_time_s.size() == 1);
    }
    auto mixed = config_of({"deepspeed", {{"stage", "3"}}}, 1, 4);
    mixed.precision = sim::Precision::bf16_mixed;
    CHECK_THROWS_WITH(execute(mixed, Mode::train, 1, 0.1), Catch::Contains("mixed precision"));
}

TEST_CASE("2 ranks: FSDP and ZeRO training equals one process and keeps ranks identical, over MPI and gloo",
          "[.mpi2sharded]") {
    const int world = ranks();
    if (world != 2) {
        WARN("needs 2 ranks: run tests/mpi/catch_2ranks.sh with [mpi2sharded]");
        return;
    }
    using sim::OptimizerKind;
    const std::vector<Case> cases = {
        // One unit (the root wraps every layer).
        {"fsdp", {{"sharding_strategy", "FULL_SHARD"}}, 1, OptimizerKind::sgd},
        // One unit per layer: gathered again in backward, prefetched, reduce-scattered per unit.
        {"fsdp", kLayerUnits, 1, OptimizerKind::adam},
        {"fsdp", kLayerUnits, 2, OptimizerKind::sgd},
        {"fsdp",
         [] {
             auto k = kLayerUnits;
             k.emplace_back("no_sync", "false");
             return k;
         }(),
         2, OptimizerKind::adam},
        {"fsdp",
         [] {
             auto k = kLayerUnits;
             k.emplace_back("backward_prefetch", "BACKWARD_POST");
             return k;
         }(),
         1, OptimizerKind::sgd},
        {"fsdp", {{"sharding_strategy", "SHARD_GRAD_OP"}}, 1, OptimizerKind::sgd},
        {"fsdp",
         [] {
             auto k = kLayerUnits;
             k.emplace_back("sharding_strategy", "SHARD_GRAD_OP");
             return k;
         }(),
         2, OptimizerKind::adam},
        {"fsdp", {{"sharding_strategy", "NO_SHARD"}}, 2, OptimizerKind::sgd},
        // FSDP2: each all-gather copied out of its output into the parameters; every
        // micro-step reduce-scattered (fully_shard's default) or only the last.
        {"fsdp2", kLayerGroups, 1, OptimizerKind::sgd},
        {"fsdp2", kLayerGroups, 2, OptimizerKind::adam},
        {"fsdp2",
         [] {
             auto k = kLayerGroups;
             k.emplace_back("requires_gradient_sync", "false");
             k.emplace_back("reshard_after_forward", "true");
             return k;
         }(),
         2, OptimizerKind::sgd},
        {"fsdp2", {{"reshard_after_forward", "false"}}, 1, OptimizerKind::adam},
        // ZeRO 1/2: several buckets (5000 elements), allreduced then sliced; post-step all-gather.
        {"deepspeed", {{"stage", "1"}}, 1, OptimizerKind::sgd},
        {"deepspeed", {{"stage", "1"}, {"reduce_bucket_size", "5000"}}, 2, OptimizerKind::adam},
        {"deepspeed", {{"stage", "2"}}, 1, OptimizerKind::adam},
        {"deepspeed",
         {{"stage", "2"}, {"reduce_bucket_size", "5000"}, {"overlap_comm", "true"}},
         2,
         OptimizerKind::sgd},
        // ZeRO-3: every tensor persistent (post-step all-gather only), weights gathered per layer, everything
        // gathered per layer with padding (63 x 63 weights over 2 ranks).
        {"deepspeed", {{"stage", "3"}}, 1, OptimizerKind::sgd},
        {"deepspeed",
         {{"stage", "3"}, {"stage3_param_persistence_threshold", "100"}, {"reduce_bucket_size", "5000"}},
         2,
         OptimizerKind::adam},
        {"deepspeed", {{"stage", "3"}, {"stage3_param_persistence_threshold", "0"}}, 2, OptimizerKind::sgd, "mlp-3x63"},
        {"deepspeed",
         {{"stage", "3"}, {"stage3_param_persistence_threshold", "0"}, {"stage3_max_reuse_distance", "0"}},
         1,
         OptimizerKind::adam},
    };
    // gloo runs the reduce-scatters as torch's ProcessGroupGloo does (an allreduce of the whole buffer).
    for (const auto transport : {runtime::CommBackend::mpi, runtime::CommBackend::gloo})
        for (const auto& k : cases) check_equals_reference(k, world, transport);
    // As `execute --backend gloo --allocator torch` runs them.
    for (const auto& k : cases) check_equals_reference(k, world, runtime::CommBackend::gloo, true);
    // On two ranks DeepSpeed's per-owner reduces are in the plan: train mode names them, replay runs them.
    const auto per_owner =
        config_of({"deepspeed", {{"stage", "2"}, {"use_multi_rank_bucket_allreduce", "false"}}}, world, 4);
    CHECK_THROWS_WITH(execute(per_owner, Mode::train, 1, 0.1), Catch::Contains("reduce collectives"));
    CHECK(execute(per_owner, Mode::replay, 1, 0.1).step_time_s.size() == 1);
}
