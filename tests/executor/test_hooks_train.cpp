// Train mode's DDP communication hooks (executor/cpu/mlp_hooks.cpp): IEEE
// fp16/bf16 rounding, and on one rank the hooks' configurations run (one rank
// reduces nothing, so they equal plain DDP). The hidden [mpi2hooks] cases run
// on 2 ranks from tests/mpi/catch_2ranks.sh with [mpi2hooks] and check the error
// bounds README.md states.
#include "dtsim/common/error.hpp"
#include "dtsim/common/half.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include "../executor/cpu/cpu_backend.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace dtsim;
using executor::ExecOptions;
using executor::ExecResult;
using executor::Mode;
namespace cpu = executor::cpu;

namespace {

using Knobs = std::vector<std::pair<std::string, std::string>>;

int ranks() {
    executor::ensure_mpi();
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

sim::Config config_of(int world, const Knobs& knobs, sim::OptimizerKind opt) {
    sim::Config c;
    c.model = "mlp-3x64";
    c.strategy = "ddp";
    c.topology = {1, world};
    c.micro_batch = 8;
    c.optimizer = opt;
    c.knobs = knobs;
    return c;
}

ExecResult train(const sim::Config& c, int steps, double lr,
                 runtime::CommBackend transport = runtime::CommBackend::mpi) {
    const auto w = sim::build_workload(c);
    const auto plan = sim::lower(w, c);
    ExecOptions o;
    o.transport = transport;
    o.mode = Mode::train;
    o.steps = steps;
    o.learning_rate = lr;
    return executor::execute(plan, w, c, o);
}

// max |a - b| / max |b| over every parameter.
double relative_max_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    double diff = 0, scale = 0;
    REQUIRE(a.size() == b.size());
    for (std::size_t p = 0; p < a.size(); ++p) {
        REQUIRE(a[p].size() == b[p].size());
        for (std::size_t i = 0; i < a[p].size(); ++i) {
            diff = std::max(diff, std::abs(double(a[p][i]) - double(b[p][i])));
            scale = std::max(scale, std::abs(double(b[p][i])));
        }
    }
    return diff / scale;
}

// Every rank holds the same parameters.
bool identical_on_every_rank(const std::vector<std::vector<float>>& params) {
    std::vector<float> flat;
    for (const auto& p : params) flat.insert(flat.end(), p.begin(), p.end());
    std::vector<float> lo(flat.size()), hi(flat.size());
    MPI_Allreduce(flat.data(), lo.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(flat.data(), hi.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

int rank_of() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

const Knobs kPowerSgd = {{"comm_hook", "powerSGD"}, {"start_powerSGD_iter", "2"}};

Knobs with(Knobs k, const char* key, const char* value) {
    k.emplace_back(key, value);
    return k;
}

}  // namespace

TEST_CASE("fp16 and bf16 round to nearest even", "[executor]") {
    CHECK(dtsim::fp16_bits(1.0f) == 0x3c00);
    CHECK(dtsim::fp16_bits(-2.0f) == 0xc000);
    CHECK(dtsim::fp16_bits(65504.0f) == 0x7bff);
    CHECK(dtsim::fp16_bits(65519.99f) == 0x7bff);
    CHECK(dtsim::fp16_bits(65520.0f) == 0x7c00);  // the tie rounds to even: inf
    CHECK(dtsim::fp16_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(std::isnan(dtsim::round_to_fp16(std::numeric_limits<float>::quiet_NaN())));
    CHECK(dtsim::fp16_bits(1.0f + 0x1.0p-11f) == 0x3c00);      // tie: even
    CHECK(dtsim::fp16_bits(1.0f + 3 * 0x1.0p-11f) == 0x3c02);  // tie: even (up)
    CHECK(dtsim::fp16_bits(1.0f + 0x1.0p-11f + 0x1.0p-20f) == 0x3c01);
    CHECK(dtsim::fp16_bits(0x1.0p-24f) == 0x0001);  // smallest subnormal
    CHECK(dtsim::fp16_bits(0x1.0p-25f) == 0x0000);  // tie: even (zero)
    CHECK(dtsim::fp16_bits(0x1.8p-25f) == 0x0001);
    CHECK(dtsim::fp16_bits(0x1.8p-24f) == 0x0002);    // 1.5 units: tie, even
    CHECK(dtsim::fp16_bits(0x1.ffcp-15f) == 0x0400);  // rounds up into the smallest normal
    CHECK(dtsim::bf16_bits(1.0f) == 0x3f80);
    CHECK(dtsim::bf16_bits(1.0f + 0x1.0p-8f) == 0x3f80);                   // tie: even
    CHECK(dtsim::bf16_bits(1.0f + 3 * 0x1.0p-8f) == 0x3f82);               // tie: even (up)
    CHECK(dtsim::bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // overflows to inf
    CHECK(std::isnan(dtsim::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
    // Every finite half and bf16 value converts back to itself.
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        const auto b = static_cast<std::uint16_t>(h);
        if ((h & 0x7c00u) != 0x7c00u) REQUIRE(dtsim::fp16_bits(dtsim::fp16_value(b)) == b);
        if ((h & 0x7f80u) != 0x7f80u) REQUIRE(dtsim::bf16_bits(dtsim::bf16_value(b)) == b);
    }
    // Any float lands on the nearer of its two neighbouring halves.
    for (std::uint32_t i = 0; i < 200000; ++i) {
        const float f = std::ldexp(static_cast<float>(i % 9973) / 9973.0f + 1.0f, static_cast<int>(i % 40) - 26);
        const float r = dtsim::round_to_fp16(f);
        const std::uint16_t bits = dtsim::fp16_bits(f);
        const float below = dtsim::fp16_value(static_cast<std::uint16_t>(bits - (r > f ? 1 : 0)));
        const float above = dtsim::fp16_value(static_cast<std::uint16_t>(bits + (r < f ? 1 : 0)));
        REQUIRE(below <= f);
        REQUIRE(f <= above);
        REQUIRE(std::abs(double(r) - double(f)) <= std::min(f - below, above - f));
    }
}

TEST_CASE("train mode runs fp16, bf16 and PowerSGD hooks and names the hooks it cannot run", "[executor]") {
    if (ranks() != 1) return;
    const auto plain = train(config_of(1, {}, sim::OptimizerKind::sgd), 3, 0.1);
    // One rank still runs the Reducer and its hook, as torch does: the half-precision hooks round the
    // gradients (close to plain DDP, not equal); PowerSGD's first iteration is its vanilla allreduce, and
    // later ones compress.
    for (const auto& [hook, bound] : {std::pair{"fp16_compress", 1e-2}, std::pair{"bf16_compress", 5e-2}}) {
        INFO(hook);
        const auto r = train(config_of(1, {{"comm_hook", hook}}, sim::OptimizerKind::sgd), 3, 0.1);
        CHECK(r.parameters != plain.parameters);
        CHECK(relative_max_diff(r.parameters, plain.parameters) <= bound);
    }
    const auto one_step = train(config_of(1, {}, sim::OptimizerKind::sgd), 1, 0.1);
    CHECK(train(config_of(1, kPowerSgd, sim::OptimizerKind::sgd), 1, 0.1).parameters == one_step.parameters);
    for (const char* hook : {"batched_powerSGD", "post_localSGD"}) {
        INFO(hook);
        CHECK_THROWS_WITH(train(config_of(1, {{"comm_hook", hook}}, sim::OptimizerKind::sgd), 1, 0.1),
                          Catch::Contains(std::string("comm_hook=") + hook));
    }
    CHECK_THROWS_WITH(train(config_of(1, with(kPowerSgd, "comm_wrapper", "fp16"), sim::OptimizerKind::sgd), 1, 0.1),
                      Catch::Contains("comm_wrapper=fp16"));
}

TEST_CASE("2 ranks: fp16/bf16 compression and PowerSGD train within their stated bounds", "[.mpi2hooks]") {
    const int world = ranks();
    if (world != 2) {
        WARN("needs 2 ranks: run tests/mpi/catch_2ranks.sh with [mpi2hooks]");
        return;
    }
    const bool print = rank_of() == 0;
    // fp16 / bf16: after 5 steps, parameters within 1e-2 / 5e-2 relative (max-norm) of uncompressed DDP.
    for (auto opt : {sim::OptimizerKind::sgd, sim::OptimizerKind::adam}) {
        const double lr = opt == sim::OptimizerKind::sgd ? 0.1 : 1e-3;
        const auto plain = train(config_of(world, {}, opt), 5, lr);
        for (const auto& [hook, bound] : {std::pair{"fp16_compress", 1e-2}, std::pair{"bf16_compress", 5e-2}}) {
            INFO(hook << " " << sim::to_string(opt));
            const auto r = train(config_of(world, {{"comm_hook", hook}}, opt), 5, lr);
            const double err = relative_max_diff(r.parameters, plain.parameters);
            if (print) WARN(hook << " " << sim::to_string(opt) << ": relative max-norm difference " << err);
            CHECK(err <= bound);
            CHECK(err > 0);  // the compression really happened
            CHECK(identical_on_every_rank(r.parameters));
            // gloo sends the half buffer itself (fp16) and sums it with one rounding per element, as the MPI
            // path's float sum rounded back does on 2 ranks: the same bits.
            const auto over_gloo =
                train(config_of(world, {{"comm_hook", hook}}, opt), 5, lr, runtime::CommBackend::gloo);
            CHECK(over_gloo.parameters == r.parameters);
            // gradient_as_bucket_view: the optimizer reads the decompressed bucket itself, not a copy of it.
            const auto as_view =
                train(config_of(world, {{"comm_hook", hook}, {"gradient_as_bucket_view", "true"}}, opt), 5, lr);
            CHECK(as_view.parameters == r.parameters);
        }
    }
    // PowerSGD at ranks 1 and 4: every compressed bucket within a relative Frobenius error below 1 of the averaged
    // compressor input (the gradient plus the error feedback); without error feedback that input is the exact
    // averaged gradient. The loss falls over 20 steps.
    auto& diag = cpu::hook_diagnostics();
    struct PsgdCase {
        const char* rank;
        const char* warm;
        const char* feedback;
    };
    for (const PsgdCase& k : {PsgdCase{"1", "true", "true"}, PsgdCase{"1", "false", "true"},
                              PsgdCase{"4", "true", "true"}, PsgdCase{"1", "true", "false"}}) {
        INFO("rank " << k.rank << " warm_start " << k.warm << " use_error_feedback " << k.feedback);
        diag.enabled = true;
        diag.relative_error.clear();
        diag.compression_error.clear();
        const auto c = config_of(world,
                                 with(with(with(kPowerSgd, "matrix_approximation_rank", k.rank), "warm_start", k.warm),
                                      "use_error_feedback", k.feedback),
                                 sim::OptimizerKind::sgd);
        const auto run = train(c, 20, 0.5);
        diag.enabled = false;
        REQUIRE(run.loss.size() == 20);
        REQUIRE(diag.compression_error.size() == 18);  // iterations 3..20 compress
        const double worst = *std::max_element(diag.compression_error.begin(), diag.compression_error.end());
        const double worst_vs_g = *std::max_element(diag.relative_error.begin(), diag.relative_error.end());
        if (print)
            WARN("powerSGD rank " << k.rank << " warm_start " << k.warm << " use_error_feedback " << k.feedback
                                  << ": worst relative Frobenius error " << worst << " vs its input, " << worst_vs_g
                                  << " vs the exact gradient; loss " << run.loss.front() << " -> " << run.loss.back());
        CHECK(worst < 1.0);
        if (std::string(k.feedback) == "false") CHECK(worst_vs_g < 1.0);
        CHECK(run.loss.back() < 0.95 * run.loss.front());
        CHECK(identical_on_every_rank(run.parameters));
    }
    // Full rank (min(n, m) = 64, every weight compressed): equals plain allreduce within 1e-4 relative.
    const auto plain = train(config_of(world, {}, sim::OptimizerKind::sgd), 5, 0.1);
    const auto full =
        train(config_of(world, with(with(kPowerSgd, "matrix_approximation_rank", "64"), "min_compression_rate", "0"),
                        sim::OptimizerKind::sgd),
              5, 0.1);
    const double err = relative_max_diff(full.parameters, plain.parameters);
    if (print) WARN("powerSGD full rank: relative max-norm difference " << err);
    CHECK(err <= 1e-4);
}

TEST_CASE("replay runs each collective as the calibration measured it: an fp16 allreduce sums halves", "[executor]") {
    // The cost model prices an fp16 allreduce with the calibration's fp16 curve
    // (Communicator::allreduce_sum(Half*)), and element types without a curve
    // at the fp32 rate of their bytes; replay must run what was priced.
    for (const std::string hook : {"fp16_compress", "bf16_compress", ""}) {
        INFO("comm_hook " << (hook.empty() ? "none" : hook));
        const auto c = config_of(2, hook.empty() ? Knobs{} : Knobs{{"comm_hook", hook}}, sim::OptimizerKind::sgd);
        const auto w = sim::build_workload(c);
        const auto plan = sim::lower(w, c);
        int collectives = 0;
        for (const auto& t : plan.tasks) {
            if (t.kind != sim::TaskKind::collective) continue;
            ++collectives;
            const cpu::CollectiveCall call = cpu::collective_call(t);
            CHECK(call.kind == t.collective);
            CHECK(call.half == (hook == "fp16_compress"));
            CHECK(call.count * (call.half ? 2 : 4) == t.bytes);
        }
        CHECK(collectives > 0);
    }
}
