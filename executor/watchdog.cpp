// The watchdog: heartbeats are rounds of point-to-point messages (every rank to
// every other; MPI_Iallgather from a helper thread hung Open MPI 4.1) on a duplicate of the
// world, polled from one thread per rank, so every rank sees every other rank's
// progress without disturbing the streams' communicators. A rank whose process
// is stopped or dead never joins a round, which the others see as a stalled round.
#include "watchdog.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace dtsim::executor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kFields = 6;  // counter, step, task, running, task_ms, done
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kRoundInterval = std::chrono::milliseconds(200);

std::atomic<int> g_signal{0};
struct sigaction g_old_term {};
std::atomic<int> g_installed{0};

extern "C" void on_term(int sig) {
    g_signal.store(sig);
}

void install_handler() {
    if (g_installed.fetch_add(1) != 0) return;
    struct sigaction sa {};
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_old_term);
}

void restore_handler() {
    if (g_installed.fetch_sub(1) != 1) return;
    sigaction(SIGTERM, &g_old_term, nullptr);
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

int parse_int(std::string_view v, std::string_view key, std::string_view all) {
    int out = 0;
    bool ok = !v.empty();
    for (char c : v) {
        if (c < '0' || c > '9')
            ok = false;
        else
            out = out * 10 + (c - '0');
    }
    if (!ok) throw ConfigError(fmt::format("DTSIM_FAULT_INJECT='{}': {} must be a number, not '{}'.", all, key, v));
    return out;
}

}  // namespace

FaultInjection fault_injection_from_env() {
    FaultInjection f;
    const char* env = std::getenv("DTSIM_FAULT_INJECT");
    if (env == nullptr || *env == '\0') return f;
    const std::string_view all(env);
    std::string_view rest = all;
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos)
            throw ConfigError(fmt::format("DTSIM_FAULT_INJECT='{}': expected rank=R,step=S,kind=exit|kill|hang|stop|throw.", all));
        const auto key = item.substr(0, eq), value = item.substr(eq + 1);
        if (key == "rank")
            f.rank = parse_int(value, key, all);
        else if (key == "step")
            f.step = parse_int(value, key, all);
        else if (key == "kind") {
            if (value == "exit")
                f.kind = FaultInjection::Kind::exit;
            else if (value == "kill")
                f.kind = FaultInjection::Kind::kill;
            else if (value == "hang")
                f.kind = FaultInjection::Kind::hang;
            else if (value == "stop")
                f.kind = FaultInjection::Kind::stop;
            else if (value == "throw")
                f.kind = FaultInjection::Kind::throw_;
            else
                throw ConfigError(fmt::format(
                    "DTSIM_FAULT_INJECT='{}': kind must be exit, kill, hang, stop or throw, not '{}'.", all, value));
        } else
            throw ConfigError(fmt::format("DTSIM_FAULT_INJECT='{}': unknown key '{}'.", all, key));
    }
    if (f.kind == FaultInjection::Kind::none || f.rank < 0 || f.step < 0)
        throw ConfigError(fmt::format("DTSIM_FAULT_INJECT='{}': expected rank=R,step=S,kind=exit|kill|hang|stop|throw.", all));
    return f;
}

Watchdog::Watchdog(double timeout_s, int rank, int world, Hooks hooks)
    : timeout_s_(timeout_s), rank_(rank), world_(world), hooks_(std::move(hooks)) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    install_handler();
    thread_ = std::thread([this] { loop(); });
}

void Watchdog::finish() {
    {
        std::lock_guard lock(mu_);
        finishing_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    restore_handler();
    MPI_Comm_free(&comm_);
}

Watchdog::~Watchdog() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard lock(mu_);
        abandon_ = true;
    }
    cv_.notify_all();
    thread_.join();
    restore_handler();
}

void Watchdog::loop() {
    std::vector<std::int64_t> mine(kFields), all(kFields * static_cast<std::size_t>(world_)), last;
    // One round: this rank's record to every other rank and theirs from them
    // (MPI orders them per sender).
    std::vector<MPI_Request> reqs;
    reqs.reserve(2 * static_cast<std::size_t>(world_));
    bool in_round = false;
    auto now = Clock::now();
    auto last_change = now, next_round = now, round_started = now, last_at = now;
    std::int64_t last_local = -1, last_sum = -1;
    for (;;) {
        bool finishing = false;
        {
            std::unique_lock lock(mu_);
            if (abandon_) return;  // the request (if any) and the communicator leak: the process is failing
            finishing = finishing_;
        }
        now = Clock::now();
        if (const int sig = g_signal.load(); sig != 0) {
            fault(fmt::format("stopped by signal {} (mpirun stops every rank when one dies)", sig), last, !last.empty(),
                  seconds(now - last_at));
        }
        const RankProgress me = hooks_.progress();
        if (me.counter != last_local) {
            last_local = me.counter;
            last_change = now;
        }
        if (!in_round && (finishing || now >= next_round)) {
            mine = {me.counter,       me.step, me.task, me.running ? 1 : 0, static_cast<std::int64_t>(me.task_s * 1e3),
                    finishing ? 1 : 0};
            reqs.clear();
            std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(kFields) * rank_);
            for (int q = 0; q < world_; ++q) {
                if (q == rank_) continue;
                reqs.emplace_back();
                MPI_Irecv(all.data() + static_cast<std::ptrdiff_t>(kFields) * q, static_cast<int>(kFields), MPI_INT64_T,
                          q, 0, comm_, &reqs.back());
                reqs.emplace_back();
                MPI_Isend(mine.data(), static_cast<int>(kFields), MPI_INT64_T, q, 0, comm_, &reqs.back());
            }
            in_round = true;
            round_started = now;
        }
        if (in_round) {
            int done = 0;
            MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
            if (done != 0) {
                in_round = false;
                last = all;
                last_at = now;
                std::int64_t sum = 0;
                bool everyone_done = true;
                for (int q = 0; q < world_; ++q) {
                    sum += all[static_cast<std::size_t>(q) * kFields];
                    everyone_done = everyone_done && all[static_cast<std::size_t>(q) * kFields + 5] != 0;
                }
                if (everyone_done) return;
                if (sum != last_sum) {
                    last_sum = sum;
                    last_change = now;
                }
                next_round = now + kRoundInterval;
            }
        }
        if (seconds(now - last_change) >= timeout_s_) {
            std::string what = fmt::format("no progress on any rank for {:.1f} s", seconds(now - last_change));
            if (in_round && seconds(now - round_started) >= 1.0) {
                std::string missing;
                std::size_t k = 0;  // reqs: (receive, send) per other rank
                for (int q = 0; q < world_; ++q) {
                    if (q == rank_) continue;
                    int got = 0;
                    MPI_Test(&reqs[k], &got, MPI_STATUS_IGNORE);
                    if (got == 0) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", q);
                    k += 2;
                }
                if (!missing.empty())
                    what += fmt::format(" and no heartbeat from rank(s) {} for {:.1f} s (stopped or dead)", missing,
                                        seconds(now - round_started));
            }
            fault(what, last, !last.empty(), seconds(now - last_at));
        }
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, kPoll, [&] { return abandon_ || (finishing_ && !finishing); });
    }
}

void Watchdog::fault(const std::string& what, const std::vector<std::int64_t>& last, bool have_last,
                     double last_age_s) {
    const RankProgress me = hooks_.progress();
    std::string msg = fmt::format("dtsim: error: rank {}: {}", rank_, what);
    if (me.step >= 0) msg += fmt::format(" in step {}", me.step);
    const bool in_collective = me.task >= 0 && me.running && hooks_.is_collective(static_cast<int>(me.task));
    if (me.task >= 0) {
        const std::string name = hooks_.describe(static_cast<int>(me.task));
        if (in_collective)
            msg += fmt::format(" (waiting on task {}: {})", me.task, name);
        else if (me.running)
            msg += fmt::format(" (in task {}: {}, running for {:.1f} s)", me.task, name, me.task_s);
        else
            msg += fmt::format(" (waiting to start task {}: {})", me.task, name);
    }
    if (have_last) {
        std::vector<int> elsewhere;
        std::string where;
        for (int q = 0; q < world_; ++q) {
            if (q == rank_) continue;
            const auto* h = &last[static_cast<std::size_t>(q) * kFields];
            const bool same = h[1] == me.step && h[2] == me.task && (h[3] != 0) == me.running;
            if (same) continue;
            elsewhere.push_back(q);
            if (h[1] < 0)
                where += fmt::format("; rank {} had not started step 0", q);
            else
                where += fmt::format("; rank {} is in step {}", q, h[1]);
            if (h[2] >= 0) {
                const std::string name = hooks_.describe(static_cast<int>(h[2]));
                if (h[3] != 0)
                    where += fmt::format(", in task {}: {} for {:.1f} s", h[2], name, static_cast<double>(h[4]) * 1e-3);
                else
                    where += fmt::format(", waiting to start task {}: {}", h[2], name);
            }
        }
        if (in_collective && !elsewhere.empty()) {
            msg += "; rank(s)";
            for (std::size_t i = 0; i < elsewhere.size(); ++i)
                msg += fmt::format("{}{}", i == 0 ? " " : ", ", elsewhere[i]);
            msg += " did not reach it";
        }
        msg += where;
        if (!where.empty() && last_age_s >= 0.5)
            msg += fmt::format(" (as of the last heartbeat, {:.1f} s ago)", last_age_s);
    }
    std::fprintf(stderr, "%s\n", msg.c_str());
    if (rank_ == 0 && hooks_.on_fault) {
        const std::string note = hooks_.on_fault();
        if (!note.empty()) std::fprintf(stderr, "dtsim: rank 0: %s\n", note.c_str());
    }
    std::fflush(stderr);
    if (const int sig = g_signal.load(); sig != 0) {
        // mpirun is already stopping the job: die of its signal.
        std::signal(sig, SIG_DFL);
        std::raise(sig);
        std::_Exit(128 + sig);
    }
    // Give rank 0 (which detects the stall at about the same time) a moment to
    // keep the completed steps before this rank stops the job.
    if (rank_ != 0) std::this_thread::sleep_for(std::chrono::seconds(3));
    MPI_Abort(MPI_COMM_WORLD, 4);
    std::_Exit(4);
}

}  // namespace dtsim::executor
