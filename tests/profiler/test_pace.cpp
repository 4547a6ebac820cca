// The figure that paces a step: the slowest rank's where ranks have cores of
// their own, the mean rate where they share cores; the same on every rank.
#include "../../profiler/cpu_calibration_parts.hpp"
#include "support/mpi_world.hpp"

#include <mpi.h>

#include <catch2/catch.hpp>

using namespace dtsim::profiler;

TEST_CASE("on one rank the pace is the rank's own figure", "[calibration]") {
    if (dtsim::test::mpi_world_size() != 1) return;
    CHECK_FALSE(ranks_share_cores());  // one rank has at least its one core
    CHECK(pace_time(3.5) == 3.5);
    CHECK(pace_rate(7.0) == 7.0);
}

TEST_CASE("2 ranks: the pace is the slowest rank's, or the mean rate where they share cores", "[.mpi2]") {
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const double time = rank == 0 ? 1.0 : 2.0;  // rank 1 is twice as slow
    const double paced_time = pace_time(time);
    const double paced_rate = pace_rate(1.0 / time);
    CHECK(dtsim::test::same_on_all_ranks(paced_time));
    if (ranks_share_cores()) {
        CHECK(paced_time == Approx(1.0 / ((1.0 + 0.5) / 2)));  // harmonic mean of the times
        CHECK(paced_rate == Approx((1.0 + 0.5) / 2));
    } else {
        CHECK(paced_time == 2.0);
        CHECK(paced_rate == 0.5);
    }
}
