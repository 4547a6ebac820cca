// BracketedRefresh: the first plan's targets refreshed before it runs; after
// each run, that plan's and the next one's, serving as the next "before".
#include "dtsim/executor/bracketed_refresh.hpp"
#include "dtsim/profiler/fit.hpp"
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

using namespace dtsim;

namespace {

constexpr double kBogusUs = 1e9;  // a time no real measurement gives

double time_of(const calib::Calibration& c, std::int64_t m) {
    for (const auto& p : c.gemm_points)
        if (p.m == m) return p.time_us;
    return -1;
}

}  // namespace

TEST_CASE("a bracketed refresh re-measures each plan's targets before and after its run", "[executor]") {
    if (test::mpi_world_size() != 1) return;
    calib::Calibration base;
    base.name = "base";
    base.gemm_points = {{DType::fp32, 64, 64, 64, 1, kBogusUs, 0}, {DType::fp32, 32, 32, 32, 1, kBogusUs, 0}};
    base.gemm_curves.push_back(profiler::fit_gemm_curve(DType::fp32, 0, base.gemm_points));
    profiler::CalibrationTargets first, second;
    first.gemm_shapes = {{64, 64, 64}};
    second.gemm_shapes = {{32, 32, 32}};
    executor::BracketedRefresh refresh(base, {first, second});
    CHECK(time_of(refresh.before(), 64) < kBogusUs);  // the first plan's, before it runs
    CHECK(time_of(refresh.before(), 32) == kBogusUs);
    const calib::Calibration& after_first = refresh.after_run();
    CHECK(time_of(after_first, 64) < kBogusUs);  // the first plan's again, after its run
    CHECK(time_of(after_first, 32) < kBogusUs);  // and the second's, before it runs
    CHECK(&refresh.before() == &after_first);
    const calib::Calibration& after_second = refresh.after_run();
    CHECK(time_of(after_second, 32) < kBogusUs);
    CHECK(time_of(after_second, 64) == kBogusUs);  // from the base again: only the last plan's targets
    CHECK_THROWS(refresh.after_run());             // no third run
}
