// wait_for_peers waits for the late rank asleep, not spinning; on 2 ranks
// (tests/mpi/catch_2ranks.sh with [mpi2]).
#include "dtsim/profiler/peer_wait.hpp"

#include <mpi.h>
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

#include <time.h>

#include <chrono>
#include <thread>

using namespace dtsim::profiler;

namespace {

double thread_cpu_s() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("2 ranks: wait_for_peers waits for the late rank and sleeps meanwhile", "[.mpi2]") {
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    constexpr auto kLate = std::chrono::milliseconds(300);
    if (rank == 1) std::this_thread::sleep_for(kLate);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_s();
    wait_for_peers(MPI_COMM_WORLD);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = thread_cpu_s() - cpu_start;
    if (rank == 0) {
        CHECK(wall >= 0.25);      // it waited for rank 1
        CHECK(cpu < 0.3 * wall);  // mostly asleep (a spinning wait burns all of it)
    }
}
