// Lightning strategies written as Python expressions (--strategy
// "FSDPStrategy(...)"): each resolves to the same configuration as the
// equivalent Lightning name and --set knobs, and a malformed one is a
// one-line error naming the character.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

using Knobs = std::vector<std::pair<std::string, std::string>>;

Config gpt2(const std::string& strategy, Knobs knobs = {}) {
    Config c;
    c.model = "gpt2";
    c.strategy = strategy;
    c.knobs = std::move(knobs);
    c.topology = {1, 8};
    c.micro_batch = 4;
    c.precision = Precision::bf16_mixed;
    return c;
}

// Step time and peak of a configuration after resolving its Lightning name or expression.
std::pair<double, std::int64_t> run(Config c) {
    resolve_lightning_name(c);
    const SimResult r = simulate(c, calib::load_hardware("h100-sxm"));
    return {r.metrics.step_time_s, r.metrics.peak_memory_bytes};
}

}  // namespace

TEST_CASE("Lightning expressions resolve to their knobs, as the Lightning names and --set do") {
    const auto ddp = parse_lightning_expression("DDPStrategy(gradient_as_bucket_view=True, static_graph=True)");
    REQUIRE(ddp);
    CHECK(ddp->strategy.strategy == "ddp");
    CHECK(ddp->strategy.knobs == Knobs{{"gradient_as_bucket_view", "true"}, {"static_graph", "true"}});
    CHECK(run(gpt2("DDPStrategy(gradient_as_bucket_view=True, static_graph=True)")) ==
          run(gpt2("ddp", {{"gradient_as_bucket_view", "true"}, {"static_graph", "true"}})));

    // FSDPStrategy is Lightning's constructor (lightning:fsdp) with the keywords as knobs.
    CHECK(run(gpt2("FSDPStrategy(sharding_strategy='SHARD_GRAD_OP', cpu_offload=True)")) ==
          run(gpt2("lightning:fsdp", {{"sharding_strategy", "SHARD_GRAD_OP"}, {"cpu_offload", "true"}})));
    CHECK(run(gpt2("FSDPStrategy(sharding_strategy=ShardingStrategy.SHARD_GRAD_OP,)")) ==
          run(gpt2("lightning:fsdp", {{"sharding_strategy", "SHARD_GRAD_OP"}})));

    // DeepSpeedStrategy(stage=3, offload_optimizer=True, offload_parameters=True) is deepspeed_stage_3_offload.
    CHECK(run(gpt2("DeepSpeedStrategy(stage=3, offload_optimizer=True, offload_parameters=True)")) ==
          run(gpt2("deepspeed_stage_3_offload")));
    const auto nvme = parse_lightning_expression(
        "DeepSpeedStrategy(stage=3, offload_optimizer=True, offload_optimizer_device='nvme', reduce_bucket_size=5e8)");
    REQUIRE(nvme);
    const Knobs& k = nvme->strategy.knobs;
    CHECK(std::find(k.begin(), k.end(), std::pair<std::string, std::string>{"offload_optimizer", "nvme"}) != k.end());
    CHECK(k.back().first == "offload_optimizer");
    CHECK(std::find(k.begin(), k.end(), std::pair<std::string, std::string>{"reduce_bucket_size", "5e8"}) != k.end());

    // Keywords that change nothing modelled are noted; start_method picks the launch; --set still overrides.
    Config c = gpt2("FSDPStrategy(use_orig_params=True)", {{"sharding_strategy", "NO_SHARD"}});
    const auto launch = resolve_lightning_name(c);
    REQUIRE(launch);
    CHECK_THAT(*launch, Catch::Contains("use_orig_params=true changes nothing"));
    CHECK(c.knobs.back() == std::pair<std::string, std::string>{"sharding_strategy", "NO_SHARD"});
    Config spawn = gpt2("DDPStrategy(start_method='spawn')");
    CHECK_THAT(*resolve_lightning_name(spawn), Catch::Contains("mp.start_processes"));
    CHECK_FALSE(parse_lightning_expression("deepspeed_stage_3"));
}

TEST_CASE("Lightning expressions: anything outside the grammar points at the character") {
    const auto error = [](const std::string& text) {
        try {
            parse_lightning_expression(text);
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK_THAT(error("DeepSpeedStrategy(stage 3)"), Catch::Contains("expected '=' after 'stage'") &&
                                                        Catch::Contains("at character 25"));
    CHECK_THAT(error("DDPStrategy(bucket_cap_mb=25, foo=1)"),
               Catch::Contains("a keyword of DDPStrategy") && Catch::Contains("at character 31"));
    CHECK_THAT(error("Strategy()"), Catch::Contains("DDPStrategy, FSDPStrategy or DeepSpeedStrategy") &&
                                        Catch::Contains("at character 1"));
    CHECK_THAT(error("DDPStrategy(bucket_cap_mb=25"), Catch::Contains("',' or ')'") && Catch::Contains("end"));
    CHECK_THAT(error("DDPStrategy(static_graph=True, static_graph=False)"), Catch::Contains("given twice"));
    CHECK_THAT(error("FSDPStrategy(auto_wrap_policy=functools.partial(f, transformer_layer_cls={Block}))"),
               Catch::Contains("calls are outside the accepted grammar") && Catch::Contains("at character 48"));
    CHECK_THAT(error("FSDPStrategy(auto_wrap_policy={Block, )"), Catch::Contains("a module class name in the set"));
    CHECK_THAT(error("FSDPStrategy(auto_wrap_policy={Block)"), Catch::Contains("',' or '}'"));
    CHECK_THAT(error("DDPStrategy(True)"), Catch::Contains("'=' after 'True'"));
    CHECK_THAT(error("DDPStrategy(start_method='thread')"), Catch::Contains("'popen', 'spawn' or 'fork'"));
    CHECK_THAT(error("DDPStrategy() x"), Catch::Contains("the end of the expression"));
    CHECK(error("DDPStrategy(bucket_cap_mb=25, foo=1)").find('\n') == std::string::npos);
}
