// wait_for_peers waits for the late rank asleep, not spinning, holds every
// rank until the last arrives, and gives up on its stop flag; on 2 ranks
// (tests/mpi/catch_2ranks.sh with [mpi2]).
#include "dtsim/runtime/peer_wait.hpp"

#include <mpi.h>
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using namespace dtsim;

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
    runtime::prepare_peer_wait(MPI_COMM_WORLD);  // its set-up, collective and not asleep, is not what is measured
    MPI_Barrier(MPI_COMM_WORLD);
    constexpr auto kLate = std::chrono::milliseconds(300);
    if (rank == 1) std::this_thread::sleep_for(kLate);
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_s();
    runtime::wait_for_peers(MPI_COMM_WORLD);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = thread_cpu_s() - cpu_start;
    if (rank == 0) {
        CHECK(wall >= 0.25);      // it waited for rank 1
        CHECK(cpu < 0.3 * wall);  // mostly asleep (a spinning wait burns all of it)
    }
}

TEST_CASE("2 ranks: no rank leaves wait_for_peers before the last has arrived, round after round", "[.mpi2]") {
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm comm = MPI_COMM_NULL;  // a fresh communicator: its first call sets the barrier up
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    constexpr int kRounds = 300;
    // Host-wide monotonic clock (ns): arrivals and departures of each rank.
    auto now_ns = [] { return static_cast<std::int64_t>(std::chrono::steady_clock::now().time_since_epoch().count()); };
    std::vector<std::int64_t> arrive(kRounds), leave(kRounds);
    int not_met = 0;
    for (int i = 0; i < kRounds; ++i) {
        // Either rank is late by turns, by 0-300 us.
        if ((i % 2) == rank) std::this_thread::sleep_for(std::chrono::microseconds((i * 37) % 300));
        arrive[i] = now_ns();
        if (!runtime::wait_for_peers(comm)) ++not_met;
        leave[i] = now_ns();
    }
    std::vector<std::int64_t> peer_arrive(kRounds);
    MPI_Sendrecv(arrive.data(), kRounds, MPI_INT64_T, 1 - rank, 0, peer_arrive.data(), kRounds, MPI_INT64_T, 1 - rank,
                 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int early = 0;
    for (int i = 0; i < kRounds; ++i)
        if (leave[i] < peer_arrive[i]) ++early;
    CHECK(not_met == 0);
    CHECK(early == 0);
    MPI_Comm_free(&comm);
}

TEST_CASE("2 ranks: wait_for_peers returns false when its stop flag is set while a peer stays away", "[.mpi2]") {
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    REQUIRE(runtime::wait_for_peers(comm));  // sets the barrier up on both ranks
    if (rank == 0) {
        std::atomic<bool> stop{false};
        std::thread stopper([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            stop = true;
        });
        const auto start = std::chrono::steady_clock::now();
        const bool met = runtime::wait_for_peers(comm, &stop);  // rank 1 never comes
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        stopper.join();
        CHECK_FALSE(met);
        CHECK(wall < 5.0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&comm);
}
