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
    CHECK(dtsim::test::same_on_all_ranks(ranks_share_cores() ? 1.0 : 0.0));
    // Own cores: the slowest rank's figure.
    CHECK(pace_time(time, false) == 2.0);
    CHECK(pace_rate(1.0 / time, false) == 0.5);
    // Shared cores: the mean rate, so the harmonic mean of the times.
    CHECK(pace_rate(1.0 / time, true) == Approx((1.0 + 0.5) / 2));
    CHECK(pace_time(time, true) == Approx(1.0 / ((1.0 + 0.5) / 2)));
    // The decision, whichever it is here, gives one of the two on every rank.
    const double paced = pace_time(time);
    CHECK(dtsim::test::same_on_all_ranks(paced));
    CHECK(paced == (ranks_share_cores() ? pace_time(time, true) : pace_time(time, false)));
}

TEST_CASE("2 ranks confined to one core share it, and are paced by their mean rate", "[.mpi2onecore]") {
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    REQUIRE(ranks_share_cores());
    CHECK(pace_time(rank == 0 ? 1.0 : 2.0) == Approx(4.0 / 3.0));
}
