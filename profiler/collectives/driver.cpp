// The shared driver of the collective benchmarks: sweeps sizes, times every
// iteration as the slowest rank's, checks results and prints nccl-tests' table.
#include "collective_table.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"
#include "dtsim/runtime/huge_pages.hpp"
#include "dtsim/runtime/peer_wait.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace dtsim::profiler {
namespace collectives {

bool differs(float got, float expected) {
    const float tolerance = 1e-5f * std::max(1.0f, std::fabs(expected));
    return !(std::fabs(got - expected) <= tolerance);  // NaN counts as wrong
}

const CollectiveTable& table_for(calib::CollectiveKind kind, DType dtype) {
    if (dtype == DType::fp16 && kind == calib::CollectiveKind::allreduce) return allreduce_fp16_table();
    if (dtype != DType::fp32)
        throw ConfigError(fmt::format("the collective benchmarks measure {} in fp32 only, not {}",
                                      calib::to_string(kind), to_string(dtype)));
    switch (kind) {
        case calib::CollectiveKind::allreduce: return allreduce_table();
        case calib::CollectiveKind::reduce_scatter: return reduce_scatter_table();
        case calib::CollectiveKind::allgather: return allgather_table();
        case calib::CollectiveKind::broadcast: return broadcast_table();
        case calib::CollectiveKind::reduce: return reduce_table();
    }
    DTSIM_ASSERT(false, "unknown collective kind");
}

}  // namespace collectives

namespace {

using collectives::Buffers;
using collectives::CollectiveTable;

// Evicts the last-level cache: a pass over more memory than it holds. In
// training a collective follows compute that has streamed its own data, so its
// buffers and MPI's shared-memory segments start cold; back to back they stay
// hot and a shared-memory allreduce of a few MiB runs 2-3x faster.
class CacheFlush {
public:
    // The elementwise kernel over all of its scratch (half read, half written).
    void operator()() {
        if (scratch_.empty()) scratch_.assign(kFlushBytes / sizeof(float), 1.0f);
        runtime::memory_pass(kFlushBytes, scratch_);
    }

private:
    static constexpr std::int64_t kFlushBytes = 64LL << 20;
    runtime::Floats scratch_;
};

// Times `run` like measure() (without min_sample_us: one collective per
// sample, each from cold caches) but collectively: each sample is the slowest
// rank's time and the stop decision uses the slowest rank's clock, so every
// rank takes the same number of samples and gets the same Measurement. Each
// sample starts with cold caches (CacheFlush).
Measurement time_collective(const RepeatPolicy& policy, const CollectiveTable& table, Buffers& b, CacheFlush& flush,
                            runtime::Communicator& comm) {
    for (int i = 0; i < policy.warmup; ++i) {
        comm.barrier();
        table.run(b, comm);
    }
    std::vector<double> samples;
    const int max_samples = std::max(1, policy.max_samples);
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(samples.size()) < max_samples) {
        flush();
        comm.barrier();  // over the transport measured: an MPI barrier leaves gloo's threads asleep
        const auto t0 = std::chrono::steady_clock::now();
        runtime::wait_for_peers(MPI_COMM_WORLD);  // as the executor enters every collective (peer_wait.hpp)
        table.run(b, comm);
        double local[2] = {elapsed_us(t0), elapsed_us(start) * 1e-6};
        double slowest[2] = {0, 0};
        MPI_Allreduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        samples.push_back(slowest[0]);
        if (static_cast<int>(samples.size()) >= policy.min_samples && slowest[1] >= policy.budget_s) break;
    }
    return summarize(std::move(samples));
}

std::vector<std::int64_t> sweep_sizes(const CollectiveSweep& sweep) {
    if (sweep.min_bytes < 1 || sweep.max_bytes < sweep.min_bytes || sweep.factor < 2) {
        throw ConfigError("The collective sweep needs 1 <= min_bytes <= max_bytes and a factor of at least 2 (got " +
                          std::to_string(sweep.min_bytes) + ", " + std::to_string(sweep.max_bytes) + ", " +
                          std::to_string(sweep.factor) + ").");
    }
    std::vector<std::int64_t> sizes;
    for (std::int64_t s = sweep.min_bytes; s <= sweep.max_bytes; s *= sweep.factor) {
        sizes.push_back(s);
        if (s > sweep.max_bytes / sweep.factor) break;  // the next step would pass max_bytes (or overflow)
    }
    return sizes;
}

// nccl-tests' time column: fewer decimals as the time grows.
std::string format_time_us(double us) {
    char buf[32];
    if (us >= 10000.0) {
        std::snprintf(buf, sizeof buf, "%7.0f", us);
    } else if (us >= 100.0) {
        std::snprintf(buf, sizeof buf, "%7.1f", us);
    } else {
        std::snprintf(buf, sizeof buf, "%7.2f", us);
    }
    return buf;
}

void append_table(std::string& out, const CollectiveTable& table, const std::vector<const CollectiveRow*>& rows,
                  int nranks, std::string_view transport) {
    char buf[256];
    const std::int64_t min_bytes = rows.empty() ? 0 : rows.front()->size_bytes;
    const std::int64_t max_bytes = rows.empty() ? 0 : rows.back()->size_bytes;
    out += "# Collective test starting: " + std::string(table.name) + "_perf (dtsim, " + std::string(transport) +
           (table.dtype == DType::fp16 ? " fp16)\n" : " fp32)\n");
    std::snprintf(buf, sizeof buf,
                  "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld warmup iters: - iters: - agg iters: 1 "
                  "validation: 1 graph: 0 nranks %d\n",
                  static_cast<long long>(min_bytes), static_cast<long long>(max_bytes), nranks);
    out += buf;
    out += "#\n";
    std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s            %s\n", "", "", "", "", "",
                  table.in_place ? "in-place" : "out-of-place");
    out += buf;
    std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                  "redop", "root", "time", "algbw", "busbw", "#wrong");
    out += buf;
    std::snprintf(buf, sizeof buf, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
                  "(us)", "(GB/s)", "(GB/s)", "");
    out += buf;
    std::int64_t wrong = 0;
    double busbw_sum = 0;
    for (const CollectiveRow* row : rows) {
        std::snprintf(buf, sizeof buf, "%12lld  %12lld  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6lld\n",
                      static_cast<long long>(row->size_bytes), static_cast<long long>(row->count),
                      table.dtype == DType::fp16 ? "half" : "float",
                      std::string(table.redop).c_str(), table.root, format_time_us(row->time.mean_us).c_str(),
                      row->algbw_gbps, row->busbw_gbps, static_cast<long long>(row->wrong));
        out += buf;
        wrong += row->wrong;
        busbw_sum += row->busbw_gbps;
    }
    std::snprintf(buf, sizeof buf, "# Out of bounds values : %lld %s\n", static_cast<long long>(wrong),
                  wrong == 0 ? "OK" : "FAILED");
    out += buf;
    std::snprintf(buf, sizeof buf, "# Avg bus bandwidth    : %g \n",
                  rows.empty() ? 0.0 : busbw_sum / static_cast<double>(rows.size()));
    out += buf;
    out += "#\n";
}

}  // namespace

std::vector<CollectiveRow> rows_of_kind(std::span<const CollectiveRow> rows, calib::CollectiveKind kind,
                                        DType dtype) {
    std::vector<CollectiveRow> out;
    for (const auto& r : rows)
        if (r.kind == kind && r.dtype == dtype) out.push_back(r);
    return out;
}

std::vector<calib::CollectivePoint> points_of(std::span<const CollectiveRow> rows) {
    std::vector<calib::CollectivePoint> points;
    for (const auto& r : rows) points.push_back({r.size_bytes, r.time.mean_us, r.time.spread});
    return points;
}

std::vector<CollectiveRow> bench_collectives(const CollectiveSweep& sweep, const RepeatPolicy& policy,
                                             const ProgressFn& progress, runtime::Communicator& comm) {
    const std::vector<std::int64_t> sizes = sweep.only_extra_sizes ? std::vector<std::int64_t>{} : sweep_sizes(sweep);
    runtime::prepare_peer_wait(MPI_COMM_WORLD);  // its one-time set-up, out of the first timed sample
    Buffers b;
    CacheFlush flush;
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);

    std::vector<CollectiveRow> rows;
    // One entry per table measured: every kind in fp32, then allreduce in fp16 at allreduce's sizes.
    std::vector<std::pair<const CollectiveTable*, std::vector<std::int64_t>>> entries;
    std::size_t total = 0;
    for (const calib::CollectiveKind kind : sweep.kinds) {
        std::vector<std::int64_t> mine = sizes;
        for (const auto& [k, bytes] : sweep.extra_sizes)
            if (k == kind && bytes > 0) mine.push_back(bytes);
        std::sort(mine.begin(), mine.end());
        mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
        total += mine.size();
        entries.emplace_back(&collectives::table_for(kind), std::move(mine));
    }
    if (sweep.fp16_allreduce)
        for (std::size_t i = 0, n = entries.size(); i < n; ++i)
            if (entries[i].first->kind == calib::CollectiveKind::allreduce) {
                total += entries[i].second.size();
                entries.emplace_back(&collectives::table_for(calib::CollectiveKind::allreduce, DType::fp16),
                                     entries[i].second);
            }
    const double steps = static_cast<double>(total);
    int step = 0;
    for (const auto& [entry_table, entry_sizes] : entries) {
        const CollectiveTable& table = *entry_table;
        std::int64_t last_bytes = -1;
        for (const std::int64_t target : entry_sizes) {
            b.count = table.count_for_bytes(target, b.nranks);
            const std::int64_t bytes = table.total_bytes(b.count, b.nranks);
            if (bytes == last_bytes) continue;  // two requests rounding to one count
            last_bytes = bytes;
            if (progress) {
                progress(fmt::format("{}{} {} B", table.name, table.dtype == DType::fp32 ? "" : " (half)", bytes),
                         step / steps);
            }
            ++step;

            // Fresh buffers for every size, as a run allocates its own.
            b.send = {};
            b.recv = {};
            // One checked run on fresh data, then the timed runs.
            table.init(b);
            table.run(b, comm);
            long long local_wrong = table.check(b);
            long long wrong = 0;
            MPI_Allreduce(&local_wrong, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

            CollectiveRow row{};
            row.kind = table.kind;
            row.dtype = table.dtype;
            row.size_bytes = bytes;
            row.count = bytes / dtype_bytes(table.dtype);  // nccl-tests' count column: elements in S
            row.time = time_collective(policy, table, b, flush, comm);
            row.wrong = wrong;
            const double seconds = row.time.mean_us * 1e-6;
            row.algbw_gbps = seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0;
            row.busbw_gbps = row.algbw_gbps * table.busbw_factor(b.nranks);
            rows.push_back(row);
        }
    }
    if (progress) progress("collectives", 1.0);
    return rows;
}

std::string format_nccl_tests_table(const std::vector<CollectiveRow>& rows, int nranks, std::string_view transport) {
    // One table per run of rows of the same collective (normally there is one).
    std::string out;
    std::vector<const CollectiveRow*> group;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        group.push_back(&rows[i]);
        if (i + 1 == rows.size() || rows[i + 1].kind != rows[i].kind || rows[i + 1].dtype != rows[i].dtype) {
            append_table(out, collectives::table_for(rows[i].kind, rows[i].dtype), group, nranks, transport);
            group.clear();
        }
    }
    if (rows.empty()) append_table(out, collectives::allreduce_table(), group, nranks, transport);
    return out;
}

}  // namespace dtsim::profiler
