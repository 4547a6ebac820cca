#include "dtsim/sim/engine.hpp"

#include "dtsim/common/error.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <numbers>
#include <numeric>

namespace dtsim::sim {
namespace {

struct Running {
    std::int32_t task;
    TaskKind kind;
    double remaining_ns;  // standalone work left
    double rate;          // work ns per wall ns
    // A collective's latency part still to run (within remaining_ns): it is
    // not shared with the other collectives (CollectiveLanes).
    double latency_ns = 0;
    // Wall time the collective still waits for its group's slowest rank
    // (Stragglers), before any of its work: meanwhile it holds its lane but
    // neither takes the link nor slows compute.
    double wait_ns = 0;
};

class Engine {
public:
    Engine(const Plan& plan, const std::vector<std::int64_t>& duration, const calib::OverlapSpec& overlap,
           const CollectiveLanes& lanes, const Stragglers& stragglers)
        : plan_(plan), duration_(duration), overlap_(overlap), lanes_(lanes), stragglers_(stragglers) {
        const std::size_t n = plan.tasks.size();
        DTSIM_ASSERT(duration.size() == n, "one duration per task");
        DTSIM_ASSERT(lanes.lanes >= 1, "a collective stream runs at least one collective at a time");
        DTSIM_ASSERT(lanes.latency_ns.empty() || lanes.latency_ns.size() == n, "one latency per task, or none");
        DTSIM_ASSERT(stragglers.factor.empty() || stragglers.factor.size() == n,
                     "one straggler factor per task, or none");
        if (!stragglers.factor.empty()) {
            ready_ns_.assign(n, 0);
            schedule_.straggler_wait_ns.assign(n, 0);
        }
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
        capacity_.assign(plan.streams.size(), 1);
        for (std::size_t s = 0; s < plan.streams.size(); ++s)
            if (plan.streams[s].kind == TaskKind::collective) capacity_[s] = static_cast<char>(lanes.lanes);
        current_ = plan.resident;
        for (int c = 0; c < kMemCategories; ++c)
            (is_host(static_cast<MemCategory>(c)) ? host_total_ : device_total_) +=
                current_[static_cast<std::size_t>(c)];
    }

    // Without latency parts or stragglers (every plan but those of CPU ranks)
    // the event loop skips their bookkeeping: it is the simulator's hot path.
    Schedule run() {
        return lanes_.latency_ns.empty() && stragglers_.factor.empty() ? run_events<false>() : run_events<true>();
    }

private:
    template <bool kExtras>
    Schedule run_events() {
        record_memory();
        for (std::size_t s = 0; s < queue_.size(); ++s) try_start_stream(s);
        std::size_t done = 0;
        while (!running_.empty()) {
            if (rates_stale_) update_rates<kExtras>();
            // Next completion; ties go to the lowest task id (determinism).
            std::size_t next = 0;
            double best = finish_after<kExtras>(running_[0]);
            for (std::size_t i = 1; i < running_.size(); ++i) {
                double f = finish_after<kExtras>(running_[i]);
                if (f < best || (f == best && running_[i].task < running_[next].task)) {
                    best = f;
                    next = i;
                }
            }
            // The event may be the end of a collective's wait for its slowest
            // rank, or of its latency part, rather than of a task: from then
            // on it runs, or shares the link.
            const bool wait_ends = kExtras && running_[next].wait_ns > 0;
            const bool latency_ends = kExtras && !wait_ends && running_[next].latency_ns > 0 &&
                                      running_[next].latency_ns < running_[next].remaining_ns;
            const auto dt = static_cast<std::int64_t>(std::ceil(best - 1e-9));
            now_ += std::max<std::int64_t>(dt, 0);
            for (auto& r : running_) {
                if constexpr (kExtras)
                    if (r.wait_ns > 0) {
                        r.wait_ns = std::max(0.0, r.wait_ns - static_cast<double>(dt));
                        continue;
                    }
                r.remaining_ns -= r.rate * static_cast<double>(dt);
                if constexpr (kExtras)
                    if (r.latency_ns > 0) r.latency_ns = std::max(0.0, r.latency_ns - r.rate * static_cast<double>(dt));
            }
            if (wait_ends) {
                for (auto& r : running_)
                    if (r.wait_ns <= 0.5) r.wait_ns = 0;
                rates_stale_ = true;
                continue;
            }
            if (latency_ends) {
                running_[next].latency_ns = 0;
                for (auto& r : running_)
                    if (r.latency_ns <= 0.5) r.latency_ns = 0;
                rates_stale_ = true;
                continue;
            }
            // Finish every task that is done by now (the chosen one and any tie).
            running_[next].remaining_ns = 0;
            finished.clear();
            const auto done_now = [](const Running& r) {
                return r.remaining_ns <= 0.5 && (!kExtras || r.wait_ns <= 0);
            };
            for (const auto& r : running_)
                if (done_now(r)) finished.push_back(r.task);
            std::erase_if(running_, done_now);
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

    // Wall time to the task's next event: the end of its wait or latency part, or its end.
    template <bool kExtras>
    static double finish_after(const Running& r) {
        if constexpr (kExtras) {
            if (r.wait_ns > 0) return r.wait_ns;  // wall time
            return (r.latency_ns > 0 ? std::min(r.latency_ns, r.remaining_ns) : r.remaining_ns) / r.rate;
        }
        return r.remaining_ns / r.rate;
    }

    // Starts the stream's head task, and the next one too where the stream has
    // a free lane, each once its dependencies have ended (issue order kept).
    void try_start_stream(std::size_t s) {
        if (!try_start_head(s)) return;  // the common case, kept inline
        while (try_start_head(s)) {      // a second lane
        }
    }

    // Starts the stream's head task if a lane is free and its dependencies have ended.
    [[gnu::always_inline]] bool try_start_head(std::size_t s) {
        if (busy_[s] >= capacity_[s] || head_[s] >= queue_[s].size()) return false;
        const std::int32_t t = queue_[s][head_[s]];
        if (pending_deps_[static_cast<std::size_t>(t)] > 0) return false;
        ++busy_[s];
        ++head_[s];
        start(t);
        return true;
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
        const double latency =
            lanes_.latency_ns.empty() ? 0.0 : static_cast<double>(lanes_.latency_ns[static_cast<std::size_t>(t)]);
        const double wait = straggler_wait(t);
        if (wait > 0) schedule_.straggler_wait_ns[static_cast<std::size_t>(t)] = static_cast<std::int64_t>(wait);
        running_.push_back(
            {t, task.kind, static_cast<double>(duration_[static_cast<std::size_t>(t)]), 1.0, latency, wait});
        rates_stale_ = true;
    }

    // How long collective t waits, from now, for its group's slowest rank.
    double straggler_wait(std::int32_t t) const {
        if (stragglers_.factor.empty()) return 0;
        const auto i = static_cast<std::size_t>(t);
        const double apart = static_cast<double>(std::max<std::int64_t>(0, ready_ns_[i] - sync_ns_));
        const double slowest = static_cast<double>(sync_ns_) + stragglers_.factor[i] * apart;
        return std::max(0.0, std::floor(slowest - static_cast<double>(now_)));
    }

    void finish(std::int32_t t) {
        const Task& task = plan_.tasks[static_cast<std::size_t>(t)];
        schedule_.timings[static_cast<std::size_t>(t)].end_ns = now_;
        --busy_[static_cast<std::size_t>(task.stream)];
        bool changed = false;
        for (const auto& m : plan_.memory_of(task))
            if (m.bytes < 0) {
                current_[static_cast<std::size_t>(m.category)] += m.bytes;
                (is_host(m.category) ? host_total_ : device_total_) += m.bytes;
                DTSIM_ASSERT(current_[static_cast<std::size_t>(m.category)] >= 0, "memory went negative");
                changed = true;
            }
        if (changed) record_memory();
        const bool track = !ready_ns_.empty();
        for (auto k = succ_begin_[static_cast<std::size_t>(t)]; k < succ_begin_[static_cast<std::size_t>(t) + 1]; ++k)
            if (--pending_deps_[static_cast<std::size_t>(succ_[k])] == 0 && track) became_ready(t, succ_[k]);
    }

    // Task u's last dependency, t, has ended. Where t is a collective and u the
    // compute stream's next task, idle until now, or another collective, issued
    // once t returned (a synchronous call), the rank waited for the collective:
    // its group's ranks have met (Stragglers).
    void became_ready(std::int32_t t, std::int32_t u) {
        ready_ns_[static_cast<std::size_t>(u)] = now_;
        if (plan_.tasks[static_cast<std::size_t>(t)].kind != TaskKind::collective) return;
        const Task& task = plan_.tasks[static_cast<std::size_t>(u)];
        const auto s = static_cast<std::size_t>(task.stream);
        if (task.kind == TaskKind::collective || (task.kind == TaskKind::compute && busy_[s] == 0 &&
                                                  head_[s] < queue_[s].size() && queue_[s][head_[s]] == u))
            sync_ns_ = now_;
    }

    // Compute slows while a collective runs (NCCL kernels take SMs) or host
    // work runs (on the CPU backend it takes the core); both slow while
    // compute runs; concurrent collectives share the link.
    template <bool kExtras>
    void update_rates() {
        rates_stale_ = false;
        int comm = 0, sharing = 0;
        bool compute = false, host = false;
        for (const auto& r : running_) {
            if (kExtras && r.wait_ns > 0) continue;  // waiting for a slower rank: idle
            comm += r.kind == TaskKind::collective;
            if constexpr (kExtras) sharing += r.kind == TaskKind::collective && r.latency_ns <= 0;
            compute = compute || r.kind == TaskKind::compute;
            host = host || (r.kind != TaskKind::compute && r.kind != TaskKind::collective);
        }
        const double compute_slowdown = std::max(comm > 0 ? overlap_.compute_slowdown_under_comm : 1.0,
                                                 host ? overlap_.compute_slowdown_under_host : 1.0);
        const double compute_rate = 1.0 / compute_slowdown;
        const double comm_alone_rate = 1.0 / (compute ? overlap_.comm_slowdown_under_compute : 1.0);
        // Collectives past their latency part share the link; one still in it
        // runs at its own pace.
        const double comm_rate = comm_alone_rate / std::max(1, kExtras ? sharing : comm);
        const double host_rate = compute ? 1.0 / overlap_.host_slowdown_under_compute : 1.0;
        for (auto& r : running_)
            r.rate = r.kind == TaskKind::compute      ? compute_rate
                     : r.kind == TaskKind::collective ? (kExtras && r.latency_ns > 0 ? comm_alone_rate : comm_rate)
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
    const CollectiveLanes& lanes_;
    const Stragglers& stragglers_;
    std::vector<std::int64_t> ready_ns_;  // when each task's dependencies had ended (with stragglers only)
    std::int64_t sync_ns_ = 0;            // when the rank last waited on a collective
    Schedule schedule_;
    std::vector<std::int32_t> pending_deps_;
    std::vector<std::uint32_t> succ_begin_;
    std::vector<std::int32_t> succ_;
    std::vector<std::vector<std::int32_t>> queue_;
    std::vector<std::size_t> head_;
    std::vector<char> busy_;      // tasks running on each stream
    std::vector<char> capacity_;  // at most this many at once
    std::vector<Running> running_;
    std::vector<std::int32_t> finished;  // reused each event
    bool rates_stale_ = false;
    std::int64_t device_total_ = 0, host_total_ = 0;
    MemoryBreakdown current_{};
    std::int64_t now_ = 0;
};

// E[max of n independent standard normal samples]: the integral of
// x n phi(x) Phi(x)^(n-1) over x, by the midpoint rule on [-10, 10] (the
// tails beyond add nothing a double keeps).
double integrate_max_normal(int n) {
    constexpr int kSteps = 4000;
    constexpr double kLow = -10, kHigh = 10, kStep = (kHigh - kLow) / kSteps;
    double sum = 0;
    for (int i = 0; i < kSteps; ++i) {
        const double x = kLow + (i + 0.5) * kStep;
        const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
        const double cdf = 0.5 * std::erfc(-x / std::numbers::sqrt2);
        sum += x * n * pdf * std::pow(cdf, n - 1);
    }
    return sum * kStep;
}

// The same, each group size integrated once per process: 4,000 points cost
// about 1.4 M instructions, several times a small plan's whole simulation, and
// sweeps simulate the same group sizes thousands of times. Threads that race
// on an entry compute and store the same value.
double expected_max_normal(int n) {
    constexpr int kMemoized = 4096;
    static std::array<std::atomic<double>, kMemoized + 1> memo{};  // 0: not yet integrated
    if (n < 2 || n > kMemoized) return n < 2 ? 0.0 : integrate_max_normal(n);
    auto& entry = memo[static_cast<std::size_t>(n)];
    double v = entry.load(std::memory_order_relaxed);
    if (v == 0) {
        v = integrate_max_normal(n);
        entry.store(v, std::memory_order_relaxed);
    }
    return v;
}

}  // namespace

Schedule run_engine(const Plan& plan, const std::vector<std::int64_t>& duration_ns, const calib::OverlapSpec& overlap,
                    const CollectiveLanes& lanes, const Stragglers& stragglers) {
    return Engine(plan, duration_ns, overlap, lanes, stragglers).run();
}

double straggler_factor(double measured, int measured_ranks, int n) {
    if (measured_ranks < 2 || n < 2 || measured <= 1) return 1.0;
    return 1.0 + (measured - 1.0) * expected_max_normal(n) / expected_max_normal(measured_ranks);
}

Stragglers stragglers(const Plan& plan, const calib::OverlapSpec& overlap) {
    Stragglers out;
    if (overlap.straggler_ranks < 2 || overlap.straggler <= 1) return out;
    std::vector<double> by_group(plan.groups.size());
    bool any = false;
    for (std::size_t g = 0; g < plan.groups.size(); ++g) {
        by_group[g] = straggler_factor(overlap.straggler, overlap.straggler_ranks, plan.groups[g].size);
        any = any || by_group[g] > 1;
    }
    if (!any) return out;
    out.factor.assign(plan.tasks.size(), 1.0);
    for (std::size_t i = 0; i < plan.tasks.size(); ++i)
        if (plan.tasks[i].kind == TaskKind::collective && plan.tasks[i].group >= 0)
            out.factor[i] = by_group[static_cast<std::size_t>(plan.tasks[i].group)];
    return out;
}

}  // namespace dtsim::sim
