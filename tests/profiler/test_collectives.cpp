// MPI collective benchmarks (nccl-tests style): the per-collective table
// (bytes and busbw factors), the nccl-tests text table, a 1-rank sweep run
// without mpirun, and hidden [mpi2] cases that tests/mpi/catch_2ranks.sh with [mpi2]
// runs on 2 ranks.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/mpi_init.hpp"

#include "../../profiler/collectives/collective_table.hpp"
#include "../../profiler/cpu/compute_probe.hpp"

#include <mpi.h>
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace dtsim::profiler;
using dtsim::calib::CollectiveKind;

namespace {

using dtsim::profiler::ensure_mpi;

RepeatPolicy quick_policy() {
    RepeatPolicy p;
    p.warmup = 1;
    p.min_samples = 3;
    p.max_samples = 20;
    p.budget_s = 0.005;
    return p;
}

const std::vector<CollectiveKind> kAllKinds = {CollectiveKind::allreduce, CollectiveKind::reduce_scatter,
                                               CollectiveKind::allgather, CollectiveKind::broadcast,
                                               CollectiveKind::reduce};

struct ParsedRow {
    long long size = 0, count = 0;
    std::string type, redop;
    int root = 0;
    double time_us = 0, algbw = 0, busbw = 0;
    long long wrong = -1;
};

// The data rows (lines not starting with '#') of an nccl-tests table.
std::vector<ParsedRow> parse_rows(const std::string& text) {
    std::vector<ParsedRow> rows;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream fields(line);
        ParsedRow r;
        fields >> r.size >> r.count >> r.type >> r.redop >> r.root >> r.time_us >> r.algbw >> r.busbw >> r.wrong;
        REQUIRE_FALSE(fields.fail());
        rows.push_back(r);
    }
    return rows;
}

}  // namespace

TEST_CASE("collective tables follow nccl-tests' bytes and busbw rules", "[collectives]") {
    using namespace dtsim::profiler::collectives;
    for (const int n : {2, 4, 8}) {
        CAPTURE(n);
        const double nd = n;
        // nccl-tests doc/PERFORMANCE.md: AllReduce 2(n-1)/n; ReduceScatter and AllGather (n-1)/n; Broadcast 1.
        CHECK(allreduce_table().busbw_factor(n) == Approx(2.0 * (nd - 1) / nd));
        CHECK(reduce_scatter_table().busbw_factor(n) == Approx((nd - 1) / nd));
        CHECK(allgather_table().busbw_factor(n) == Approx((nd - 1) / nd));
        CHECK(broadcast_table().busbw_factor(n) == Approx(1.0));
        CHECK(reduce_table().busbw_factor(n) == Approx(1.0));

        // S = count * 4 for allreduce/broadcast; S = count_per_rank * n * 4 for reduce_scatter/allgather.
        const std::int64_t target = 1 << 20;
        CHECK(allreduce_table().count_for_bytes(target, n) == target / 4);
        CHECK(allreduce_table().total_bytes(1000, n) == 4000);
        CHECK(broadcast_table().total_bytes(1000, n) == 4000);
        for (const CollectiveTable* t : {&reduce_scatter_table(), &allgather_table()}) {
            CHECK(t->count_for_bytes(target, n) == target / (4 * n));
            CHECK(t->total_bytes(t->count_for_bytes(target, n), n) == target);
            CHECK(t->total_bytes(1000, n) == 1000LL * n * 4);
        }
    }
    for (const CollectiveKind k : kAllKinds) CHECK(table_for(k).kind == k);
}

TEST_CASE("format_nccl_tests_table writes nccl-tests' columns that parse back", "[collectives]") {
    std::vector<CollectiveRow> rows;
    for (const auto& [size, us, wrong] : std::vector<std::tuple<std::int64_t, double, std::int64_t>>{
             {1024, 12.345, 0}, {1 << 20, 456.7, 0}, {64 << 20, 23456.0, 3}}) {
        CollectiveRow r{};
        r.kind = CollectiveKind::allreduce;
        r.size_bytes = size;
        r.count = size / 4;
        r.time.mean_us = us;  // the time column: the figure the curves are fitted to
        r.time.median_us = 0.5 * us;
        r.algbw_gbps = static_cast<double>(size) / 1e3 / us;
        r.busbw_gbps = r.algbw_gbps * 1.5;
        r.wrong = wrong;
        rows.push_back(r);
    }
    const std::string text = format_nccl_tests_table(rows, 4);
    INFO(text);
    CHECK(text.rfind("# Collective test starting: all_reduce_perf", 0) == 0);
    CHECK(text.find("# nThread 1 nGpus 1") != std::string::npos);
    CHECK(text.find("nranks 4") != std::string::npos);
    for (const char* column : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "(B)",
                               "(elements)", "(us)", "(GB/s)"}) {
        CHECK(text.find(column) != std::string::npos);
    }
    CHECK(text.find("# Out of bounds values : 3 FAILED") != std::string::npos);
    CHECK(text.find("# Avg bus bandwidth") != std::string::npos);

    const std::vector<ParsedRow> parsed = parse_rows(text);
    REQUIRE(parsed.size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        CAPTURE(i);
        CHECK(parsed[i].size == rows[i].size_bytes);
        CHECK(parsed[i].count == rows[i].count);
        CHECK(parsed[i].type == "float");
        CHECK(parsed[i].redop == "sum");
        CHECK(parsed[i].root == -1);
        CHECK(parsed[i].time_us == Approx(rows[i].time.mean_us).epsilon(0.01));
        CHECK(parsed[i].algbw == Approx(rows[i].algbw_gbps).margin(0.005));
        CHECK(parsed[i].busbw == Approx(rows[i].busbw_gbps).margin(0.005));
        CHECK(parsed[i].wrong == rows[i].wrong);
    }
}

TEST_CASE("a 1-rank sweep measures and checks every collective at every size", "[collectives]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 1);
    CollectiveSweep sweep;
    sweep.kinds = kAllKinds;
    sweep.min_bytes = 1024;
    sweep.max_bytes = 64 * 1024;
    int progress_calls = 0;
    double last_fraction = -1;
    const auto rows = bench_mpi_collectives(sweep, quick_policy(), [&](std::string_view, double fraction) {
        CHECK(fraction >= last_fraction);
        last_fraction = fraction;
        ++progress_calls;
    });
    CHECK(last_fraction == 1.0);
    CHECK(progress_calls == static_cast<int>(kAllKinds.size() * 7 + 1));
    REQUIRE(rows.size() == kAllKinds.size() * 7);  // 1, 2, 4, ..., 64 KiB
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const CollectiveRow& r = rows[i];
        CAPTURE(i, dtsim::calib::to_string(r.kind));
        CHECK(r.kind == kAllKinds[i / 7]);
        CHECK(r.size_bytes == (1024LL << (i % 7)));
        CHECK(r.count == r.size_bytes / 4);
        CHECK(r.wrong == 0);
        CHECK(r.time.median_us > 0);
        CHECK(r.time.samples >= 3);
        CHECK(r.algbw_gbps > 0);
        CHECK(r.busbw_gbps >= 0);  // (n-1)/n factors are 0 on one rank
    }
    const auto parsed = parse_rows(format_nccl_tests_table(rows, 1));
    CHECK(parsed.size() == rows.size());
}

TEST_CASE("a bad sweep is a ConfigError", "[collectives]") {
    ensure_mpi();
    CollectiveSweep sweep;
    sweep.kinds = {CollectiveKind::allreduce};
    sweep.factor = 1;
    CHECK_THROWS_AS(bench_mpi_collectives(sweep, quick_policy(), {}), dtsim::ConfigError);
}

TEST_CASE("overlap factors on one rank are at least 1", "[collectives]") {
    ensure_mpi();
    const auto spec = bench_overlap(true, quick_policy());
    CHECK(spec.compute_slowdown_under_comm >= 1.0);
    CHECK(spec.comm_slowdown_under_compute >= 1.0);
    // Measured, not a fallback: finite, and compute capped where it all but stopped.
    CHECK(spec.compute_slowdown_under_comm <= ComputeProbe::kMaxSlowdown);
    CHECK(std::isfinite(spec.comm_slowdown_under_compute));
}

// ---- 2 ranks: run by tests/mpi/catch_2ranks.sh with [mpi2] under mpirun -np 2 ----

TEST_CASE("2 ranks: every collective is correct and identical on all ranks", "[.mpi2]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    CollectiveSweep sweep;
    sweep.kinds = kAllKinds;
    sweep.min_bytes = 1024;
    sweep.max_bytes = 4 << 20;
    sweep.factor = 4;
    const auto rows = bench_mpi_collectives(sweep, quick_policy(), {});
    REQUIRE(rows.size() == kAllKinds.size() * 7);  // 1 KiB .. 4 MiB by 4
    for (const CollectiveRow& r : rows) {
        CAPTURE(dtsim::calib::to_string(r.kind), r.size_bytes);
        CHECK(r.wrong == 0);
        CHECK(r.time.median_us > 0);
        CHECK(r.busbw_gbps > 0);
        CHECK(dtsim::test::same_on_all_ranks(static_cast<double>(r.size_bytes)));
        CHECK(dtsim::test::same_on_all_ranks(static_cast<double>(r.count)));
        CHECK(dtsim::test::same_on_all_ranks(r.time.median_us));
        CHECK(dtsim::test::same_on_all_ranks(r.time.samples));
        CHECK(dtsim::test::same_on_all_ranks(r.algbw_gbps));
        CHECK(dtsim::test::same_on_all_ranks(r.busbw_gbps));
        CHECK(dtsim::test::same_on_all_ranks(static_cast<double>(r.wrong)));
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) WARN(format_nccl_tests_table(rows, 2));
}

TEST_CASE("2 ranks: overlap factors are at least 1 and the same on all ranks", "[.mpi2]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const auto spec = bench_overlap(true, quick_policy());
    CHECK(spec.compute_slowdown_under_comm >= 1.0);
    CHECK(spec.comm_slowdown_under_compute >= 1.0);
    // Measured, not a fallback: finite, and compute capped where it all but stopped.
    CHECK(spec.compute_slowdown_under_comm <= ComputeProbe::kMaxSlowdown);
    CHECK(std::isfinite(spec.comm_slowdown_under_compute));
    CHECK(dtsim::test::same_on_all_ranks(spec.compute_slowdown_under_comm));
    CHECK(dtsim::test::same_on_all_ranks(spec.comm_slowdown_under_compute));
}
