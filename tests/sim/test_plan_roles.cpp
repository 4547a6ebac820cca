// What the Plan tells the executor (issue 12, docs/architecture.md): its shard
// groups, each collective's role and the shard groups it moves, the hook and
// the compute stream. The executor runs a plan from these alone, so each is
// checked here against the rules computed independently from the workload:
// a collective's bytes are its shard groups' padded elements in its dtype.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

SimResult run(const std::string& model, const std::string& strategy,
              std::vector<std::pair<std::string, std::string>> knobs, Precision precision = Precision::bf16_mixed) {
    static const auto cal = calib::load_hardware("a100-sxm");
    Config c;
    c.model = model;
    c.strategy = strategy;
    c.topology = {1, 8};
    c.micro_batch = 1;
    c.seq_len = model.starts_with("mlp-") ? 0 : 128;
    c.precision = precision;
    c.knobs = std::move(knobs);
    return simulate(c, cal);
}

std::map<int, std::int64_t> numel_by_index(const models::Workload& w) {
    std::map<int, std::int64_t> out;
    for (const auto& l : w.layers)
        for (const auto& p : l.params) out[p.index] = p.numel();
    return out;
}

// Every parameter in exactly one shard group.
void check_partition(const SimResult& r) {
    const auto numel = numel_by_index(*r.workload);
    std::map<int, int> seen;
    for (const auto& g : r.plan.shards)
        for (int p : r.plan.params_of(g)) ++seen[p];
    REQUIRE(seen.size() == numel.size());
    for (const auto& [p, count] : seen) {
        CAPTURE(p);
        CHECK(count == 1);
        CHECK(numel.count(p) == 1);
    }
}

// Padded elements of the groups task i moves: each group's numel rounded up to its ranks.
std::int64_t padded_elements(const SimResult& r, std::size_t i) {
    const auto numel = numel_by_index(*r.workload);
    std::int64_t total = 0;
    for (int g : r.plan.shards_of(i)) {
        const auto& group = r.plan.shards[static_cast<std::size_t>(g)];
        std::int64_t n = 0;
        for (int p : r.plan.params_of(group)) n += numel.at(p);
        total += (n + group.ranks - 1) / group.ranks * group.ranks;
    }
    return total;
}

// Every collective that moves shard groups moves exactly their padded bytes;
// returns how many did, by role.
std::map<CollectiveRole, int> check_shard_bytes(const SimResult& r) {
    std::map<CollectiveRole, int> roles;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.kind != TaskKind::collective) continue;
        ++roles[t.role];
        if (t.role != CollectiveRole::parameter_gather && t.role != CollectiveRole::gradient_reduce) {
            CHECK(r.plan.shards_of(i).empty());
            continue;
        }
        CAPTURE(i, to_string(t.role));
        REQUIRE_FALSE(r.plan.shards_of(i).empty());
        CHECK(t.bytes == padded_elements(r, i) * dtype_bytes(t.dtype));
    }
    return roles;
}

}  // namespace

TEST_CASE("fsdp: each unit is a shard group over the shard ranks, gathered and reduced by role") {
    const SimResult r = run("gpt2", "fsdp", {{"sharding_strategy", "FULL_SHARD"}});
    check_partition(r);
    for (const auto& g : r.plan.shards) CHECK(g.ranks == 8);
    const auto roles = check_shard_bytes(r);
    CHECK(roles.at(CollectiveRole::parameter_gather) > 0);
    CHECK(roles.at(CollectiveRole::gradient_reduce) > 0);
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i)
        if (r.plan.tasks[i].kind == TaskKind::collective) {
            REQUIRE(r.plan.shards_of(i).size() == 1);  // one FlatParameter per collective
            CHECK(r.plan.shards_of(i)[0] == r.plan.tasks[i].bucket);
        }
}

TEST_CASE("fsdp NO_SHARD: groups of one rank, each unit's gradient allreduced whole") {
    const SimResult r = run("gpt2", "fsdp", {{"sharding_strategy", "NO_SHARD"}});
    check_partition(r);
    for (const auto& g : r.plan.shards) CHECK(g.ranks == 1);
    const auto roles = check_shard_bytes(r);
    CHECK(roles.count(CollectiveRole::parameter_gather) == 0);
    for (const Task& t : r.plan.tasks)
        if (t.kind == TaskKind::collective) {
            CHECK(t.collective == CollectiveKind::allreduce);
            CHECK(t.role == CollectiveRole::gradient_reduce);
        }
}

TEST_CASE("zero 1 and 2: one flat partition, buckets reduced whole, then one gather of it") {
    for (const char* stage : {"1", "2"}) {
        CAPTURE(stage);
        const SimResult r = run("gpt2", "deepspeed", {{"stage", stage}, {"reduce_scatter", "false"}});
        check_partition(r);
        REQUIRE(r.plan.shards.size() == 1);
        CHECK(r.plan.shards[0].ranks == 8);
        const auto all = r.plan.params_of(r.plan.shards[0]);
        CHECK(std::is_sorted(all.begin(), all.end()));
        const auto roles = check_shard_bytes(r);
        CHECK(roles.at(CollectiveRole::parameter_gather) == 1);
        for (const Task& t : r.plan.tasks)
            if (t.kind == TaskKind::collective && t.role == CollectiveRole::bucket)
                CHECK(t.bytes == r.plan.buckets[static_cast<std::size_t>(t.bucket)].bytes);
    }
}

TEST_CASE("zero 3: a group per tensor, persistent tensors regathered one by one after the step") {
    const SimResult r = run("gpt2", "deepspeed", {{"stage", "3"}});
    check_partition(r);
    for (std::size_t g = 0; g < r.plan.shards.size(); ++g) {
        const auto members = r.plan.params_of(r.plan.shards[g]);
        REQUIRE(members.size() == 1);
        CHECK(members[0] == static_cast<int>(g));
    }
    const auto roles = check_shard_bytes(r);
    CHECK(roles.at(CollectiveRole::gradient_reduce) > 0);
    // The default threshold (100k elements) keeps gpt2's biases and LayerNorms whole:
    // each is gathered alone after the step.
    const std::int64_t threshold = 100'000;
    const auto numel = numel_by_index(*r.workload);
    std::int64_t persistent = 0;
    for (const auto& [p, n] : numel) persistent += n <= threshold;
    REQUIRE(persistent > 0);
    std::int64_t alone = 0;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        if (r.plan.tasks[i].role != CollectiveRole::parameter_gather) continue;
        const auto groups = r.plan.shards_of(i);
        if (groups.size() == 1 && numel.at(groups[0]) <= threshold) ++alone;
        // The layer gathers never carry a persistent tensor.
        if (groups.size() > 1)
            for (int g : groups) CHECK(numel.at(g) > threshold);
    }
    CHECK(alone == persistent);
}

TEST_CASE("ddp: no shard groups, and each bucket's collectives carry the hook's roles") {
    SECTION("the Reducer's allreduce") {
        const SimResult r = run("gpt2", "ddp", {});
        CHECK(r.plan.shards.empty());
        CHECK(r.plan.hook.kind == HookKind::none);
        for (const Task& t : r.plan.tasks)
            if (t.kind == TaskKind::collective && t.bucket >= 0) CHECK(t.role == CollectiveRole::bucket);
    }
    SECTION("fp16_compress") {
        const SimResult r = run("mlp-4x512", "ddp", {{"comm_hook", "fp16_compress"}}, Precision::fp32);
        CHECK(r.plan.hook.kind == HookKind::compress);
        for (const Task& t : r.plan.tasks)
            if (t.kind == TaskKind::collective && t.bucket >= 0) {
                CHECK(t.role == CollectiveRole::compressed);
                CHECK(t.bytes == r.plan.buckets[static_cast<std::size_t>(t.bucket)].bytes / 2);
            }
    }
    SECTION("powerSGD: uncompressed, P, Q, at the ranks _should_compress gives") {
        const SimResult r = run("mlp-4x512", "ddp",
                                {{"comm_hook", "powerSGD"},
                                 {"matrix_approximation_rank", "4"},
                                 {"start_powerSGD_iter", "2"},
                                 {"use_error_feedback", "false"},
                                 {"warm_start", "false"}},
                                Precision::fp32);
        CHECK(r.plan.hook.kind == HookKind::powersgd);
        CHECK(r.plan.hook.start_iter == 2);
        CHECK_FALSE(r.plan.hook.error_feedback);
        std::map<int, const models::Parameter*> params;
        for (const auto& l : r.workload->layers)
            for (const auto& p : l.params) params[p.index] = &p;
        for (const auto& b : r.plan.buckets) {
            CAPTURE(b.index);
            REQUIRE(b.ranks.size() == b.params.size());
            std::int64_t u = 0, pe = 0, qe = 0;
            for (std::size_t i = 0; i < b.params.size(); ++i) {
                const auto& p = *params.at(b.params[i]);
                const std::int64_t n = p.shape.empty() ? 1 : p.shape.front(), m = p.numel() / n;
                const std::int64_t rank = std::min<std::int64_t>({n, m, 4});
                // min_compression_rate 2: compress where (n + m) r 2 < n m.
                const std::int64_t expect = (n + m) * rank * 2 < n * m ? rank : 0;
                CHECK(b.ranks[i] == expect);
                if (expect == 0) u += p.numel();
                pe += n * expect;
                qe += m * expect;
            }
            std::vector<CollectiveRole> order;
            for (const Task& t : r.plan.tasks)
                if (t.kind == TaskKind::collective && t.bucket == b.index) {
                    order.push_back(t.role);
                    if (t.role == CollectiveRole::uncompressed) CHECK(t.bytes == 4 * u);
                    if (t.role == CollectiveRole::powersgd_p) CHECK(t.bytes == 4 * pe);
                    if (t.role == CollectiveRole::powersgd_q) CHECK(t.bytes == 4 * qe);
                }
            CHECK(order == std::vector<CollectiveRole>{CollectiveRole::uncompressed, CollectiveRole::powersgd_p,
                                                       CollectiveRole::powersgd_q});
        }
    }
    SECTION("a hook the executor cannot run is named, not guessed") {
        const SimResult r = run("mlp-4x512", "ddp", {{"comm_hook", "batched_powerSGD"}}, Precision::fp32);
        CHECK(r.plan.hook.kind == HookKind::other);
        CHECK(r.plan.hook.name == "batched_powerSGD");
    }
}

TEST_CASE("the compute stream is the plan's: every layer runs on it") {
    for (const char* strategy : {"ddp", "fsdp", "deepspeed"}) {
        CAPTURE(strategy);
        const SimResult r = run("gpt2", strategy, {});
        for (const Task& t : r.plan.tasks)
            if (t.kind == TaskKind::compute && t.layer >= 0) CHECK(t.stream == r.plan.compute_stream);
    }
}
