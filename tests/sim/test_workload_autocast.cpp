// Which dtypes each strategy's run gives the model (workload.hpp's Autocast),
// and that the loss's transient memory reaches the simulated peak.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <catch2/catch.hpp>

#include <memory>

using namespace dtsim;
using namespace dtsim::sim;
using models::Autocast;

namespace {

Config config(const std::string& strategy, Precision p) {
    Config c;
    c.model = "gpt2";
    c.strategy = strategy;
    c.topology = {1, 1};
    c.micro_batch = 8;
    c.seq_len = 1024;
    c.precision = p;
    return c;
}

}  // namespace

TEST_CASE("autocast: DDP over fp32 weights, FSDP over its param_dtype, DeepSpeed none, true precisions none") {
    CHECK(workload_autocast(config("ddp", Precision::bf16_mixed)) == Autocast::fp32_weights);
    CHECK(workload_autocast(config("ddp", Precision::fp16_mixed)) == Autocast::fp32_weights);
    CHECK(workload_autocast(config("ddp", Precision::fp32)) == Autocast::none);
    CHECK(workload_autocast(config("ddp", Precision::bf16_true)) == Autocast::none);
    // FSDP's MixedPrecision hands autocast the 16-bit flat parameter by default.
    Config fsdp = config("fsdp", Precision::bf16_mixed);
    CHECK(workload_autocast(fsdp) == Autocast::half_weights);
    fsdp.knobs.push_back({"param_dtype", "fp32"});
    CHECK(workload_autocast(fsdp) == Autocast::fp32_weights);
    // DeepSpeed's bf16 engine converts the module and runs it without autocast.
    CHECK(workload_autocast(config("deepspeed", Precision::bf16_mixed)) == Autocast::none);
    CHECK(build_workload(config("ddp", Precision::bf16_mixed)).autocast == Autocast::fp32_weights);
}

TEST_CASE("the loss's fp32 gradients are part of the peak when it falls in the loss's backward") {
    // GPT-2 small at 8 x 1024 tokens: 412 M logits, so the step peaks while
    // the loss's backward holds its two fp32 gradients (torch 2.11 on an H100
    // peaks there too: bench/results/cuda_hf_step.md).
    const Config c = config("ddp", Precision::bf16_mixed);
    const auto cal = calib::load_hardware("h100-sxm");
    auto w = std::make_shared<models::Workload>(build_workload(c));
    const std::int64_t L = 8 * 1024 * std::int64_t{50257};
    REQUIRE(w->layers.back().backward_transient_bytes == 8 * L);
    const std::int64_t with = simulate(w, c, cal).metrics.peak_memory_bytes;
    auto without = std::make_shared<models::Workload>(*w);
    without->layers.back().forward_transient_bytes = 0;
    without->layers.back().backward_transient_bytes = 0;
    const std::int64_t peak_without = simulate(without, c, cal).metrics.peak_memory_bytes;
    CHECK(with - peak_without == 8 * L);
}
