// The executor's scheduler: one thread per stream (compute at the lowest
// priority, see profiler/thread_priority.hpp), each running its tasks in issue
// order once their dependencies have ended; per-task steady-clock timings
// gathered on rank 0. In train mode a bucket's allreduce is issued, not waited
// for (completion()): over gloo, two run at once on its worker threads.
#include "dtsim/executor/execute.hpp"

#include "cpu/cpu_backend.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/executor/measured_result.hpp"
#include "dtsim/executor/mpi_world.hpp"
#include "dtsim/profiler/host_info.hpp"
#include "dtsim/runtime/peer_wait.hpp"
#include "dtsim/runtime/thread_priority.hpp"
#include "dtsim/sim/report.hpp"
#include "watchdog.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <mpi.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

extern "C" void openblas_set_num_threads(int);

namespace dtsim::executor {
namespace {

using sim::Phase;
using sim::TaskKind;
using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// This process's minor page faults so far (all threads).
long minor_page_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

// One communicator per (stream, group) the Plan uses (mpi_world.hpp), over
// the run's transport, as torch makes a process group per group. Each keeps
// its MPI communicator too: the executor meets its peers there (peer_wait).
struct GroupComm {
    MPI_Comm mpi = MPI_COMM_NULL;
    std::unique_ptr<runtime::Communicator> comm;
};

class Comms {
public:
    Comms(const sim::Plan& plan, const sim::Config& config, int rank, runtime::CommBackend transport,
          runtime::HalfSum half_sum) {
        for (const auto& [s, g] : communicator_keys(plan)) {
            GroupComm& c = comms_[{s, g}];
            MPI_Comm_split(MPI_COMM_WORLD, group_color(plan, g, config, rank), rank, &c.mpi);
            runtime::prepare_peer_wait(c.mpi);  // here, in order on one thread, not in the stream threads' steps
            c.comm = runtime::make_communicator(transport, c.mpi, half_sum);
        }
    }
    ~Comms() { close(); }
    // Ends every communicator (their queued collectives run first) and frees its MPI communicator.
    void close() {
        for (auto& [key, c] : comms_) {
            c.comm.reset();
            if (c.mpi != MPI_COMM_NULL) MPI_Comm_free(&c.mpi);
        }
    }
    Comms(const Comms&) = delete;
    Comms& operator=(const Comms&) = delete;
    const GroupComm* get(int stream, int group) const {
        auto it = comms_.find({stream, group});
        return it == comms_.end() ? nullptr : &it->second;
    }

private:
    std::map<std::pair<int, int>, GroupComm> comms_;
};

// Train mode's preconditions; throws ConfigError naming what is unsupported.
void check_train(const sim::Plan& plan, const models::Workload& w, const sim::Config& config) {
    (void)mlp_shape(w);
    if (config.decoupled_weight_decay)
        throw ConfigError(
            "train mode trains with adam or sgd; --optimizer adamw is simulated only "
            "(use --optimizer adam, or --mode replay).");
    // A plan with shard groups keeps each rank's shards (FSDP, ZeRO); one without replicates the model (DDP).
    if (!plan.shards.empty()) return cpu::check_sharded_train(plan, w, config);
    if (config.precision != sim::Precision::fp32)
        throw ConfigError("train mode runs fp32 only; use --precision fp32 or --mode replay.");
    if (plan.hook.kind == sim::HookKind::other)
        throw ConfigError(
            fmt::format("train mode runs comm_hook=allreduce, fp16_compress, bf16_compress and "
                        "powerSGD, not comm_hook={}; use --mode replay.",
                        plan.hook.name));
    const bool hooked = plan.hook.kind != sim::HookKind::none;
    for (const auto& t : plan.tasks) {
        if (t.kind == TaskKind::collective && t.bucket >= 0 &&
            (t.collective != calib::CollectiveKind::allreduce || t.role == sim::CollectiveRole::other))
            throw ConfigError("train mode needs every bucket reduced by one allreduce; use --mode replay.");
        if (t.kind == TaskKind::compute && t.layer < 0 && t.phase != Phase::optimizer &&
            t.phase != Phase::gradient_copy && !(hooked && t.phase == Phase::compression))
            throw ConfigError(fmt::format("train mode cannot run {} passes; use --mode replay.", to_string(t.phase)));
        if (t.kind != TaskKind::compute && t.kind != TaskKind::collective && t.kind != TaskKind::host_compute)
            throw ConfigError("train mode runs no copy or I/O tasks (offload); use --mode replay.");
    }
}

struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    int started_step = -1;
    Clock::time_point t0;
    std::vector<int> done_step;  // by task: the last step it ended in
    int done_in_step = 0;
    std::exception_ptr error;
    std::atomic<bool> failed{false};  // error is set: threads waiting for peers give up
    // Fault detection: progress grows with every task end and step start; by
    // stream, the task it runs (running) or waits to start (-1: none), since when.
    std::int64_t progress = 0;
    std::vector<int> current;
    std::vector<char> running;
    std::vector<Clock::time_point> since;
    std::map<int, Clock::time_point> in_flight;  // collectives issued and not yet done: since when
};

class Runner {
public:
    Runner(const sim::Plan& plan, const models::Workload& w, const sim::Config& config, const ExecOptions& options,
           int rank, int world, FaultInjection inject)
        : plan_(plan),
          w_(w),
          options_(options),
          comms_(plan, config, rank, options.transport, options.half_sum),
          rank_(rank),
          world_(world),
          inject_(inject) {
        shared_.done_step.assign(plan.tasks.size(), -1);
        shared_.current.assign(plan.streams.size(), -1);
        shared_.running.assign(plan.streams.size(), 0);
        shared_.since.assign(plan.streams.size(), Clock::now());
        timings_.assign(static_cast<std::size_t>(options.steps),
                        std::vector<TaskTiming>(plan.tasks.size(), TaskTiming{}));
        compute_stream_ = plan.compute_stream;
        by_stream_.resize(plan.streams.size());
        for (std::size_t i = 0; i < plan.tasks.size(); ++i)
            by_stream_[static_cast<std::size_t>(plan.tasks[i].stream)].push_back(static_cast<int>(i));
        for (const auto& t : plan.tasks)
            if (t.phase == Phase::gradient_copy) has_gradient_copy_ = true;
        if (options.mode == Mode::train) {
            trainer_ = std::make_unique<cpu::MlpTrainer>(plan, w, config, options, rank, world);
            if (plan.shards.empty()) trainer_->enable_comm_hook(plan, w, options.steps);
        }
        const std::filesystem::path dir = options.scratch_dir.empty() ? std::filesystem::temp_directory_path()
                                                                      : std::filesystem::path(options.scratch_dir);
        scratch_.resize(plan.streams.size());
        for (std::size_t s = 0; s < plan.streams.size(); ++s)
            cpu::size_scratch(scratch_[s], plan, w, static_cast<int>(s), world,
                              (dir / fmt::format("dtsim-exec-{}-r{}-s{}.bin", ::getpid(), rank, s)).string());
    }
    ~Runner() {
        comms_.close();  // first: a collective still in flight (a failed run) completes into this runner
        for (auto& s : scratch_) cpu::release_scratch(s);
    }

    void run(std::vector<double>& loss, std::vector<double>& page_faults, int world) {
        std::vector<std::thread> threads;
        // Every stream on its own thread, compute at the lowest priority
        // (thread_priority.hpp), except over gloo, which runs as torch does:
        // its compute thread at the normal priority, beside gloo's threads.
        // This thread starts steps and gathers timings.
        const bool lower_compute = options_.transport != runtime::CommBackend::gloo;
        for (std::size_t s = 0; s < by_stream_.size(); ++s)
            if (!by_stream_[s].empty())
                threads.emplace_back([this, s, lower_compute] {
                    if (lower_compute && static_cast<int>(s) == compute_stream_) runtime::lower_this_thread_priority();
                    stream_loop(static_cast<int>(s));
                });
        try {
            for (int step = 0; step < options_.steps; ++step) {
                MPI_Barrier(MPI_COMM_WORLD);
                const long faults_before = minor_page_faults();
                {
                    std::lock_guard lock(shared_.mu);
                    shared_.t0 = Clock::now();
                    shared_.done_in_step = 0;
                    shared_.started_step = step;
                    ++shared_.progress;
                }
                shared_.cv.notify_all();
                {
                    std::unique_lock lock(shared_.mu);
                    shared_.cv.wait(lock, [&] {
                        return shared_.error || shared_.done_in_step == static_cast<int>(plan_.tasks.size());
                    });
                    if (shared_.error) std::rethrow_exception(shared_.error);
                }
                page_faults.push_back(static_cast<double>(minor_page_faults() - faults_before));
                if (trainer_) {
                    double l = trainer_->take_loss();
                    MPI_Allreduce(MPI_IN_PLACE, &l, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    loss.push_back(l / world);
                }
                gather_step(step);
                if (after_step_ && step + 1 < options_.steps) after_step_();
            }
        } catch (...) {
            fail(std::current_exception());
            for (auto& t : threads) t.join();
            throw;
        }
        for (auto& t : threads) t.join();
        std::lock_guard lock(shared_.mu);
        if (shared_.error) std::rethrow_exception(shared_.error);
    }

    // Called on this thread after each step but the last has been gathered
    // (between steps: outside every measured step).
    void set_after_step(std::function<void()> f) { after_step_ = std::move(f); }

    // [step][rank][task] of the steps every rank completed: every rank on rank 0,
    // this rank's row elsewhere.
    std::vector<std::vector<std::vector<TaskTiming>>> gathered() const {
        std::lock_guard lock(gathered_mu_);
        return gathered_;
    }

    // For the watchdog: this rank's step and the task it is most likely stuck in
    // (a running collective, else the longest-running task, else the task the
    // compute stream waits to start).
    RankProgress progress() const {
        std::lock_guard lock(shared_.mu);
        RankProgress p;
        p.counter = shared_.progress;
        p.step = std::min(shared_.started_step, options_.steps - 1);
        const auto now = Clock::now();
        int best = -1;
        auto rank_of = [&](std::size_t s) {
            const int i = shared_.current[s];
            if (i < 0) return 0;
            if (shared_.running[s] == 0) return s == static_cast<std::size_t>(compute_stream_) ? 1 : 0;
            return plan_.tasks[static_cast<std::size_t>(i)].kind == TaskKind::collective ? 3 : 2;
        };
        for (std::size_t s = 0; s < shared_.current.size(); ++s) {
            const int r = rank_of(s);
            if (r == 0) continue;
            if (best < 0 || r > rank_of(static_cast<std::size_t>(best)) ||
                (r == rank_of(static_cast<std::size_t>(best)) &&
                 shared_.since[s] < shared_.since[static_cast<std::size_t>(best)]))
                best = static_cast<int>(s);
        }
        if (best >= 0) {
            const auto b = static_cast<std::size_t>(best);
            p.task = shared_.current[b];
            p.running = shared_.running[b] != 0;
            p.task_s = std::chrono::duration<double>(now - shared_.since[b]).count();
        }
        // A collective issued to gloo's workers and not done (the oldest) ranks with a running one.
        if (!shared_.in_flight.empty() && (best < 0 || rank_of(static_cast<std::size_t>(best)) < 3)) {
            const auto oldest = std::min_element(shared_.in_flight.begin(), shared_.in_flight.end(),
                                                 [](const auto& a, const auto& b) { return a.second < b.second; });
            p.task = oldest->first;
            p.running = true;
            p.task_s = std::chrono::duration<double>(now - oldest->second).count();
        }
        return p;
    }
    const cpu::MlpTrainer* trainer() const { return trainer_.get(); }

private:
    void fail(std::exception_ptr e) {
        {
            std::lock_guard lock(shared_.mu);
            if (!shared_.error) shared_.error = e;
            shared_.started_step = options_.steps;  // releases idle threads
            shared_.failed = true;
        }
        shared_.cv.notify_all();
    }

    void stream_loop(int stream) {
        try {
            for (int step = 0; step < options_.steps; ++step) {
                {
                    std::unique_lock lock(shared_.mu);
                    shared_.cv.wait(lock, [&] { return shared_.error || shared_.started_step >= step; });
                    if (shared_.error) return;
                }
                run_tasks(stream, step);
            }
        } catch (...) {
            fail(std::current_exception());
        }
    }

    void run_tasks(int stream, int step) {
        auto& timing = timings_[static_cast<std::size_t>(step)];
        Clock::time_point t0;
        for (int i : by_stream_[static_cast<std::size_t>(stream)]) {
            const auto& t = plan_.tasks[static_cast<std::size_t>(i)];
            {
                std::unique_lock lock(shared_.mu);
                shared_.current[static_cast<std::size_t>(stream)] = i;
                shared_.running[static_cast<std::size_t>(stream)] = 0;
                shared_.since[static_cast<std::size_t>(stream)] = Clock::now();
                shared_.cv.wait(lock, [&] {
                    if (shared_.error) return true;
                    for (auto d : plan_.deps_of(t))
                        if (shared_.done_step[static_cast<std::size_t>(d)] < step) return false;
                    return true;
                });
                if (shared_.error) throw std::runtime_error("another stream failed");
                t0 = shared_.t0;
                shared_.running[static_cast<std::size_t>(stream)] = 1;
                shared_.since[static_cast<std::size_t>(stream)] = Clock::now();
            }
            if (stream == compute_stream_ && i == by_stream_[static_cast<std::size_t>(stream)].front()) inject(step);
            const auto start = Clock::now();
            if (run_task(i, stream, step, t0)) {  // issued: its completion ends it
                std::lock_guard lock(shared_.mu);
                shared_.current[static_cast<std::size_t>(stream)] = -1;
                shared_.running[static_cast<std::size_t>(stream)] = 0;
                continue;
            }
            const auto end = Clock::now();
            timing[static_cast<std::size_t>(i)] = {
                std::chrono::duration_cast<std::chrono::nanoseconds>(start - t0).count(),
                std::chrono::duration_cast<std::chrono::nanoseconds>(end - t0).count()};
            {
                std::lock_guard lock(shared_.mu);
                shared_.done_step[static_cast<std::size_t>(i)] = step;
                ++shared_.done_in_step;
                ++shared_.progress;
                shared_.current[static_cast<std::size_t>(stream)] = -1;
                shared_.running[static_cast<std::size_t>(stream)] = 0;
            }
            shared_.cv.notify_all();
        }
    }

    // A collective issued asynchronously (gloo's worker threads run it, up to
    // two at once, as ProcessGroupGloo's): its stream goes on to its next task
    // and this completion times and ends it, on the thread that ran it. Its
    // start is when a worker took it up; waiting in the queue is not running.
    runtime::Completion completion(int index, int step, Clock::time_point t0) {
        const auto started = std::make_shared<Clock::time_point>(Clock::now());
        {
            std::lock_guard lock(shared_.mu);
            shared_.in_flight[index] = *started;
        }
        return {[started] { *started = Clock::now(); },
                [this, index, step, t0, started](std::exception_ptr error) {
                    if (error) return fail(error);
                    const auto end = Clock::now();
                    timings_[static_cast<std::size_t>(step)][static_cast<std::size_t>(index)] = {
                        std::chrono::duration_cast<std::chrono::nanoseconds>(*started - t0).count(),
                        std::chrono::duration_cast<std::chrono::nanoseconds>(end - t0).count()};
                    std::lock_guard lock(shared_.mu);  // notified under it: the runner may go once the step ends
                    shared_.in_flight.erase(index);
                    shared_.done_step[static_cast<std::size_t>(index)] = step;
                    ++shared_.done_in_step;
                    ++shared_.progress;
                    shared_.cv.notify_all();
                }};
    }

    // DTSIM_FAULT_INJECT (tests only): this rank exits, dies or hangs at the start of a step.
    void inject(int step) const {
        if (inject_.kind == FaultInjection::Kind::none || inject_.rank != rank_ || inject_.step != step) return;
        static constexpr const char* kinds[] = {"none", "exit", "kill", "hang", "stop", "throw"};
        std::fprintf(stderr, "dtsim: fault injection (DTSIM_FAULT_INJECT): rank %d: %s at step %d\n", rank_,
                     kinds[static_cast<int>(inject_.kind)], step);
        std::fflush(stderr);
        if (inject_.kind == FaultInjection::Kind::exit) std::_Exit(3);
        if (inject_.kind == FaultInjection::Kind::kill) std::raise(SIGKILL);
        if (inject_.kind == FaultInjection::Kind::stop) std::raise(SIGSTOP);
        if (inject_.kind == FaultInjection::Kind::throw_)
            throw std::runtime_error(fmt::format("injected task failure (DTSIM_FAULT_INJECT) at step {}", step));
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }

    // The step's lightweight end check: every rank's timings of it to rank 0.
    void gather_step(int step) {
        std::vector<std::vector<TaskTiming>> rows =
            gather_on_rank0(timings_[static_cast<std::size_t>(step)], rank_, world_);
        std::lock_guard lock(gathered_mu_);
        gathered_.push_back(std::move(rows));
    }

    // Runs task `index`, or issues it and returns true when its completion
    // ends it later (completion()).
    bool run_task(int index, int stream, int step, Clock::time_point t0) {
        const sim::Task& t = plan_.tasks[static_cast<std::size_t>(index)];
        auto& scratch = scratch_[static_cast<std::size_t>(stream)];
        const GroupComm* group = t.kind == TaskKind::collective ? comms_.get(stream, t.group) : nullptr;
        runtime::Communicator* comm = group != nullptr ? group->comm.get() : nullptr;
        // Not spinning while peers compute; not waiting for them once this rank failed.
        if (group != nullptr && !runtime::wait_for_peers(group->mpi, &shared_.failed))
            throw std::runtime_error("another stream failed");
        if (trainer_) {
            if (trainer_->run_sharded(index, comm)) return false;
            if (trainer_->run_hook_pass(index, has_gradient_copy_)) return false;
            if (t.kind == TaskKind::compute && t.layer >= 0) {
                if (t.phase == Phase::backward)
                    trainer_->backward(t.micro_step, t.layer);
                else
                    trainer_->forward(t.micro_step, t.layer);
                return false;
            }
            if (t.kind == TaskKind::compute && t.phase == Phase::optimizer) {
                trainer_->optimizer_step(t.optimizer_impl);
                return false;
            }
            if (t.kind == TaskKind::compute && t.phase == Phase::gradient_copy) {
                trainer_->copy_buckets_back(plan_.buckets);
                return false;
            }
            if (t.kind == TaskKind::collective && t.bucket >= 0) {
                trainer_->reduce_bucket_task(t, plan_.buckets[static_cast<std::size_t>(t.bucket)], *comm,
                                             has_gradient_copy_, completion(index, step, t0));
                return true;
            }
        }
        cpu::replay_task(plan_, w_, t, scratch, comm);
        return false;
    }

    const sim::Plan& plan_;
    const models::Workload& w_;
    const ExecOptions& options_;
    Comms comms_;
    int rank_ = 0, world_ = 1;
    FaultInjection inject_;
    std::function<void()> after_step_;
    mutable Shared shared_;
    mutable std::mutex gathered_mu_;
    std::vector<std::vector<std::vector<TaskTiming>>> gathered_;
    int compute_stream_ = 0;
    bool has_gradient_copy_ = false;
    std::vector<std::vector<int>> by_stream_;
    std::vector<cpu::Scratch> scratch_;
    std::vector<std::vector<TaskTiming>> timings_;  // [step][task], this rank (read by gather_step)
    std::unique_ptr<cpu::MlpTrainer> trainer_;
};

}  // namespace

std::string_view to_string(Mode m) {
    return m == Mode::train ? "train" : "replay";
}

Mode mode_from_string(std::string_view s) {
    if (s == "replay") return Mode::replay;
    if (s == "train") return Mode::train;
    throw ConfigError(fmt::format("unknown execution mode '{}': use replay or train.", s));
}

ExecResult execute(const sim::Plan& plan, const models::Workload& workload, const sim::Config& config,
                   const ExecOptions& options) {
    const auto [rank, world] = checked_mpi_world(config, /*needs_thread_multiple=*/true);
    if (options.steps < 1) throw ConfigError(fmt::format("steps must be at least 1, not {}.", options.steps));
    if (options.mode == Mode::train) check_train(plan, workload, config);
    if (options.fault_timeout_s < 0)
        throw ConfigError(fmt::format("the fault timeout must be >= 0 s (0: none), not {}.", options.fault_timeout_s));
    const FaultInjection inject = fault_injection_from_env();
    openblas_set_num_threads(1);

    ExecResult r;
    r.mode = options.mode;
    r.transport = options.transport;
    r.warmup_steps = options.warmup_steps;
    r.rank = rank;
    r.world_size = world;
    r.steps = options.steps;
    {
        // A rank that cannot allocate its parameters, gradients and scratch says so
        // (cli::on_all_ranks names the rank and stops the others).
        std::unique_ptr<Runner> owned;
        try {
            owned = std::make_unique<Runner>(plan, workload, config, options, rank, world, inject);
        } catch (const std::bad_alloc&) {
            throw Error(fmt::format("out of memory while allocating this rank's buffers for {} ({}): its parameters, "
                                    "gradients, optimizer state and scratch do not fit in the memory it may use",
                                    config.model, config.strategy));
        }
        Runner& runner = *owned;
        // Rank 0: the trace of the steps every rank has completed, under
        // write_partial_trace's path (the run's own trace replaces it at the
        // end). What it says of the write: the steps kept, or why it could not.
        // From the watchdog thread on a fault and from this one between steps.
        std::mutex partial_mu;
        const auto keep_partial = [&](std::string_view why) -> std::string {
            std::lock_guard lock(partial_mu);
            ExecResult partial;
            partial.mode = options.mode;
            partial.world_size = world;
            partial.timings = runner.gathered();
            partial.steps = static_cast<int>(partial.timings.size());
            fill_step_times(partial);
            sim::Timeline tl = make_measured_timeline(partial, plan, workload, config);
            tl.title += fmt::format(" - partial: {} of {} step(s) completed{}", partial.steps, options.steps, why);
            try {
                options.write_partial_trace(tl);
            } catch (const std::exception& e) {
                return fmt::format("could not write the partial trace: {}", e.what());
            }
            return fmt::format("kept the trace of the {} step(s) every rank completed", partial.steps);
        };
        std::optional<Watchdog> watchdog;
        if (options.fault_timeout_s > 0) {
            Watchdog::Hooks hooks;
            hooks.progress = [&runner] { return runner.progress(); };
            hooks.describe = [&](int task) {
                const auto& t = plan.tasks[static_cast<std::size_t>(task)];
                std::string name = sim::task_name(plan, workload, t);
                if (t.kind == TaskKind::collective) {
                    const std::string_view kind = calib::to_string(t.collective);
                    name += fmt::format(", {} {} over {} ranks", kind.front() == 'a' ? "an" : "a", kind,
                                        plan.groups[static_cast<std::size_t>(t.group)].size);
                }
                return name;
            };
            hooks.is_collective = [&](int task) {
                return plan.tasks[static_cast<std::size_t>(task)].kind == TaskKind::collective;
            };
            hooks.on_fault = [&]() -> std::string {
                if (!options.write_partial_trace) return {};
                return keep_partial(" before a fault");
            };
            watchdog.emplace(options.fault_timeout_s, rank, world, std::move(hooks));
        }
        if (rank == 0 && options.write_partial_trace) {
            // Keep the completed steps on disk as the run goes, so that they
            // survive even a rank 0 that gets no time at its end: mpirun sends
            // SIGKILL 1 s after SIGTERM (odls_base_sigkill_timeout), which a
            // loaded machine can spend before the watchdog has written them, and
            // nothing catches an OOM kill. Written between steps (none of the
            // measured steps pays for it), after every step until the writes have
            // cost this thread 50 ms of CPU, and beyond that while they stay
            // within 5 % of the run's wall time. CPU time, so that a loaded or
            // sanitized build keeps the same steps of a short run.
            runner.set_after_step([&, start = Clock::now(), spent_s = 0.0]() mutable {
                const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
                if (spent_s > 0.05 && spent_s > 0.05 * wall_s) return;
                const double cpu0 = thread_cpu_seconds();
                (void)keep_partial("");  // a failed write: the end of the run says why, if it still cannot
                spent_s += thread_cpu_seconds() - cpu0;
            });
        }
        runner.run(r.loss, r.step_page_faults, world);
        r.timings = runner.gathered();
        if (watchdog) watchdog->finish();
        if (runner.trainer()) r.parameters = runner.trainer()->full_parameters();
    }
    finish_measured_result(r, plan, workload, config);

    if (const std::string slow = profiler::blas_kernel_warning(profiler::host_info()); !slow.empty())
        r.notes.push_back(slow);
    if (r.mode == Mode::replay) {
        r.notes.push_back(
            "replay: GEMMs run as fp32 cblas_sgemm at each op's m, n, k and layout (NN, NT or TN; batched GEMMs "
            "loop), whatever the precision; elementwise ops, loss, embeddings and explicit passes run as memory passes over their "
            "bytes (at most 32 MiB of scratch, streamed repeatedly); collectives are real MPI calls on bytes/4 "
            "floats.");
        bool host = false, io = false, flops = false;
        for (const auto& t : plan.tasks) {
            host = host || t.kind == TaskKind::host_compute;
            io = io || t.kind == TaskKind::io;
            flops = flops || (t.kind == TaskKind::compute && t.layer < 0 && t.flops > 0 && t.phase != Phase::optimizer);
        }
        if (host)
            r.notes.push_back(
                "host tasks: the CPU optimizer runs an Adam loop over its elements; fixed-duration tasks spin.");
        if (io) r.notes.push_back("I/O tasks write and read a real file (page cache, no O_DIRECT).");
        if (flops)
            r.notes.push_back("the matmul flops of compression passes are not executed, only their memory passes.");
    } else {
        r.notes.push_back(fmt::format(
            "train: real {} MLP on {} rank(s), {} optimizer (lr {}), each rank on its {}-row shard of a {}-row "
            "global batch per micro-step; bucket allreduces reduce the real gradients.",
            config.model, world, to_string(config.optimizer), options.learning_rate, config.micro_batch,
            config.micro_batch * world));
    }
    return r;
}

std::string_view to_string(Backend b) {
    return b == Backend::cuda ? "CUDA" : "CPU";
}

namespace {

// The summary's "CPU backend: MPI + OpenBLAS" and so on.
std::string_view libraries_of(const ExecResult& r) {
    if (r.backend == Backend::cuda) return "NCCL + cuBLAS";
    return r.transport == runtime::CommBackend::gloo ? "gloo over TCP + OpenBLAS" : "MPI + OpenBLAS";
}

}  // namespace

std::string format_execution_summary(const ExecResult& r) {
    std::string out = fmt::format("Executed {} step(s) in {} mode on {} rank(s) ({} backend: {})\n", r.steps,
                                  to_string(r.mode), r.world_size, to_string(r.backend), libraries_of(r));
    out += "  step times:";
    for (double s : r.step_time_s) out += fmt::format(" {:.3f} ms", s * 1e3);
    out += "\n";
    const std::size_t warmup = first_measured_step(r);
    out += fmt::format("  median step time{}: {:.3f} ms\n",
                       warmup == 0   ? ""
                       : warmup == 1 ? " (first step excluded)"
                                     : fmt::format(" (first {} steps excluded)", warmup),
                       r.median_step_time_s * 1e3);
    out += fmt::format(
        "  peak memory per rank: {:.1f} MiB (the plan's allocations at their measured times); process peak RSS "
        "{:.1f} MiB\n",
        static_cast<double>(r.peak_memory_bytes) / (1 << 20), static_cast<double>(r.peak_rss_bytes) / (1 << 20));
    out += fmt::format("  page faults per step: {:.0f} (memory fresh from the system, {:.1f} MiB of 4 KiB pages)\n",
                       r.page_faults_per_step, r.page_faults_per_step * 4096 / (1 << 20));
    if (!r.loss.empty()) {
        out += "  loss:";
        for (double l : r.loss) out += fmt::format(" {:.6g}", l);
        out += "\n";
    }
    for (const auto& n : r.notes) out += "  note: " + n + "\n";
    return out;
}

}  // namespace dtsim::executor
