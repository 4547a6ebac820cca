// Fault handling for execute(): a per-rank watchdog thread that notices when no
// rank has made progress for a while (a hung or stopped rank) and stops the job
// with a message naming the task it waits on and the ranks that did not reach
// it, after rank 0 has written the trace of the steps completed. Also handles
// SIGTERM (mpirun's reaction to a rank that died) the same way, and parses the
// test-only fault injection hook DTSIM_FAULT_INJECT.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dtsim::executor {

// DTSIM_FAULT_INJECT="rank=R,step=S,kind=exit|kill|hang|stop|throw": at the
// start of step S rank R exits with status 3 (exit), dies of SIGKILL (kill),
// blocks forever inside its first compute task (hang), stops itself with
// SIGSTOP (stop: the whole process, watchdog included, freezes), or its first
// compute task throws (throw: the rank's other streams must give up their
// waits through the stop flag). Tests only.
struct FaultInjection {
    enum class Kind : std::uint8_t { none, exit, kill, hang, stop, throw_ };
    Kind kind = Kind::none;
    int rank = -1;
    int step = -1;
};
FaultInjection fault_injection_from_env();  // throws ConfigError for a malformed value

// What one rank reports about itself in each heartbeat.
struct RankProgress {
    std::int64_t counter = 0;  // grows with every task that ends and every step that starts
    std::int64_t step = -1;    // the step it is in
    std::int64_t task = -1;    // the task it runs (running) or waits to start, -1: none
    bool running = false;
    double task_s = 0;  // how long it has been in that task
};

class Watchdog {
public:
    struct Hooks {
        std::function<RankProgress()> progress;         // this rank, now; called from the watchdog thread
        std::function<std::string(int task)> describe;  // "allreduce bucket 0, an allreduce over 2 ranks"
        std::function<bool(int task)> is_collective;
        std::function<std::string()> on_fault;  // rank 0: keep the completed steps; returns a line to print
    };
    // Collective over MPI_COMM_WORLD (duplicates it for the heartbeats).
    Watchdog(double timeout_s, int rank, int world, Hooks hooks);
    // Collective: returns once every rank has called it. Frees the communicator.
    void finish();
    // Without finish() (an exception unwinds): stops the thread, leaks the communicator.
    ~Watchdog();
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

private:
    void loop();
    [[noreturn]] void fault(const std::string& what, const std::vector<std::int64_t>& last, bool have_last,
                            double last_age_s);

    double timeout_s_;
    int rank_, world_;
    Hooks hooks_;
    MPI_Comm comm_ = MPI_COMM_NULL;
    std::mutex mu_;
    std::condition_variable cv_;
    bool finishing_ = false;
    bool abandon_ = false;
    std::thread thread_;
};

}  // namespace dtsim::executor
