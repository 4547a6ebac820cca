// Collective benchmarks over MPI and gloo (nccl-tests style): the per-collective table
// (bytes and busbw factors), the nccl-tests text table, a 1-rank sweep run
// without mpirun, and hidden [mpi2] cases that tests/mpi/catch_2ranks.sh with [mpi2]
// runs on 2 ranks.
#include "dtsim/common/error.hpp"
#include "dtsim/common/half.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/mpi_init.hpp"
#include "dtsim/runtime/communicator.hpp"

#include "../../profiler/collectives/collective_table.hpp"
#include "../../profiler/cpu/compute_probe.hpp"

#include <mpi.h>
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
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
    const std::string text = format_nccl_tests_table(rows, 4, "mpi");
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
    const auto comm = dtsim::runtime::make_communicator(dtsim::runtime::CommBackend::mpi, MPI_COMM_WORLD);
    const auto rows = bench_collectives(
        sweep, quick_policy(),
        [&](std::string_view, double fraction) {
            CHECK(fraction >= last_fraction);
            last_fraction = fraction;
            ++progress_calls;
        },
        *comm);
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
    const auto parsed = parse_rows(format_nccl_tests_table(rows, 1, "mpi"));
    CHECK(parsed.size() == rows.size());
}

TEST_CASE("a bad sweep is a ConfigError", "[collectives]") {
    ensure_mpi();
    CollectiveSweep sweep;
    sweep.kinds = {CollectiveKind::allreduce};
    sweep.factor = 1;
    const auto comm = dtsim::runtime::make_communicator(dtsim::runtime::CommBackend::mpi, MPI_COMM_WORLD);
    CHECK_THROWS_AS(bench_collectives(sweep, quick_policy(), {}, *comm), dtsim::ConfigError);
}

TEST_CASE("overlap factors on one rank are at least 1", "[collectives]") {
    ensure_mpi();
    const auto comm = dtsim::runtime::make_communicator(dtsim::runtime::CommBackend::mpi, MPI_COMM_WORLD);
    const auto spec = bench_overlap(true, quick_policy(), *comm);
    CHECK(spec.compute_slowdown_under_comm >= 1.0);
    CHECK(spec.comm_slowdown_under_compute >= 1.0);
    // Measured, not a fallback: finite, and compute capped where it all but stopped.
    CHECK(spec.compute_slowdown_under_comm <= ComputeProbe::kMaxSlowdown);
    CHECK(std::isfinite(spec.comm_slowdown_under_compute));
}

// ---- 2 ranks: run by tests/mpi/catch_2ranks.sh with [mpi2] under mpirun -np 2 ----

TEST_CASE("2 ranks: every collective is correct and identical on all ranks, over MPI and over gloo", "[.mpi2]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const auto backend = GENERATE(dtsim::runtime::CommBackend::mpi, dtsim::runtime::CommBackend::gloo);
    CAPTURE(dtsim::runtime::to_string(backend));
    const auto comm = dtsim::runtime::make_communicator(backend, MPI_COMM_WORLD);
    REQUIRE(comm->backend() == backend);
    REQUIRE(comm->size() == 2);
    CollectiveSweep sweep;
    sweep.kinds = kAllKinds;
    sweep.min_bytes = 1024;
    sweep.max_bytes = 4 << 20;
    sweep.factor = 4;
    sweep.fp16_allreduce = true;
    const auto rows = bench_collectives(sweep, quick_policy(), {}, *comm);
    REQUIRE(rows.size() == (kAllKinds.size() + 1) * 7);  // 1 KiB .. 4 MiB by 4, and allreduce in fp16 too
    const auto half = rows_of_kind(rows, CollectiveKind::allreduce, dtsim::DType::fp16);
    REQUIRE(half.size() == 7);
    for (const CollectiveRow& r : half) CHECK(r.count == r.size_bytes / 2);
    CHECK(rows_of_kind(rows, CollectiveKind::allreduce).size() == 7);
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
    if (rank == 0) {
        const std::string table = format_nccl_tests_table(rows, 2, dtsim::runtime::to_string(backend));
        CHECK(table.find(fmt::format("(dtsim, {} fp32)", dtsim::runtime::to_string(backend))) != std::string::npos);
        const std::string half_table = format_nccl_tests_table(half, 2, dtsim::runtime::to_string(backend));
        CHECK(half_table.find(fmt::format("(dtsim, {} fp16)", dtsim::runtime::to_string(backend))) !=
              std::string::npos);
        CHECK(half_table.find(" half ") != std::string::npos);
        WARN(table);
    }
}

TEST_CASE("2 ranks: overlap factors are at least 1 and the same on all ranks, over MPI and over gloo", "[.mpi2]") {
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const auto backend = GENERATE(dtsim::runtime::CommBackend::mpi, dtsim::runtime::CommBackend::gloo);
    CAPTURE(dtsim::runtime::to_string(backend));
    const auto comm = dtsim::runtime::make_communicator(backend, MPI_COMM_WORLD);
    const auto spec = bench_overlap(true, quick_policy(), *comm);
    CHECK(spec.compute_slowdown_under_comm >= 1.0);
    CHECK(spec.comm_slowdown_under_compute >= 1.0);
    // Measured, not a fallback: finite, and compute capped where it all but stopped.
    CHECK(spec.compute_slowdown_under_comm <= ComputeProbe::kMaxSlowdown);
    CHECK(std::isfinite(spec.comm_slowdown_under_compute));
    CHECK(dtsim::test::same_on_all_ranks(spec.compute_slowdown_under_comm));
    CHECK(dtsim::test::same_on_all_ranks(spec.comm_slowdown_under_compute));
}

TEST_CASE("2 ranks: the communicators' out-of-place, root and half-precision forms give the exact results", "[.mpi2]") {
    using dtsim::runtime::CommBackend;
    using dtsim::runtime::HalfSum;
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const auto [backend, half_sum] = GENERATE(std::pair{CommBackend::mpi, HalfSum::c10},
                                              std::pair{CommBackend::gloo, HalfSum::c10},
                                              std::pair{CommBackend::gloo, HalfSum::gloo});
    CAPTURE(dtsim::runtime::to_string(backend), dtsim::runtime::to_string(half_sum));
    const auto comm = dtsim::runtime::make_communicator(backend, MPI_COMM_WORLD, half_sum);
    const int rank = comm->rank();
    constexpr std::int64_t n = 1000;

    // All-gather out of place: block r is rank r's input.
    std::vector<float> in(n), out(2 * n, -1.0f);
    for (std::int64_t i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = static_cast<float>(rank * 10000 + i);
    comm->allgather(in.data(), out.data(), n);
    for (std::int64_t i = 0; i < 2 * n; ++i)
        REQUIRE(out[static_cast<std::size_t>(i)] == static_cast<float>((i / n) * 10000 + i % n));

    // Reduce to root 1, out of place: the root's output holds the sum, its input is kept.
    std::vector<float> sum(n, -1.0f);
    const std::vector<float> kept = in;
    comm->reduce_sum(in.data(), sum.data(), n, 1);
    if (rank == 1)
        for (std::int64_t i = 0; i < n; ++i) REQUIRE(sum[static_cast<std::size_t>(i)] == static_cast<float>(10000 + 2 * i));
    CHECK(in == kept);

    // Reduce-scatter: rank r gets block r of the sum.
    std::vector<float> whole(2 * n), mine(n);
    for (std::int64_t i = 0; i < 2 * n; ++i) whole[static_cast<std::size_t>(i)] = static_cast<float>(i + rank);
    comm->reduce_scatter_sum(whole.data(), mine.data(), n);
    for (std::int64_t i = 0; i < n; ++i)
        REQUIRE(mine[static_cast<std::size_t>(i)] == static_cast<float>(2 * (rank * n + i) + 1));

    // fp16 sums round once per element: 1 + 2^-11 is a tie that rounds to even (1),
    // 1 + 3 * 2^-11 (1.5 ulp) to even, up (1 + 2^-9); large values overflow to inf as half does.
    const std::vector<float> values = {0.5f, 1.0f, 3.0f * 0x1.0p-11f, 40000.0f, -2.5f};
    const std::vector<float> others = {0.25f, 0x1.0p-11f, 1.0f, 40000.0f, 2.5f};
    const std::vector<float> expected = {0.75f, 1.0f, 1.0f + 0x1.0p-9f, INFINITY, 0.0f};
    std::vector<dtsim::runtime::Half> half(values.size());
    for (std::size_t i = 0; i < half.size(); ++i) half[i] = dtsim::fp16_bits(rank == 0 ? values[i] : others[i]);
    comm->allreduce_sum(half.data(), static_cast<std::int64_t>(half.size()));
    for (std::size_t i = 0; i < half.size(); ++i) {
        CAPTURE(i);
        CHECK(dtsim::fp16_value(half[i]) == expected[i]);
    }

    // Which sum ran shows in a NaN's bits: c10::Half's conversion (fp16_sum) makes the quiet NaN 0x7e00,
    // gloo::float16's (torch before 2.8) 0x7fff.
    std::vector<dtsim::runtime::Half> nan = {rank == 0 ? std::uint16_t{0x7e00} : std::uint16_t{0x3c00}};
    comm->allreduce_sum(nan.data(), 1);
    CHECK(nan[0] == (half_sum == HalfSum::gloo ? 0x7fff : 0x7e00));
}

TEST_CASE("2 ranks: gloo runs two asynchronous allreduces at once, each matched by its issue order", "[.mpi2]") {
    using dtsim::runtime::CommBackend;
    ensure_mpi();
    REQUIRE(dtsim::test::mpi_world_size() == 2);
    const auto comm = dtsim::runtime::make_communicator(CommBackend::gloo, MPI_COMM_WORLD);
    const int rank = comm->rank();
    constexpr std::int64_t n = 1 << 16;
    std::vector<float> first(n, static_cast<float>(1 + rank)), second(n, static_cast<float>(10 + rank));
    std::promise<void> first_done, second_done;
    const std::shared_future<void> second_ended = second_done.get_future().share();
    std::atomic<bool> second_done_first{false};
    // Rank 1 holds the first allreduce back as it starts on its worker: only a
    // second worker can run the second meanwhile, and on rank 0 the second then
    // ends before the first. With one worker it would wait behind the first.
    comm->allreduce_sum_async(first.data(), n,
                              {[rank] {
                                   if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
                               },
                               [&](std::exception_ptr e) {
                                   if (!e)
                                       second_done_first =
                                           second_ended.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
                                   first_done.set_value();
                               }});
    comm->allreduce_sum_async(second.data(), n, {{}, [&](std::exception_ptr e) {
                                                     if (e)
                                                         second_done.set_exception(e);
                                                     else
                                                         second_done.set_value();
                                                 }});
    first_done.get_future().wait();
    second_ended.get();
    CHECK(second_done_first.load());
    CHECK(std::all_of(first.begin(), first.end(), [](float v) { return v == 3.0f; }));     // 1 + 2
    CHECK(std::all_of(second.begin(), second.end(), [](float v) { return v == 21.0f; }));  // 10 + 11
    // A blocking call issued after them is matched by its order too.
    std::vector<float> third(4, 1.0f);
    comm->allreduce_sum(third.data(), 4);
    CHECK(third == std::vector<float>(4, 2.0f));
}
