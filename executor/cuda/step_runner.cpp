// One step's issue across the Plan's streams (cuda_backend.hpp). Host threads
// only enqueue GPU work, so a stream's thread runs ahead of its GPU; it waits
// on the host only for what the host must see: another thread's issue of a
// dependency, or a host task's end.
#include "cuda_backend.hpp"

#include "dtsim/common/error.hpp"

#include <cupti.h>

#include <exception>
#include <thread>

namespace dtsim::executor::cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t cupti_now() {
    std::uint64_t ns = 0;
    DTSIM_CUDA_CHECK(cuptiGetTimestamp(&ns));
    return ns;
}

std::int64_t ns_between(cudaEvent_t from, cudaEvent_t to) {
    float ms = 0;
    DTSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
    return static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
}

// Sets the calling thread's task for CUPTI correlation while in scope.
struct TaskTag {
    explicit TaskTag(int task) { LaunchTagger::set_task(task); }
    ~TaskTag() { LaunchTagger::set_task(-1); }
    TaskTag(const TaskTag&) = delete;
    TaskTag& operator=(const TaskTag&) = delete;
};

}  // namespace

StepRunner::StepRunner(const sim::Plan& plan, std::vector<StreamWork>& work, const NcclGroups& comms, int device,
                       bool cupti_clock)
    : plan_(plan), work_(work), comms_(comms), device_(device), cupti_clock_(cupti_clock) {
    by_stream_.resize(plan.streams.size());
    for (std::size_t i = 0; i < plan.tasks.size(); ++i)
        by_stream_[static_cast<std::size_t>(plan.tasks[i].stream)].push_back(static_cast<int>(i));
    start_.resize(plan.tasks.size());
    end_.resize(plan.tasks.size());
}

StepRecord StepRunner::run_step() {
    const std::size_t n = plan_.tasks.size();
    StepRecord rec;
    rec.event_timings.assign(n, TaskTiming{});
    rec.cupti.host_start_ns.assign(n, 0);
    rec.cupti.host_end_ns.assign(n, 0);
    rec.cupti.launched.assign(n, 0);
    issued_.assign(n, 0);
    failed_ = false;

    // Every GPU stream starts after t0, which the host stamps once it has passed
    // (the streams are idle: the previous step ended with a synchronisation).
    cudaStream_t first = nullptr;
    for (auto& w : work_)
        if (w.stream() && !first) {
            first = w.stream();
            DTSIM_CUDA_CHECK(cudaEventRecord(t0_.get(), first));
        }
    for (auto& w : work_)
        if (w.stream() && w.stream() != first) DTSIM_CUDA_CHECK(cudaStreamWaitEvent(w.stream(), t0_.get(), 0));
    if (first) DTSIM_CUDA_CHECK(cudaEventSynchronize(t0_.get()));
    host_t0_ = Clock::now();
    if (cupti_clock_) rec.cupti.t0_ns = cupti_now();

    std::exception_ptr error;
    std::mutex error_mu;
    std::vector<std::thread> threads;
    for (std::size_t s = 0; s < by_stream_.size(); ++s)
        if (!by_stream_[s].empty())
            threads.emplace_back([this, s, &rec, &error, &error_mu] {
                try {
                    stream_loop(static_cast<int>(s), rec);
                } catch (...) {
                    {
                        std::lock_guard lock(error_mu);
                        if (!error) error = std::current_exception();
                    }
                    {
                        std::lock_guard lock(mu_);
                        failed_ = true;
                    }
                    cv_.notify_all();
                }
            });
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    DTSIM_CUDA_CHECK(cudaDeviceSynchronize());

    for (std::size_t i = 0; i < n; ++i)
        if (!is_host_task(plan_.tasks[i]) && first)
            rec.event_timings[i] = {ns_between(t0_.get(), start_[i].get()), ns_between(t0_.get(), end_[i].get())};
    return rec;
}

void StepRunner::stream_loop(int stream, StepRecord& rec) {
    DTSIM_CUDA_CHECK(cudaSetDevice(device_));  // the device is per thread
    StreamWork& work = work_[static_cast<std::size_t>(stream)];
    for (int i : by_stream_[static_cast<std::size_t>(stream)]) {
        const auto idx = static_cast<std::size_t>(i);
        const sim::Task& t = plan_.tasks[idx];
        const bool host = is_host_task(t);
        for (auto d : plan_.deps_of(t)) {
            const auto didx = static_cast<std::size_t>(d);
            if (plan_.tasks[didx].stream == stream) continue;  // stream order covers it
            {
                std::unique_lock lock(mu_);
                cv_.wait(lock, [&] { return failed_ || issued_[didx] != 0; });
                if (failed_) return;
            }
            if (is_host_task(plan_.tasks[didx])) continue;  // it has ended
            if (host)
                DTSIM_CUDA_CHECK(cudaEventSynchronize(end_[didx].get()));
            else
                DTSIM_CUDA_CHECK(cudaStreamWaitEvent(work.stream(), end_[didx].get(), 0));
        }
        if (host) {
            // After this stream's earlier GPU work, as stream order demands.
            if (work.stream()) DTSIM_CUDA_CHECK(cudaStreamSynchronize(work.stream()));
            const auto start = Clock::now();
            if (cupti_clock_) rec.cupti.host_start_ns[idx] = cupti_now();
            work.run_host(t);
            if (cupti_clock_) rec.cupti.host_end_ns[idx] = cupti_now();
            const auto end = Clock::now();
            rec.event_timings[idx] = {std::chrono::duration_cast<std::chrono::nanoseconds>(start - host_t0_).count(),
                                      std::chrono::duration_cast<std::chrono::nanoseconds>(end - host_t0_).count()};
        } else {
            DTSIM_CUDA_CHECK(cudaEventRecord(start_[idx].get(), work.stream()));
            {
                TaskTag tag(i);
                rec.cupti.launched[idx] = work.enqueue(t, comms_.get(t.stream, t.group)) ? 1 : 0;
            }
            DTSIM_CUDA_CHECK(cudaEventRecord(end_[idx].get(), work.stream()));
        }
        {
            std::lock_guard lock(mu_);
            issued_[idx] = 1;
        }
        cv_.notify_all();
    }
}

}  // namespace dtsim::executor::cuda
