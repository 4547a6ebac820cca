// Lightning's "true" precisions (strategy-semantics.md §6): the model itself is
// converted, so torch's parameters, gradients and optimizer state are 16-bit,
// with no autocast weight copies; DeepSpeed keeps its fp32 master copy anyway.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config config(const std::string& strategy, Precision p) {
    Config c;
    c.model = "gpt2-medium";
    c.strategy = strategy;
    c.topology = {1, 8};
    c.micro_batch = 2;
    c.seq_len = 512;
    c.precision = p;
    return c;
}

SimResult run(const Config& c) {
    return simulate(c, calib::load_hardware("h100-sxm"));
}

std::int64_t resident(const SimResult& r, MemCategory c) {
    return r.plan.resident[static_cast<std::size_t>(c)];
}

std::int64_t at_peak(const SimResult& r, MemCategory c) {
    return r.metrics.peak_breakdown[static_cast<std::size_t>(c)];
}

// Bytes of every collective of one kind, and of the optimizer pass.
std::int64_t collective_bytes(const SimResult& r, CollectiveKind kind) {
    std::int64_t bytes = 0;
    for (const Task& t : r.plan.tasks)
        if (t.kind == TaskKind::collective && t.collective == kind) bytes += t.bytes;
    return bytes;
}

std::int64_t optimizer_bytes(const SimResult& r) {
    std::int64_t bytes = 0;
    for (const Task& t : r.plan.tasks)
        if (t.phase == Phase::optimizer) bytes += t.bytes;
    return bytes;
}

}  // namespace

TEST_CASE("precision names: dtsim's and Lightning's, 64-true refused with the reason") {
    CHECK(precision_from_string("bf16-true") == Precision::bf16_true);
    CHECK(precision_from_string("16-true") == Precision::fp16_true);
    CHECK(precision_from_string("fp16-true") == Precision::fp16_true);
    CHECK(precision_from_string("32-true") == Precision::fp32);
    CHECK(precision_from_string("16-mixed") == Precision::fp16_mixed);
    CHECK(precision_from_string("bf16") == Precision::bf16_mixed);
    for (auto p :
         {Precision::fp32, Precision::fp16_mixed, Precision::bf16_mixed, Precision::fp16_true, Precision::bf16_true}) {
        CHECK(precision_from_string(to_string(p)) == p);
        CHECK(precision_from_string(lightning_name(p)) == p);
    }
    CHECK(autocast(Precision::bf16_mixed));
    CHECK_FALSE(autocast(Precision::bf16_true));
    CHECK(parameter_dtype(Precision::bf16_mixed) == DType::fp32);
    CHECK(parameter_dtype(Precision::bf16_true) == DType::bf16);
    CHECK(parameter_dtype(Precision::fp16_true) == DType::fp16);
    CHECK_THROWS_WITH(precision_from_string("64-true"), Catch::Contains("fp64"));
    CHECK_THROWS_WITH(precision_from_string("8-true"), Catch::Contains("bf16-true"));
}

TEST_CASE("DDP under bf16-true: half the model states and buckets, no autocast copies, half the allreduce") {
    const SimResult mixed = run(config("ddp", Precision::bf16_mixed));
    const SimResult pure = run(config("ddp", Precision::bf16_true));
    const std::int64_t psi = pure.workload->param_count();
    CHECK(resident(mixed, MemCategory::parameters) == 4 * psi);
    CHECK(resident(pure, MemCategory::parameters) == 2 * psi);
    CHECK(resident(pure, MemCategory::optimizer_states) == 4 * psi);  // Adam's moments in bf16
    CHECK(resident(pure, MemCategory::buckets) == 2 * psi);
    // Autocast's per-forward bf16 weight copies exist only under the mixed precision.
    CHECK(at_peak(mixed, MemCategory::other) > 0);
    CHECK(at_peak(pure, MemCategory::other) == 0);
    CHECK(2 * collective_bytes(pure, CollectiveKind::allreduce) == collective_bytes(mixed, CollectiveKind::allreduce));
    CHECK(2 * optimizer_bytes(pure) == optimizer_bytes(mixed));
    // The same GEMMs in bf16 either way; less memory traffic and less to reduce.
    CHECK(pure.metrics.step_time_s < mixed.metrics.step_time_s);
    CHECK(pure.metrics.peak_memory_bytes < mixed.metrics.peak_memory_bytes);
}

TEST_CASE("a comm hook under a true precision is refused: the buckets already are 16-bit") {
    Config c = config("ddp", Precision::bf16_true);
    c.knobs = {{"comm_hook", "fp16_compress"}};
    CHECK_THROWS_AS(run(c), ConfigError);
    CHECK_THROWS_WITH(run(c), Catch::Contains("comm_hook=allreduce"));
}

TEST_CASE("FSDP under bf16-true: 16-bit flat parameters, so 6 bytes of model state per owned parameter") {
    const SimResult mixed = run(config("fsdp", Precision::bf16_mixed));
    const SimResult pure = run(config("fsdp", Precision::bf16_true));
    const std::int64_t owned4 = resident(mixed, MemCategory::parameters);  // fp32 shards
    REQUIRE(owned4 > 0);
    CHECK(resident(pure, MemCategory::parameters) * 2 == owned4);
    CHECK(resident(pure, MemCategory::optimizer_states) == owned4);  // two bf16 moments
    // The all-gathers and reduce-scatters were bf16 already (MixedPrecision's param_dtype).
    CHECK(collective_bytes(pure, CollectiveKind::allgather) == collective_bytes(mixed, CollectiveKind::allgather));
    CHECK(collective_bytes(pure, CollectiveKind::reduce_scatter) ==
          collective_bytes(mixed, CollectiveKind::reduce_scatter));
    CHECK(2 * optimizer_bytes(pure) == optimizer_bytes(mixed));
    CHECK(pure.metrics.peak_memory_bytes < mixed.metrics.peak_memory_bytes);
}

TEST_CASE("DeepSpeed under bf16-true is DeepSpeed's bf16: the same fp32 master copy as bf16-mixed") {
    for (const char* stage : {"1", "2", "3"}) {
        INFO("stage " << stage);
        Config m = config("deepspeed", Precision::bf16_mixed);
        m.knobs = {{"stage", stage}};
        Config t = m;
        t.precision = Precision::bf16_true;
        const SimResult mixed = run(m), pure = run(t);
        CHECK(pure.metrics.peak_memory_bytes == mixed.metrics.peak_memory_bytes);
        CHECK(pure.metrics.step_time_s == mixed.metrics.step_time_s);
    }
}
