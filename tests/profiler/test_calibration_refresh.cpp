// refresh_cpu_calibration re-measures the targets, memory and Adam and keeps
// everything else. The [.mpi2] case runs on 2 ranks (tests/mpi/catch_2ranks.sh).
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/mpi_init.hpp"

#include <mpi.h>
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

using namespace dtsim;
using namespace dtsim::profiler;
using calib::CollectiveKind;

namespace {

constexpr double kBogusUs = 1e9;  // a time no real measurement gives
constexpr std::int64_t kTargetBytes = 1 << 20;
constexpr std::int64_t kOtherBytes = 4096;

// A calibration whose target entries are bogus and whose other entries are
// recognisable, so that the test can tell what the refresh replaced.
calib::Calibration base_calibration(int ranks) {
    calib::Calibration c;
    c.name = "base";
    c.gemm_points = {{DType::fp32, 64, 64, 64, 1, kBogusUs, 0}, {DType::fp32, 32, 16, 8, 1, 123.0, 0}};
    c.gemm_curves.push_back(fit_gemm_curve(DType::fp32, 0, c.gemm_points));
    c.device.mem_bw_gbps = 1e-6;
    c.host.cpu_adam_params_per_s = 1.0;
    c.host.nvme_read_gbps = 0.125;
    c.host.nvme_write_gbps = 0.25;
    c.overlap.compute_slowdown_under_comm = 3.5;
    if (ranks > 1) {
        const std::vector<calib::CollectivePoint> points{{kOtherBytes, 77.0, 0}, {kTargetBytes, kBogusUs, 0}};
        c.collectives.push_back(fit_collective(CollectiveKind::allreduce, calib::LinkScope::intra_node, ranks, points));
    }
    return c;
}

CalibrationTargets targets() {
    CalibrationTargets t;
    t.gemm_shapes = {{64, 64, 64}};
    t.collective_sizes = {{CollectiveKind::allreduce, kTargetBytes}};
    return t;
}

void check_refreshed(const calib::Calibration& c) {
    REQUIRE(c.gemm_points.size() == 2);
    CHECK(c.gemm_points[0].time_us < 1e5);     // re-measured
    CHECK(c.gemm_points[1].time_us == 123.0);  // kept
    CHECK(c.device.mem_bw_gbps > 0.01);
    CHECK(c.host.cpu_adam_params_per_s > 1e3);
    CHECK(c.host.h2d_pinned_gbps > 0);
    CHECK(c.host.nvme_read_gbps == 0.125);  // not re-measured
    CHECK(c.host.nvme_write_gbps == 0.25);
    CHECK(c.overlap.compute_slowdown_under_comm == 3.5);
    CHECK(c.name == "base");
}

}  // namespace

TEST_CASE("refresh_cpu_calibration on one rank replaces the targets' GEMM points and memory figures only") {
    ensure_mpi();
    if (dtsim::test::mpi_world_size() != 1) return;  // the [.mpi2] case covers 2 ranks
    check_refreshed(refresh_cpu_calibration(base_calibration(1), targets()));
}

TEST_CASE("2 ranks: refresh_cpu_calibration re-measures the target collective size and keeps the others", "[.mpi2]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const calib::Calibration c = refresh_cpu_calibration(base_calibration(2), targets());
    check_refreshed(c);
    REQUIRE(c.collectives.size() == 1);
    const auto& points = c.collectives[0].points;
    REQUIRE(points.size() == 2);
    CHECK(points[0].size_bytes == kOtherBytes);
    CHECK(points[0].time_us == 77.0);
    CHECK(points[1].size_bytes == kTargetBytes);
    CHECK(points[1].time_us < 1e5);
    CHECK(dtsim::test::same_on_all_ranks(points[1].time_us));  // every rank prices alike
}
