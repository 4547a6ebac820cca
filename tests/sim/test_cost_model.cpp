// Cost model: collective and GEMM prices against their closed forms, computed
// here from the formulas (nccl-tests' PERFORMANCE.md ring model), not copied.
#include "dtsim/common/error.hpp"
#include "dtsim/common/gemm_alignment.hpp"
#include "dtsim/sim/cost_model.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::sim;
using calib::Calibration;
using calib::CollectiveCurve;
using calib::LinkScope;

namespace {

constexpr std::int64_t KiB = 1024;
constexpr std::int64_t MiB = 1024 * KiB;
constexpr std::int64_t GiB = 1024 * MiB;

constexpr double kMemBwGbps = 1000;
constexpr double kElementwiseEff = 0.5;
constexpr double kOverheadUs = 2.0;
constexpr double kPeakTflops = 100;
constexpr double kMaxEff = 0.8;

// A device with one bf16 GEMM curve and no collective data.
Calibration base_calibration() {
    Calibration c;
    c.name = "hand-made";
    c.provenance.source = "measured";
    c.device = {"test-gpu", 80 * GiB, 0, kMemBwGbps, kElementwiseEff, kOverheadUs};
    c.gpus_per_node = 8;
    c.gemm_curves.push_back({DType::bf16, kPeakTflops, kMaxEff, 128, 128, 64, 0});
    return c;
}

CollectiveCurve curve(CollectiveKind kind, LinkScope scope, int group_size, double latency_us, double step_latency_us,
                      double bus_bw_gbps) {
    CollectiveCurve c;
    c.kind = kind;
    c.scope = scope;
    c.group_size = group_size;
    c.latency_us = latency_us;
    c.step_latency_us = step_latency_us;
    c.bus_bw_gbps = bus_bw_gbps;
    return c;
}

void add_all_kinds(Calibration& c, LinkScope scope, double latency_us, double step_latency_us, double bus_bw_gbps) {
    for (auto kind : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                      CollectiveKind::broadcast, CollectiveKind::reduce})
        c.collectives.push_back(curve(kind, scope, 0, latency_us, step_latency_us, bus_bw_gbps));
}

double as_double(std::int64_t x) {
    return static_cast<double>(x);
}

// bytes / (GB/s) is nanoseconds.
double transfer_ns(double factor, std::int64_t bytes, double bus_bw_gbps) {
    return factor * as_double(bytes) / bus_bw_gbps;
}

}  // namespace

TEST_CASE("ring allreduce of 1 GiB on 8 ranks moves 2(n-1)/n of the data at bus bandwidth") {
    Calibration c = base_calibration();
    c.collectives.push_back(curve(CollectiveKind::allreduce, LinkScope::intra_node, 0, 0, 0, 100));
    const CostModel cost(c);
    const int n = 8;
    const double expected = 2.0 * (n - 1) / n * as_double(GiB) / 100.0;
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, CommGroup{n, 1}) == Approx(expected).epsilon(1e-12));
    CHECK(cost.link_collective_ns(CollectiveKind::allreduce, GiB, n, LinkScope::intra_node) ==
          Approx(expected).epsilon(1e-12));
    // Twice the data takes twice as long with no latency term.
    CHECK(cost.collective_ns(CollectiveKind::allreduce, 2 * GiB, CommGroup{n, 1}) ==
          Approx(2 * expected).epsilon(1e-12));
}

TEST_CASE("allgather and reduce-scatter move (n-1)/n of the data, and broadcast and reduce all of it") {
    Calibration c = base_calibration();
    add_all_kinds(c, LinkScope::intra_node, 0, 0, 100);
    const CostModel cost(c);
    for (int n : {2, 4, 8}) {
        INFO("group of " << n);
        const CommGroup g{n, 1};
        const double nn = n;
        CHECK(cost.collective_ns(CollectiveKind::allgather, GiB, g) ==
              Approx(transfer_ns((nn - 1) / nn, GiB, 100)).epsilon(1e-12));
        CHECK(cost.collective_ns(CollectiveKind::reduce_scatter, GiB, g) ==
              Approx(transfer_ns((nn - 1) / nn, GiB, 100)).epsilon(1e-12));
        CHECK(cost.collective_ns(CollectiveKind::broadcast, GiB, g) ==
              Approx(transfer_ns(1.0, GiB, 100)).epsilon(1e-12));
        CHECK(cost.collective_ns(CollectiveKind::reduce, GiB, g) == Approx(transfer_ns(1.0, GiB, 100)).epsilon(1e-12));
        CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, g) ==
              Approx(transfer_ns(2 * (nn - 1) / nn, GiB, 100)).epsilon(1e-12));
    }
}

TEST_CASE("a tiny message costs the base latency plus one step latency per ring step") {
    Calibration c = base_calibration();
    const double latency_us = 10, step_us = 0.5, bw = 100;
    add_all_kinds(c, LinkScope::intra_node, latency_us, step_us, bw);
    const CostModel cost(c);
    const int n = 8;
    const std::int64_t bytes = 8;
    const CommGroup g{n, 1};
    // Allreduce is a reduce-scatter then an all-gather: 2(n-1) ring steps; the others n-1.
    const double allreduce_ns = (latency_us + 2 * (n - 1) * step_us) * 1e3 + transfer_ns(2.0 * (n - 1) / n, bytes, bw);
    const double allgather_ns = (latency_us + (n - 1) * step_us) * 1e3 + transfer_ns(double(n - 1) / n, bytes, bw);
    const double broadcast_ns = (latency_us + (n - 1) * step_us) * 1e3 + transfer_ns(1.0, bytes, bw);
    CHECK(cost.collective_ns(CollectiveKind::allreduce, bytes, g) == Approx(allreduce_ns).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::allgather, bytes, g) == Approx(allgather_ns).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::reduce_scatter, bytes, g) == Approx(allgather_ns).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::broadcast, bytes, g) == Approx(broadcast_ns).epsilon(1e-12));
    // The latency term dominates a tiny message.
    CHECK(cost.collective_ns(CollectiveKind::allreduce, bytes, g) > latency_us * 1e3);
}

TEST_CASE("an allreduce across 2 nodes of 8 is intra reduce-scatter, inter allreduce of a shard, intra all-gather") {
    Calibration c = base_calibration();
    const double intra_lat = 5, intra_step = 0.5, intra_bw = 200;
    const double inter_lat = 10, inter_step = 5, inter_bw = 25;
    add_all_kinds(c, LinkScope::intra_node, intra_lat, intra_step, intra_bw);
    add_all_kinds(c, LinkScope::inter_node, inter_lat, inter_step, inter_bw);
    const CostModel cost(c);
    const std::int64_t s = GiB;
    const int per_node = 8, nodes = 2;
    const double intra_rs =
        (intra_lat + (per_node - 1) * intra_step) * 1e3 + transfer_ns(double(per_node - 1) / per_node, s, intra_bw);
    const double intra_ag = intra_rs;  // same factor and step count as the reduce-scatter
    const std::int64_t shard = s / per_node;
    const double inter_ar =
        (inter_lat + 2 * (nodes - 1) * inter_step) * 1e3 + transfer_ns(2.0 * (nodes - 1) / nodes, shard, inter_bw);
    const double expected = intra_rs + inter_ar + intra_ag;
    CHECK(cost.collective_ns(CollectiveKind::allreduce, s, CommGroup{nodes * per_node, nodes}) ==
          Approx(expected).epsilon(1e-12));
    // Reduce-scatter and all-gather across nodes are the two halves.
    const double inter_half =
        (inter_lat + (nodes - 1) * inter_step) * 1e3 + transfer_ns(double(nodes - 1) / nodes, shard, inter_bw);
    CHECK(cost.collective_ns(CollectiveKind::reduce_scatter, s, CommGroup{16, 2}) ==
          Approx(intra_rs + inter_half).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::allgather, s, CommGroup{16, 2}) ==
          Approx(inter_half + intra_ag).epsilon(1e-12));
    // Hierarchical beats a flat ring over the slow link for large messages.
    const double flat_inter = inter_lat * 1e3 + 2 * 15 * inter_step * 1e3 + transfer_ns(2.0 * 15 / 16, s, inter_bw);
    CHECK(expected < flat_inter);
}

TEST_CASE("one GPU per node uses only the inter-node curve") {
    Calibration c = base_calibration();
    const double lat = 10, step = 5, bw = 25;
    add_all_kinds(c, LinkScope::inter_node, lat, step, bw);  // no intra-node data at all
    const CostModel cost(c);
    const int n = 4;
    const double expected = (lat + 2 * (n - 1) * step) * 1e3 + transfer_ns(2.0 * (n - 1) / n, 256 * MiB, bw);
    double got = 0;
    REQUIRE_NOTHROW(got = cost.collective_ns(CollectiveKind::allreduce, 256 * MiB, CommGroup{n, n}));
    CHECK(got == Approx(expected).epsilon(1e-12));
}

TEST_CASE("a group of one rank costs nothing") {
    const Calibration c = base_calibration();  // no collective curves: none may be looked up
    const CostModel cost(c);
    for (auto kind : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                      CollectiveKind::broadcast, CollectiveKind::reduce}) {
        double got = -1;
        REQUIRE_NOTHROW(got = cost.collective_ns(kind, GiB, CommGroup{1, 1}));
        CHECK(got == 0.0);
    }
}

TEST_CASE("a curve measured for the exact group size wins over one for any size") {
    Calibration c = base_calibration();
    // The any-size curve comes first so that taking the first match would be wrong.
    c.collectives.push_back(curve(CollectiveKind::allreduce, LinkScope::intra_node, 0, 0, 0, 100));
    c.collectives.push_back(curve(CollectiveKind::allreduce, LinkScope::intra_node, 8, 0, 0, 300));
    c.collectives.push_back(curve(CollectiveKind::allreduce, LinkScope::intra_node, 2, 0, 0, 50));
    const CostModel cost(c);
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, CommGroup{8, 1}) ==
          Approx(transfer_ns(2.0 * 7 / 8, GiB, 300)).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, CommGroup{2, 1}) ==
          Approx(transfer_ns(2.0 * 1 / 2, GiB, 50)).epsilon(1e-12));
    // No curve for 4 ranks: the any-size curve.
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, CommGroup{4, 1}) ==
          Approx(transfer_ns(2.0 * 3 / 4, GiB, 100)).epsilon(1e-12));
}

TEST_CASE("a collective is priced by its dtype's curve where one exists, else by fp32's at the same bytes") {
    Calibration c = base_calibration();
    // gloo on a CPU: fp16 sums run at 0.4x fp32's bytes per second.
    CollectiveCurve half = curve(CollectiveKind::allreduce, LinkScope::intra_node, 2, 0, 0, 40);
    half.dtype = DType::fp16;
    c.collectives.push_back(half);  // before the fp32 curve, so that ignoring the dtype would pick it
    c.collectives.push_back(curve(CollectiveKind::allreduce, LinkScope::intra_node, 2, 0, 0, 100));
    const CostModel cost(c);
    const CommGroup pair{2, 1};
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, pair) == Approx(transfer_ns(1.0, GiB, 100)).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, pair, DType::fp32) ==
          Approx(transfer_ns(1.0, GiB, 100)).epsilon(1e-12));
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, pair, DType::fp16) ==
          Approx(transfer_ns(1.0, GiB, 40)).epsilon(1e-12));
    // bf16 has no curve of its own: fp32's rate for its bytes.
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, pair, DType::bf16) ==
          Approx(transfer_ns(1.0, GiB, 100)).epsilon(1e-12));
    // A calibration with only a 16-bit curve still lacks fp32 data: the usual error.
    Calibration only_half = base_calibration();
    only_half.collectives.push_back(half);
    const CostModel cost_half(only_half);
    CHECK_THROWS_AS(cost_half.collective_ns(CollectiveKind::allreduce, GiB, pair), CalibrationError);
}

TEST_CASE("measured collective points are returned exactly and interpolated log-log between") {
    Calibration c = base_calibration();
    // The fitted line is deliberately far from the points so the two cannot be confused.
    CollectiveCurve ar = curve(CollectiveKind::allreduce, LinkScope::intra_node, 8, 1000, 0, 1);
    ar.points = {{1 * MiB, 50.0}, {4 * MiB, 120.0}, {16 * MiB, 400.0}};
    c.collectives.push_back(ar);
    const CostModel cost(c);
    auto at = [&](std::int64_t bytes) {
        return cost.link_collective_ns(CollectiveKind::allreduce, bytes, 8, LinkScope::intra_node);
    };
    CHECK(at(1 * MiB) == 50.0e3);
    CHECK(at(4 * MiB) == 120.0e3);
    CHECK(at(16 * MiB) == 400.0e3);
    CHECK(cost.collective_ns(CollectiveKind::allreduce, 4 * MiB, CommGroup{8, 1}) == 120.0e3);

    // Between two points: t = log(S/lo)/log(hi/lo), time = lo_t * (hi_t/lo_t)^t.
    for (std::int64_t bytes : {2 * MiB, 3 * MiB, 5 * MiB, 10 * MiB}) {
        INFO(bytes << " bytes");
        const bool low = bytes < 4 * MiB;
        const double lo_s = as_double(low ? 1 * MiB : 4 * MiB), hi_s = as_double(low ? 4 * MiB : 16 * MiB);
        const double lo_t = low ? 50.0 : 120.0, hi_t = low ? 120.0 : 400.0;
        const double t = std::log(as_double(bytes) / lo_s) / std::log(hi_s / lo_s);
        const double expected_ns = lo_t * std::pow(hi_t / lo_t, t) * 1e3;
        const double got = at(bytes);
        CHECK(got > lo_t * 1e3);
        CHECK(got < hi_t * 1e3);
        CHECK(got == Approx(expected_ns).epsilon(1e-9));
    }
    // The midpoint in log size is the geometric mean of the two times.
    CHECK(at(2 * MiB) == Approx(std::sqrt(50.0 * 120.0) * 1e3).epsilon(1e-9));

    // Outside the measured range the fitted line applies.
    const double line_ns = 1000 * 1e3 + transfer_ns(2.0 * 7 / 8, 64 * MiB, 1);
    CHECK(at(64 * MiB) == Approx(line_ns).epsilon(1e-12));
    CHECK(at(512 * KiB) == Approx(1000 * 1e3 + transfer_ns(2.0 * 7 / 8, 512 * KiB, 1)).epsilon(1e-12));
}

TEST_CASE("a missing inter-node curve is a calibration error that says how to measure it") {
    Calibration c = base_calibration();
    add_all_kinds(c, LinkScope::intra_node, 5, 0.5, 200);  // intra-node only
    c.collectives.push_back(curve(CollectiveKind::allgather, LinkScope::inter_node, 4, 10, 5, 25));
    const CostModel cost(c);

    SECTION("hierarchical allreduce over 2 nodes") {
        try {
            cost.collective_ns(CollectiveKind::allreduce, GiB, CommGroup{16, 2});
            FAIL("expected a CalibrationError");
        } catch (const CalibrationError& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(what.find("hand-made") != std::string::npos);
            CHECK(what.find("allreduce") != std::string::npos);
            CHECK(what.find("group of 2 ranks") != std::string::npos);
            CHECK(what.find("across nodes") != std::string::npos);
            CHECK(what.find("dtsim calibrate") != std::string::npos);
        }
    }
    SECTION("reduce-scatter with one GPU per node, with a curve for another kind present") {
        try {
            cost.collective_ns(CollectiveKind::reduce_scatter, GiB, CommGroup{4, 4});
            FAIL("expected a CalibrationError");
        } catch (const CalibrationError& e) {
            const std::string what = e.what();
            INFO(what);
            CHECK(what.find("reduce_scatter") != std::string::npos);
            CHECK(what.find("group of 4 ranks") != std::string::npos);
            CHECK(what.find("dtsim calibrate") != std::string::npos);
        }
    }
}

TEST_CASE("GEMM time grows with size and efficiency rises towards, never past, the maximum") {
    const Calibration c = base_calibration();
    const CostModel cost(c);
    double prev_ns = 0, prev_eff = 0;
    for (std::int64_t d = 64; d <= 16384; d *= 2) {
        INFO("square GEMM of " << d);
        const double ns = cost.gemm_ns(d, d, d, 1, DType::bf16);
        const double flops = 2.0 * as_double(d) * as_double(d) * as_double(d);
        const double eff = flops / (ns * 1e-9) / (kPeakTflops * 1e12);
        CHECK(ns > prev_ns);
        CHECK(eff > prev_eff);
        CHECK(eff <= kMaxEff);
        prev_ns = ns;
        prev_eff = eff;
    }
    // A large GEMM gets close to the curve's maximum.
    CHECK(prev_eff > 0.95 * kMaxEff);
    // Batching fills the machine like more rows: 8 batched GEMMs cost less than 8 separate ones,
    // and (compute-bound) as much as one GEMM with 8 times the rows.
    const double batched = cost.gemm_ns(1024, 1024, 1024, 8, DType::bf16);
    CHECK(batched < 8 * cost.gemm_ns(1024, 1024, 1024, 1, DType::bf16));
    CHECK(batched > cost.gemm_ns(1024, 1024, 1024, 1, DType::bf16));
    CHECK(batched == Approx(cost.gemm_ns(8 * 1024, 1024, 1024, 1, DType::bf16)).epsilon(1e-9));
}

TEST_CASE("a measured GEMM point sets the price of its own shape and corrects the others") {
    Calibration without = base_calibration();
    Calibration with = base_calibration();
    const std::int64_t d = 4096;
    const double flops = 2.0 * as_double(d) * as_double(d) * as_double(d);
    const double measured_eff = 0.4;  // the curve says about 0.76 at this shape
    const double measured_us = flops / (kPeakTflops * 1e12 * measured_eff) * 1e6;
    with.gemm_points.push_back({DType::bf16, d, d, d, 1, measured_us});
    // A point for another dtype must not affect bf16.
    with.gemm_points.push_back({DType::fp32, d, d, d, 1, 1.0});
    const CostModel cost_without(without), cost_with(with);

    // A measured shape costs exactly its measured time (which already includes any launch overhead).
    CHECK(cost_with.gemm_ns(d, d, d, 1, DType::bf16) == Approx(measured_us * 1e3).epsilon(1e-9));
    CHECK(cost_without.gemm_ns(d, d, d, 1, DType::bf16) < measured_us * 1e3);

    // Elsewhere the measured/modelled ratio is blended with the curve (a ratio-1 prior at
    // squared log2 distance 4): near shapes take most of the correction, far ones little.
    const double ratio = measured_us * 1e3 / cost_without.gemm_ns(d, d, d, 1, DType::bf16);
    auto corrected = [&](double squared_log2_distance) {
        return (ratio / squared_log2_distance + 1.0 / 4.0) / (1.0 / squared_log2_distance + 1.0 / 4.0);
    };
    // (8192, 2048, 1024) is 1, 1 and 2 octaves away: squared distance 1 + 1 + 4 = 6.
    const double near_without = cost_without.gemm_ns(8192, 2048, 1024, 1, DType::bf16);
    CHECK(cost_with.gemm_ns(8192, 2048, 1024, 1, DType::bf16) == Approx(near_without * corrected(6)).epsilon(1e-9));
    // (65536, 256, 4096): 4 octaves in m and 4 in n, squared distance 32: almost the plain curve.
    const double far_without = cost_without.gemm_ns(65536, 256, 4096, 1, DType::bf16);
    const double far_with = cost_with.gemm_ns(65536, 256, 4096, 1, DType::bf16);
    CHECK(far_with == Approx(far_without * corrected(32)).epsilon(1e-9));
    CHECK(std::abs(far_with / far_without - 1) < std::abs(ratio - 1) / 5);
}

TEST_CASE("a thin GEMM is bound by memory bandwidth") {
    const Calibration c = base_calibration();
    const CostModel cost(c);
    const std::int64_t m = 1, n = 8192, k = 8192;
    const double bytes = (as_double(m * k) + as_double(k * n) + as_double(m * n)) * 2;  // bf16
    const double ns = cost.gemm_ns(m, n, k, 1, DType::bf16);
    CHECK(ns >= bytes / kMemBwGbps);
    CHECK(ns == Approx(bytes / (kMemBwGbps * kElementwiseEff) + kOverheadUs * 1e3).epsilon(1e-9));
    // Far slower than its flops alone at the best efficiency would take.
    const double flops_ns = 2.0 * as_double(m * n * k) / (kPeakTflops * 1e12 * kMaxEff) * 1e9;
    CHECK(ns > 10 * flops_ns);
}

TEST_CASE("an elementwise pass streams its bytes at the achieved bandwidth plus the kernel overhead") {
    const Calibration c = base_calibration();
    const CostModel cost(c);
    for (std::int64_t bytes : {std::int64_t{1}, 4 * KiB, 64 * MiB, 3 * GiB}) {
        INFO(bytes << " bytes");
        CHECK(cost.elementwise_ns(bytes) ==
              Approx(as_double(bytes) / (kMemBwGbps * kElementwiseEff) + kOverheadUs * 1e3).epsilon(1e-12));
    }
    CHECK(cost.elementwise_ns(0) == 0.0);
}

TEST_CASE("a non-vectorized kernel takes its elements at the element rate when that is slower than its bytes") {
    Calibration c = base_calibration();
    c.device.indexed_elements_per_s = 300e9;
    const CostModel cost(c);
    const double overhead_ns = kOverheadUs * 1e3;
    models::Op op = models::make_elementwise("x*rsqrt", 8 * 33'554'432LL, 0);
    const double by_bytes = as_double(op.bytes) / (kMemBwGbps * kElementwiseEff) + overhead_ns;
    CHECK(cost.op_ns(op) == Approx(by_bytes).epsilon(1e-12));  // vectorized: bytes only
    op.indexed_elements = 33'554'432;
    const double by_elements = 33'554'432.0 / 300e9 * 1e9 + overhead_ns;
    CHECK(cost.op_ns(op) == Approx(std::max(by_bytes, by_elements)).epsilon(1e-12));
    // Few elements over many bytes: the bandwidth bound wins.
    op.indexed_elements = 1000;
    CHECK(cost.op_ns(op) == Approx(by_bytes).epsilon(1e-12));
    // Several kernels: one launch overhead each.
    op.kernels = 3;
    CHECK(cost.op_ns(op) == Approx(by_bytes + 2 * overhead_ns).epsilon(1e-12));
    // A calibration without the rate (CPU backends): bytes only.
    c.device.indexed_elements_per_s = 0;
    op.indexed_elements = 33'554'432;
    op.kernels = 1;
    CHECK(CostModel(c).op_ns(op) == Approx(by_bytes).epsilon(1e-12));
}

TEST_CASE("misaligned GEMMs run cuBLAS's slower kernel families: even dims at align4_ratio, odd at align2_ratio") {
    Calibration c = base_calibration();
    c.gemm_curves[0].align4_ratio = 0.35;
    c.gemm_curves[0].align2_ratio = 0.17;
    const CostModel cost(c);
    // Large enough that compute, not memory, bounds every shape; curve factors of
    // 4096 and 4095 differ by far less than the tolerance.
    const double aligned = cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16);
    const double flops_ns = aligned - kOverheadUs * 1e3;
    auto compute_ratio = [&](double ns) { return (ns - kOverheadUs * 1e3) / flops_ns; };
    // Multiples of 8 bf16 elements (16 bytes) are aligned.
    CHECK(compute_ratio(cost.gemm_ns(8192, 4104, 4096, 1, DType::bf16)) == Approx(4104.0 / 4096).epsilon(1e-3));
    // Even but not a multiple of 8, in either feature dimension: 1 / 0.35 as long.
    CHECK(compute_ratio(cost.gemm_ns(8192, 4100, 4096, 1, DType::bf16)) == Approx(4100.0 / 4096 / 0.35).epsilon(1e-3));
    CHECK(compute_ratio(cost.gemm_ns(8192, 4096, 4102, 1, DType::bf16)) == Approx(4102.0 / 4096 / 0.35).epsilon(1e-3));
    // Odd: 1 / 0.17.
    CHECK(compute_ratio(cost.gemm_ns(8192, 4095, 4096, 1, DType::bf16)) == Approx(4095.0 / 4096 / 0.17).epsilon(1e-3));
    // The token dimension is no leading dimension: an odd m costs nothing extra.
    CHECK(compute_ratio(cost.gemm_ns(8191, 4096, 4096, 1, DType::bf16)) == Approx(8191.0 / 8192).epsilon(1e-3));
    // An op says its class: a wgrad (m = in features, k = tokens) keeps its forward's.
    const auto head = models::make_gemm("lm_head", 8192, 50257, 1600, 1, DType::bf16);
    CHECK(head.align_elements == 1);
    const auto backward = models::gemm_backward(head);
    REQUIRE(backward.size() == 2);
    for (const auto& op : backward) CHECK(op.align_elements == 1);
    const auto odd_in = models::make_gemm("proj", 8192, 4096, 4099, 1, DType::bf16);
    const auto wgrad = models::gemm_backward(odd_in).back();  // m = 4099, n = 4096, k = 8192 tokens
    CHECK(gemm_alignment(wgrad.n, wgrad.k) == 8);     // what its own n and k would say
    CHECK(wgrad.align_elements == 1);
    CHECK(cost.op_ns(wgrad) > 5 * cost.gemm_ns(wgrad.m, wgrad.n, wgrad.k, 1, DType::bf16, 8));
    CHECK(gemm_alignment(4100, 4096) == 4);
    CHECK(gemm_alignment(4102, 4096) == 2);

    SECTION("measured points correct only GEMMs of their own kernel family") {
        Calibration measured = c;
        const double aligned_us = cost.gemm_ns(4096, 4096, 4096, 1, DType::bf16) * 1e-3;
        measured.gemm_points.push_back({DType::bf16, 4096, 4096, 4096, 1, 2 * aligned_us});
        const CostModel corrected(measured);
        CHECK(corrected.gemm_ns(4096, 4104, 4096, 1, DType::bf16) >
              1.5 * cost.gemm_ns(4096, 4104, 4096, 1, DType::bf16));
        CHECK(corrected.gemm_ns(4096, 4095, 4096, 1, DType::bf16) ==
              Approx(cost.gemm_ns(4096, 4095, 4096, 1, DType::bf16)).epsilon(1e-12));
    }
    SECTION("calibrations without the fields penalise nothing") {
        const Calibration plain = base_calibration();
        CHECK(plain.gemm_curves[0].align4_ratio == 1);
        CHECK(plain.gemm_curves[0].align2_ratio == 1);
        const CostModel unpenalised(plain);
        CHECK(compute_ratio(unpenalised.gemm_ns(8192, 4095, 4096, 1, DType::bf16)) ==
              Approx(4095.0 / 4096).epsilon(1e-3));
    }
}

TEST_CASE("each GEMM layout is priced at its curve ratio and corrected foremost by its own points") {
    Calibration c = base_calibration();
    c.gemm_curves[0].nt_ratio = 0.8;
    c.gemm_curves[0].tn_ratio = 1.25;
    const CostModel cost(c);
    const double flops_ns = cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16) - kOverheadUs * 1e3;
    auto compute_ratio = [&](double ns) { return (ns - kOverheadUs * 1e3) / flops_ns; };
    CHECK(compute_ratio(cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16, 0, GemmLayout::nt)) ==
          Approx(1 / 0.8).epsilon(1e-9));
    CHECK(compute_ratio(cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16, 0, GemmLayout::tn)) ==
          Approx(1 / 1.25).epsilon(1e-9));
    // An nn.Linear's three GEMMs carry their layouts to the price.
    const auto forward = models::make_gemm("fc", 8192, 4096, 4096, 1, DType::bf16, GemmLayout::nt);
    const auto backward = models::gemm_backward(forward);
    REQUIRE(backward.size() == 2);
    CHECK(backward[0].layout == GemmLayout::nn);  // dX = dY W
    CHECK(backward[1].layout == GemmLayout::tn);  // dW from X^T dY
    CHECK(cost.op_ns(forward) == cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16, 0, GemmLayout::nt));
    CHECK(cost.op_ns(backward[0]) == cost.gemm_ns(8192, 4096, 4096, 1, DType::bf16));
    CHECK(models::gemm_backward(models::make_gemm("av", 64, 64, 64, 1, DType::bf16))[0].layout == GemmLayout::nt);

    SECTION("a point measured in a GEMM's own layout prices it exactly; an NN point at that shape, scaled") {
        Calibration measured = c;
        const double nt_us = 3 * cost.gemm_ns(4096, 4096, 4096, 1, DType::bf16, 0, GemmLayout::nt) * 1e-3;
        calib::GemmPoint p{DType::bf16, 4096, 4096, 4096, 1, nt_us};
        p.layout = GemmLayout::nt;
        measured.gemm_points.push_back(p);
        const CostModel corrected(measured);
        CHECK(corrected.gemm_ns(4096, 4096, 4096, 1, DType::bf16, 0, GemmLayout::nt) == Approx(nt_us * 1e3));
        // Other layouts feel it from a distance, as from a shape twice as far.
        const double nn = corrected.gemm_ns(4096, 4096, 4096, 1, DType::bf16);
        CHECK(nn > cost.gemm_ns(4096, 4096, 4096, 1, DType::bf16));
        CHECK(nn < 3 * cost.gemm_ns(4096, 4096, 4096, 1, DType::bf16));

        Calibration nn_only = c;
        nn_only.gemm_points.push_back({DType::bf16, 4096, 4096, 4096, 1, 1000.0});
        const CostModel from_nn(nn_only);
        // No NT point at all: the NN measurement, at the layouts' ratio.
        CHECK(from_nn.gemm_ns(4096, 4096, 4096, 1, DType::bf16, 0, GemmLayout::nt) == Approx(1000.0e3 / 0.8));
    }
    SECTION("calibrations without layout fields price every layout as NN") {
        const Calibration without = base_calibration();  // CostModel keeps a reference: it must outlive it
        const CostModel plain(without);
        CHECK(plain.gemm_ns(2048, 1024, 512, 1, DType::bf16, 0, GemmLayout::nt) ==
              plain.gemm_ns(2048, 1024, 512, 1, DType::bf16));
    }
}
