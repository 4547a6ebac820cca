// DDP bucket assignment against hand-worked examples (strategy-semantics.md §1.2).
#include "dtsim/models/model_registry.hpp"
#include "dtsim/sim/ddp_buckets.hpp"
#include "dtsim/sim/strategy.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace dtsim;
using namespace dtsim::sim;

namespace {
constexpr std::int64_t KiB = 1024, MiB = 1024 * 1024;
using Buckets = std::vector<std::vector<int>>;
}  // namespace

TEST_CASE("a bucket closes once it reaches the limit, keeping the tensor that crossed it") {
    // a 0.6 MiB, b 0.6 MiB -> 1.2 MiB >= 1 MiB closes bucket 0 with both;
    // c 10 + d 20 = 30 MiB >= 25 closes bucket 1; e is left in an open bucket.
    const BucketTensor t[] = {{0, 600 * KiB}, {1, 600 * KiB}, {2, 10 * MiB}, {3, 20 * MiB}, {4, 5 * MiB}};
    const std::int64_t limits[] = {1 * MiB, 25 * MiB};
    CHECK(assign_buckets_by_size(t, limits, false) == Buckets{{0, 1}, {2, 3}, {4}});
}

TEST_CASE("the first limit applies to the first bucket only") {
    const BucketTensor t[] = {{0, 2 * MiB}, {1, 2 * MiB}, {2, 2 * MiB}};
    const std::int64_t limits[] = {1 * MiB, 5 * MiB};
    // bucket 0 closes at 2 MiB (>= 1); then 2 + 2 = 4 < 5 stays open.
    CHECK(assign_buckets_by_size(t, limits, false) == Buckets{{0}, {1, 2}});
}

TEST_CASE("different dtypes never share a bucket") {
    const BucketTensor t[] = {
        {0, 1 * MiB, DType::fp32}, {1, 1 * MiB, DType::fp16}, {2, 1 * MiB, DType::fp32}, {3, 1 * MiB, DType::fp16}};
    const std::int64_t limits[] = {2 * MiB};
    CHECK(assign_buckets_by_size(t, limits, false) == Buckets{{0, 2}, {1, 3}});
}

TEST_CASE("the initial assignment sorts buckets by their smallest parameter index") {
    const BucketTensor t[] = {{5, 2 * MiB}, {1, 2 * MiB}, {3, 1}};
    const std::int64_t limits[] = {2 * MiB};
    CHECK(assign_buckets_by_size(t, limits, true) == Buckets{{1}, {3}, {5}});
    CHECK(assign_buckets_by_size(t, limits, false) == Buckets{{5}, {1}, {3}});
}

TEST_CASE("an unbounded limit gives one bucket per dtype (iteration 1)") {
    const BucketTensor t[] = {{0, 100 * MiB}, {1, 100 * MiB}, {2, 1}};
    const std::int64_t limits[] = {std::numeric_limits<std::int64_t>::max()};
    CHECK(assign_buckets_by_size(t, limits, true) == Buckets{{0, 1, 2}});
}

namespace {

// mlp-4x512: layers.i.weight is 512x512 fp32 = exactly 1 MiB, layers.i.bias 2 KiB.
std::vector<std::string> bucket_param_names(const Plan& plan, const models::Workload& w, std::size_t b) {
    std::vector<std::string> names;
    for (int p : plan.buckets[b].params)
        for (const auto& layer : w.layers)
            for (const auto& param : layer.params)
                if (param.index == p) names.push_back(param.name);
    return names;
}

Config mlp_config() {
    Config c;
    c.model = "mlp-4x512";
    c.topology = {1, 4};
    c.micro_batch = 8;
    return c;
}

}  // namespace

TEST_CASE("DDP steady state: a ~1 MiB first bucket of the first-ready gradients, then the cap") {
    Config c = mlp_config();
    auto w = models::build_workload({c.model, c.micro_batch, 0, DType::fp32});
    Plan plan = lower(w, c);
    REQUIRE(plan.buckets.size() == 2);
    // Gradients arrive last layer first; 2 KiB + 1 MiB >= 1 MiB closes bucket 0.
    CHECK(bucket_param_names(plan, w, 0) == std::vector<std::string>{"layers.3.bias", "layers.3.weight"});
    CHECK(plan.buckets[0].bytes == MiB + 2 * KiB);
    CHECK(plan.buckets[1].bytes == 3 * (MiB + 2 * KiB));
}

TEST_CASE("DDP with bucket_cap_mb set: the first bucket uses the cap too (PyTorch >= 2.4)") {
    Config c = mlp_config();
    c.knobs = {{"bucket_cap_mb", "2"}};
    auto w = models::build_workload({c.model, c.micro_batch, 0, DType::fp32});
    Plan plan = lower(w, c);
    REQUIRE(plan.buckets.size() == 2);
    CHECK(bucket_param_names(plan, w, 0) ==
          std::vector<std::string>{"layers.3.bias", "layers.3.weight", "layers.2.bias", "layers.2.weight"});
    SECTION("first_bucket_mb=1 restores the classic 1 MiB first bucket") {
        c.knobs.push_back({"first_bucket_mb", "1"});
        Plan classic = lower(w, c);
        REQUIRE(classic.buckets.size() == 3);
        CHECK(bucket_param_names(classic, w, 0) == std::vector<std::string>{"layers.3.bias", "layers.3.weight"});
    }
}

TEST_CASE("DDP first iteration and find_unused_parameters bucket layouts") {
    Config c = mlp_config();
    auto w = models::build_workload({c.model, c.micro_batch, 0, DType::fp32});
    SECTION("iteration 1: one bucket with every parameter") {
        c.iteration = 1;
        Plan plan = lower(w, c);
        REQUIRE(plan.buckets.size() == 1);
        CHECK(plan.buckets[0].params.size() == 8);
    }
    SECTION("find_unused_parameters: parameters() order with [1 MiB, cap], reversed") {
        c.knobs = {{"find_unused_parameters", "true"}, {"bucket_cap_mb", "2"}, {"first_bucket_mb", "1"}};
        Plan plan = lower(w, c);
        // Forward walk: {0.w} closes at 1 MiB; {0.b, 1.w, 1.b, 2.w} reaches 2 MiB; {2.b, 3.w, 3.b} left; reversed.
        REQUIRE(plan.buckets.size() == 3);
        CHECK(bucket_param_names(plan, w, 0) ==
              std::vector<std::string>{"layers.2.bias", "layers.3.weight", "layers.3.bias"});
        CHECK(bucket_param_names(plan, w, 2) == std::vector<std::string>{"layers.0.weight"});
    }
}

TEST_CASE("DDP rejects bad knobs with the knob's name") {
    Config c = mlp_config();
    auto w = models::build_workload({c.model, c.micro_batch, 0, DType::fp32});
    c.knobs = {{"bucket_cap_mb", "-5"}};
    CHECK_THROWS_WITH(lower(w, c), Catch::Contains("bucket_cap_mb"));
    c.knobs = {{"bucket_cap", "5"}};
    CHECK_THROWS_WITH(lower(w, c), Catch::Contains("did you mean 'bucket_cap_mb'"));
    c.knobs = {{"static_graph", "maybe"}};
    CHECK_THROWS_WITH(lower(w, c), Catch::Contains("expected true or false"));
}
