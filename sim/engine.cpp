#include "dtsim/sim/engine.hpp"

#include "dtsim/common/error.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dtsim::sim {
namespace {

struct Running {
    std::int32_t task;
    TaskKind kind;
    double remaining_ns;  // standalone work left
    double rate;          // work ns per wall ns
};

class Engine {
public:
    Engine(const Plan& plan, const std::vector<std::int64_t>& duration, const calib::OverlapSpec& overlap)
        : plan_(plan), duration_(duration), overlap_(overlap) {
        const std::size_t n = plan.tasks.size();
        DTSIM_ASSERT(duration.size() == n, "one duration per task");
        schedule_.timings.assign(n, {});
        pending_deps_.resize(n);
        // Successor lists in CSR form, and per-stream queues in issue order.
        std::vector<std::uint32_t> count(n + 1, 0);
        for (std::size_t i = 0; i < n; ++i) {
            pending_deps_[i] = static_cast<std::int32_t>(plan.tasks[i].dep_count);
            for (auto d : plan.deps_of(plan.tasks[i])) ++count[static_cast<std::size_t>(d) + 1];
        }
        std::partial_sum(count.begin(), count.end(), count.begin());
        succ_begin_ = count;
        succ_.resize(plan.deps.size());
        std::vector<std::uint32_t> fill(count.begin(), count.end() - 1);
        for (std::size_t i = 0; i < n; ++i)
            for (auto d : plan.deps_of(plan.tasks[i]))
                succ_[fill[static_cast<std::size_t>(d)]++] = static_cast<std::int32_t>(i);
        queue_.resize(plan.streams.size());
        std::vector<std::size_t> per_stream(plan.streams.size(), 0);
        for (const auto& t : plan.tasks) ++per_stream[static_cast<std::size_t>(t.stream)];
        for (std::size_t s = 0; s < queue_.size(); ++s) queue_[s].reserve(per_stream[s]);
        for (std::size_t i = 0; i < n; ++i)
            queue_[static_cast<std::size_t>(plan.tasks[i].stream)].push_back(static_cast<std::int32_t>(i));
        schedule_.memory.reserve(n);
        head_.assign(plan.streams.size(), 0);
        busy_.assign(plan.streams.size(), 0);
        current_ = plan.resident;
        for (int c = 0; c < kMemCategories; ++c)
            (is_host(static_cast<MemCategory>(c)) ? host_total_ : device_total_) +=
                current_[static_cast<std::size_t>(c)];
    }

    Schedule run() {
        record_memory();
        for (std::size_t s = 0; s < queue_.size(); ++s) try_start_stream(s);
        std::size_t done = 0;
        while (!running_.empty()) {
            if (rates_stale_) update_rates();
            // Next completion; ties go to the lowest task id (determinism).
            std::size_t next = 0;
            double best = finish_after(running_[0]);
            for (std::size_t i = 1; i < running_.size(); ++i) {
                double f = finish_after(running_[i]);
                if (f < best || (f == best && running_[i].task < running_[next].task)) {
                    best = f;
                    next = i;
                }
            }
            const auto dt = static_cast<std::int64_t>(std::ceil(best - 1e-9));
            now_ += std::max<std::int64_t>(dt, 0);
            for (auto& r : running_) r.remaining_ns -= r.rate * static_cast<double>(dt);
            // Finish every task that is done by now (the chosen one and any tie).
            running_[next].remaining_ns = 0;
            finished.clear();
            for (const auto& r : running_)
                if (r.remaining_ns <= 0.5) finished.push_back(r.task);
            std::erase_if(running_, [](const Running& r) { return r.remaining_ns <= 0.5; });
            if (finished.size() > 1) std::sort(finished.begin(), finished.end());
            for (auto t : finished) finish(t);
            done += finished.size();
            for (auto t : finished) {
                try_start_stream(static_cast<std::size_t>(plan_.tasks[static_cast<std::size_t>(t)].stream));
                for (auto k = succ_begin_[static_cast<std::size_t>(t)];
                     k < succ_begin_[static_cast<std::size_t>(t) + 1]; ++k)
                    try_start_stream(static_cast<std::size_t>(plan_.tasks[static_cast<std::size_t>(succ_[k])].stream));
            }
            rates_stale_ = true;
        }
        DTSIM_ASSERT(done == plan_.tasks.size(),
                     "plan deadlocked: a task waits on a task queued behind it on the same stream");
        schedule_.makespan_ns = now_;
        return std::move(schedule_);
    }

private:
    static double finish_after(const Running& r) { return r.remaining_ns / r.rate; }

    void try_start_stream(std::size_t s) {
        if (busy_[s] || head_[s] >= queue_[s].size()) return;
        const std::int32_t t = queue_[s][head_[s]];
        if (pending_deps_[static_cast<std::size_t>(t)] > 0) return;
        busy_[s] = 1;
        ++head_[s];
        start(t);
    }

    void start(std::int32_t t) {
        const Task& task = plan_.tasks[static_cast<std::size_t>(t)];
        schedule_.timings[static_cast<std::size_t>(t)].start_ns = now_;
        bool changed = false;
        for (const auto& m : plan_.memory_of(task))
            if (m.bytes > 0) {
                current_[static_cast<std::size_t>(m.category)] += m.bytes;
                (is_host(m.category) ? host_total_ : device_total_) += m.bytes;
                changed = true;
            }
        if (changed) record_memory();
        running_.push_back({t, task.kind, static_cast<double>(duration_[static_cast<std::size_t>(t)]), 1.0});
        rates_stale_ = true;
    }

    void finish(std::int32_t t) {
        const Task& task = plan_.tasks[static_cast<std::size_t>(t)];
        schedule_.timings[static_cast<std::size_t>(t)].end_ns = now_;
        busy_[static_cast<std::size_t>(task.stream)] = 0;
        bool changed = false;
        for (const auto& m : plan_.memory_of(task))
            if (m.bytes < 0) {
                current_[static_cast<std::size_t>(m.category)] += m.bytes;
                (is_host(m.category) ? host_total_ : device_total_) += m.bytes;
                DTSIM_ASSERT(current_[static_cast<std::size_t>(m.category)] >= 0, "memory went negative");
                changed = true;
            }
        if (changed) record_memory();
        for (auto k = succ_begin_[static_cast<std::size_t>(t)]; k < succ_begin_[static_cast<std::size_t>(t) + 1]; ++k)
            --pending_deps_[static_cast<std::size_t>(succ_[k])];
    }

    // Compute slows while a collective runs (NCCL kernels take SMs) or host
    // work runs (on the CPU backend it takes the core); both slow while
    // compute runs; concurrent collectives share the link.
    void update_rates() {
        rates_stale_ = false;
        int comm = 0;
        bool compute = false, host = false;
        for (const auto& r : running_) {
            comm += r.kind == TaskKind::collective;
            compute = compute || r.kind == TaskKind::compute;
            host = host || (r.kind != TaskKind::compute && r.kind != TaskKind::collective);
        }
        const double compute_slowdown = std::max(comm > 0 ? overlap_.compute_slowdown_under_comm : 1.0,
                                                 host ? overlap_.compute_slowdown_under_host : 1.0);
        const double compute_rate = 1.0 / compute_slowdown;
        const double comm_rate = comm > 0 ? 1.0 / (comm * (compute ? overlap_.comm_slowdown_under_compute : 1.0)) : 1.0;
        const double host_rate = compute ? 1.0 / overlap_.host_slowdown_under_compute : 1.0;
        for (auto& r : running_)
            r.rate = r.kind == TaskKind::compute      ? compute_rate
                     : r.kind == TaskKind::collective ? comm_rate
                                                      : host_rate;
    }

    void record_memory() {
        const std::int64_t total = device_total_, host = host_total_;
        if (!schedule_.memory.empty() && schedule_.memory.back().time_ns == now_)
            schedule_.memory.back() = {now_, total, host};
        else
            schedule_.memory.push_back({now_, total, host});
        schedule_.peak_host_bytes = std::max(schedule_.peak_host_bytes, host);
        if (total > schedule_.peak_memory_bytes) {
            schedule_.peak_memory_bytes = total;
            schedule_.peak_breakdown = current_;
        }
    }

    const Plan& plan_;
    const std::vector<std::int64_t>& duration_;
    calib::OverlapSpec overlap_;
    Schedule schedule_;
    std::vector<std::int32_t> pending_deps_;
    std::vector<std::uint32_t> succ_begin_;
    std::vector<std::int32_t> succ_;
    std::vector<std::vector<std::int32_t>> queue_;
    std::vector<std::size_t> head_;
    std::vector<char> busy_;
    std::vector<Running> running_;
    std::vector<std::int32_t> finished;  // reused each event
    bool rates_stale_ = false;
    std::int64_t device_total_ = 0, host_total_ = 0;
    MemoryBreakdown current_{};
    std::int64_t now_ = 0;
};

}  // namespace

Schedule run_engine(const Plan& plan, const std::vector<std::int64_t>& duration_ns, const calib::OverlapSpec& overlap) {
    return Engine(plan, duration_ns, overlap).run();
}

}  // namespace dtsim::sim
