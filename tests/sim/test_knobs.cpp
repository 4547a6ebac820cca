// Strategy knobs: parsing, bounds, choices, and knobs that apply only under a condition.
#include "dtsim/common/error.hpp"
#include "dtsim/sim/knobs.hpp"

#include <catch2/catch.hpp>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

std::vector<KnobSpec> specs() {
    return {
        {"bucket_mb", KnobType::number, "25", "a size", {}, 0, true},
        {"mode", KnobType::choice, "plain", "a mode", {"plain", "fancy"}, 0},
        {"fancy_level", KnobType::number, "1", "only for fancy", {}, 0, false, "mode=fancy"},
        {"flag", KnobType::boolean, "false", "a flag", {}},
    };
}

}  // namespace

TEST_CASE("knobs take their defaults and the user's values") {
    Knobs k("s", specs(), {{"bucket_mb", "50"}, {"flag", "True"}});
    CHECK(k.number("bucket_mb") == 50);
    CHECK(k.boolean("flag"));
    CHECK(k.text("mode") == "plain");
    CHECK(k.is_set("bucket_mb"));
    CHECK_FALSE(k.is_set("mode"));
}

TEST_CASE("bad knob values name the knob and what was expected") {
    CHECK_THROWS_WITH(Knobs("s", specs(), {{"bucket_mb", "0"}}),
                      Catch::Contains("bucket_mb") && Catch::Contains("> 0"));
    CHECK_THROWS_WITH(Knobs("s", specs(), {{"bucket_mb", "ten"}}), Catch::Contains("expected a number"));
    CHECK_THROWS_WITH(Knobs("s", specs(), {{"mode", "odd"}}), Catch::Contains("fancy"));
    CHECK_THROWS_WITH(Knobs("s", specs(), {{"nope", "1"}}), Catch::Contains("bucket_mb"));
}

TEST_CASE("a conditional knob applies only when its condition holds, and is an error otherwise") {
    Knobs fancy("s", specs(), {{"mode", "fancy"}, {"fancy_level", "3"}});
    CHECK(fancy.applies("fancy_level"));
    CHECK(fancy.number("fancy_level") == 3);
    Knobs plain("s", specs(), {});
    CHECK_FALSE(plain.applies("fancy_level"));
    CHECK(plain.applies("bucket_mb"));
    CHECK_THROWS_WITH(Knobs("s", specs(), {{"fancy_level", "3"}}),
                      Catch::Contains("fancy_level") && Catch::Contains("mode=fancy") && Catch::Contains("plain"));
}

TEST_CASE("a condition may list several values") {
    std::vector<KnobSpec> s = specs();
    s[2].applies_when = "mode=fancy|plain";
    CHECK(Knobs("s", s, {{"fancy_level", "2"}}).applies("fancy_level"));
    s[2].applies_when = "mode=fancy|odd";
    CHECK_THROWS(Knobs("s", s, {{"fancy_level", "2"}}));
}

TEST_CASE("choices pasted in torch's own spellings: module paths and the hook suffixes name the plain choice") {
    const std::vector<KnobSpec> specs = {
        {"comm_hook", KnobType::choice, "allreduce", "", {"allreduce", "fp16_compress", "bf16_compress", "powerSGD",
                                                          "batched_powerSGD", "post_localSGD"}},
        {"comm_wrapper", KnobType::choice, "none", "", {"none", "fp16", "bf16"}},
        {"sharding_strategy", KnobType::choice, "FULL_SHARD", "", {"FULL_SHARD", "SHARD_GRAD_OP"}},
    };
    const std::vector<std::pair<std::string, std::string>> spellings = {
        {"fp16_compress_hook", "fp16_compress"},
        {"default.fp16_compress_hook", "fp16_compress"},
        {"default_hooks.bf16_compress_hook", "bf16_compress"},
        {"powerSGD.powerSGD_hook", "powerSGD"},
        {"powerSGD_hook.batched_powerSGD_hook", "batched_powerSGD"},
        {"post_localSGD.post_localSGD_hook", "post_localSGD"},
        {"torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook", "allreduce"},
        {"fp16_compress", "fp16_compress"},
    };
    for (const auto& [given, plain] : spellings) {
        INFO(given);
        const Knobs k("ddp", specs, {{"comm_hook", given}});
        CHECK(k.text("comm_hook") == plain);
    }
    CHECK(Knobs("ddp", specs, {{"comm_wrapper", "default.fp16_compress_wrapper"}}).text("comm_wrapper") == "fp16");
    CHECK(Knobs("fsdp", specs, {{"sharding_strategy", "ShardingStrategy.SHARD_GRAD_OP"}}).text("sharding_strategy") ==
          "SHARD_GRAD_OP");
    // What torch does not have is still an error that names the value as given.
    CHECK_THROWS_WITH(Knobs("ddp", specs, {{"comm_hook", "default.fp8_compress_hook"}}),
                      Catch::Contains("default.fp8_compress_hook"));
    CHECK_THROWS_WITH(Knobs("ddp", specs, {{"comm_hook", "_hook"}}), Catch::Contains("'_hook'"));
}
