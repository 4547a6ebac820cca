// Trace analysis on hand-written traces whose figures are worked out by hand
// in the comments (tests/data/traces/kineto_gpu and gloo_cpu), on a legacy
// array trace, and on a simulated step (predicted figures read back).
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/chrome_trace.hpp"
#include "dtsim/traces/trace_analysis.hpp"
#include "dtsim/traces/trace_reader.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace dtsim;
using namespace dtsim::traces;
using Catch::Detail::Approx;

namespace {

std::string data(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/" + name; }

const StepAnalysis& step_of(const TraceAnalysis& a, std::int32_t rank, std::int64_t step) {
    for (const StepAnalysis& s : a.steps)
        if (s.rank == rank && s.step == step) return s;
    FAIL("no step " << step << " on rank " << rank);
    return a.steps.front();
}

const OpSummary& op_of(const TraceAnalysis& a, std::int32_t rank, std::string_view name) {
    for (const OpSummary& o : a.top_ops)
        if (o.rank == rank && o.name == name) return o;
    FAIL("no op " << name << " on rank " << rank);
    return a.top_ops.front();
}

}  // namespace

TEST_CASE("Kineto GPU trace: breakdown, overlap, idle causes, kernels and NCCL bandwidth by hand") {
    const TraceModel m = read_trace(data("kineto_gpu"));
    const TraceAnalysis a = analyze_trace(m);
    REQUIRE(a.steps.size() == 2);

    // Rank 0, ProfilerStep#1 = [0, 1000] us (no GPU step span, so the CPU window).
    // Compute kernels [100,300] [350,400] [720,820] = 350 us; NCCL [250,650] = 400 us; memcpy [850,900].
    // Busy = [100,650] + [720,820] + [850,900] = 700 us, so idle 300, non-compute 700 - 350 = 350.
    // Compute under the allreduce: [250,300] + [350,400] = 100 of 400 us -> overlap 0.25.
    const StepAnalysis& r0 = step_of(a, 0, 1);
    CHECK(r0.basis == BreakdownBasis::gpu_kernels);
    CHECK(r0.dur_ns == 1'000'000);
    CHECK(r0.window_ns == 1'000'000);
    CHECK(r0.breakdown.compute_ns == 350'000);
    CHECK(r0.breakdown.non_compute_ns == 350'000);
    CHECK(r0.breakdown.idle_ns == 300'000);
    CHECK(r0.comm_ns == 400'000);
    CHECK(r0.comm_under_compute_ns == 100'000);
    CHECK(r0.overlap_ratio == Approx(0.25));
    // Stream 7 gaps: 300->350 (relu launched at 40 us, before the gemm ended: other wait 50),
    // 400->720 (launched at 700 us, after: host wait 320), 820->850 (launched at 840: host wait 30).
    CHECK(r0.idle.computable);
    CHECK(r0.idle.host_wait_ns == 350'000);
    CHECK(r0.idle.other_wait_ns == 50'000);
    CHECK(r0.idle.kernel_wait_ns == 0);

    // Rank 1, [0, 900] us: gemm [100,200], NCCL [150,650]; busy [100,650] = 550, idle 350,
    // compute 100, non-compute 450, overlap 50 / 500.
    const StepAnalysis& r1 = step_of(a, 1, 1);
    CHECK(r1.dur_ns == 900'000);
    CHECK(r1.breakdown.compute_ns == 100'000);
    CHECK(r1.breakdown.non_compute_ns == 450'000);
    CHECK(r1.breakdown.idle_ns == 350'000);
    CHECK(r1.overlap_ratio == Approx(0.1));
    CHECK(r1.idle.computable);  // one kernel, no gap: all zero
    CHECK(r1.idle.host_wait_ns + r1.idle.other_wait_ns + r1.idle.kernel_wait_ns == 0);

    // Kernels by total time: the gemm twice on rank 0 (200 + 100 us).
    const OpSummary& gemm = op_of(a, 0, "ampere_sgemm_128x64_tn");
    CHECK(gemm.count == 2);
    CHECK(gemm.total_ns == 300'000);
    CHECK(gemm.min_ns == 100'000);
    CHECK(gemm.max_ns == 200'000);
    CHECK(gemm.mean_ns == Approx(150'000));
    CHECK(a.top_ops[0].name.find("ncclDevKernel_AllReduce") == 0);  // 400 us: rank 0's first
    CHECK(op_of(a, 0, "Memcpy HtoD (Pageable -> Device)").kind == SpanKind::memory);

    // The allreduce: S = 1048576 floats = 4194304 B; rank 0 400 us -> algbw 10.48576 GB/s,
    // busbw x 2(2-1)/2 = the same; rank 1 (NCCL < 2.19 name, capitalised category) 500 us -> 8.388608.
    REQUIRE(a.collectives.size() == 2);
    const CollectiveCall& c0 = a.collectives[0];
    CHECK(c0.rank == 0);
    CHECK(c0.op == "allreduce");
    CHECK(c0.dtype == "Float");
    CHECK(c0.size_bytes == 4'194'304);
    CHECK(c0.group_size == 2);
    CHECK(c0.algbw_gbps == Approx(10.48576));
    CHECK(c0.busbw_gbps == Approx(10.48576));
    const CollectiveCall& c1 = a.collectives[1];
    CHECK(c1.rank == 1);
    CHECK(c1.algbw_gbps == Approx(8.388608));
    // Entries on one clock (base + ts): rank 0 at 1e9 ns + 250 us, rank 1 at 1e9 + 50 us + 150 us:
    // rank 0 entered last, 50 us after rank 1 (not 100: the bases differ).
    CHECK(c0.straggler_rank == 0);
    CHECK(c1.straggler_rank == 0);
    CHECK(c0.straggler_lag_ns == 50'000);
}

TEST_CASE("gloo CPU trace: the main thread's breakdown, gloo pairing, sizes and stragglers by hand") {
    const TraceModel m = read_trace(data("gloo_cpu"));
    const TraceAnalysis a = analyze_trace(m);
    REQUIRE(a.steps.size() == 2);

    // Rank 0, ProfilerStep#5 = [1000, 3000] us. Main-thread compute: addmm [1100,1500] (mm nested
    // in it), addmm [1600,1900], add_ [2500,2600] = 800 us. Communication on any thread:
    // c10d::allreduce_ [1500,1520] + gloo:all_reduce [1510,2110] = [1500,2110]; c10d::allgather_
    // [2200,2210] + gloo:all_gather [2210,2400] = [2200,2400]: 810 us. Busy = 400 + 610 + 200 + 100
    // = 1310, idle 690, non-compute 510; compute under communication [1600,1900] = 300 / 810.
    const StepAnalysis& r0 = step_of(a, 0, 5);
    CHECK(r0.basis == BreakdownBasis::cpu_main_thread);
    CHECK(r0.dur_ns == 2'000'000);
    CHECK(r0.breakdown.compute_ns == 800'000);
    CHECK(r0.breakdown.non_compute_ns == 510'000);
    CHECK(r0.breakdown.idle_ns == 690'000);
    CHECK(r0.comm_ns == 810'000);
    CHECK(r0.overlap_ratio == Approx(300.0 / 810.0));
    CHECK_FALSE(r0.idle.computable);

    // Rank 1, [1000, 3100]: compute [1100,1700] + [2500,2600] = 700; communication [1700,2110] +
    // [2150,2400] = 660; no overlap; idle 2100 - 1360 = 740.
    const StepAnalysis& r1 = step_of(a, 1, 5);
    CHECK(r1.breakdown.compute_ns == 700'000);
    CHECK(r1.breakdown.non_compute_ns == 660'000);
    CHECK(r1.breakdown.idle_ns == 740'000);
    CHECK(r1.overlap_ratio == 0);

    // CPU ops on any thread, inclusive: addmm twice on rank 0 (400 + 300 us).
    const OpSummary& addmm = op_of(a, 0, "aten::addmm");
    CHECK(addmm.count == 2);
    CHECK(addmm.total_ns == 700'000);

    // allreduce: 262144 floats = 1 MiB over 600 us (rank 0) -> 1.747627 GB/s, busbw x 1 on 2 ranks;
    // allgather: 1024 floats per rank, S = 1024 x 4 x 2 = 8192 B over 190 us, busbw x 1/2.
    REQUIRE(a.collectives.size() == 4);
    const CollectiveCall& ar0 = a.collectives[0];
    CHECK(ar0.op == "allreduce");
    CHECK(ar0.dtype == "float");
    CHECK(ar0.size_bytes == 1'048'576);
    CHECK(ar0.start_ns == 1'500'000);  // the c10d enqueue: when rank 0 asked for it
    CHECK(ar0.dur_ns == 600'000);
    CHECK(ar0.algbw_gbps == Approx(1048576.0 / 600000.0));
    CHECK(ar0.busbw_gbps == Approx(1048576.0 / 600000.0));
    const CollectiveCall& ag0 = a.collectives[1];
    CHECK(ag0.op == "allgather");
    CHECK(ag0.size_bytes == 8192);
    CHECK(ag0.busbw_gbps == Approx(8192.0 / 190000.0 / 2));
    // Stragglers: rank 1 asked for the allreduce at 1700 us, 200 after rank 0; rank 0 asked for the
    // allgather at 2200 us, 50 after rank 1.
    CHECK(ar0.straggler_rank == 1);
    CHECK(ar0.straggler_lag_ns == 200'000);
    CHECK(ag0.straggler_rank == 0);
    CHECK(ag0.straggler_lag_ns == 50'000);
    CHECK(a.collectives[2].rank == 1);
    CHECK(a.collectives[2].straggler_rank == 1);

    // HTA-style annotation breakdown: user annotations by name per rank.
    bool found = false;
    for (const AnnotationSummary& s : a.annotations)
        if (s.rank == 0 && s.name == "gloo:all_reduce") {
            found = true;
            CHECK(s.count == 1);
            CHECK(s.total_ns == 600'000);
        }
    CHECK(found);
}

TEST_CASE("a chosen step is analysed alone, and a trace without steps is analysed whole") {
    const TraceModel gloo = read_trace(data("gloo_cpu"));
    CHECK(analyze_trace(gloo, AnalysisOptions{.step = 5, .top_k = 3}).steps.size() == 2);
    const TraceAnalysis none = analyze_trace(gloo, AnalysisOptions{.step = 6, .top_k = 3});
    CHECK(none.steps.empty());
    CHECK(none.notes.size() == 2);

    // Legacy array trace: ProfilerStep#0 [100, 1000] us, linear [150,450] + relu [460.5,480.75]
    // = 320.25 us compute, gloo [500,750] alone = 250; idle 900 - 570.25 = 329.75 us.
    const TraceAnalysis legacy = analyze_trace(read_trace(data("array_form.json")));
    REQUIRE(legacy.steps.size() == 1);
    CHECK(legacy.steps[0].breakdown.compute_ns == 320'250);
    CHECK(legacy.steps[0].breakdown.non_compute_ns == 250'000);
    CHECK(legacy.steps[0].breakdown.idle_ns == 329'750);
    REQUIRE(legacy.collectives.size() == 1);
    CHECK(legacy.collectives[0].size_bytes == 0);  // no Input Dims: unknown, not guessed
    CHECK(legacy.collectives[0].straggler_rank == -1);

    const TraceAnalysis whole = analyze_trace(read_trace(data("object_form.json")));
    REQUIRE(whole.steps.size() == 1);
    CHECK(whole.steps[0].step == -1);
    CHECK(whole.steps[0].dur_ns == 2'000'500);  // first start to last end
}

TEST_CASE("a simulated step: the analysis of its trace equals that of its timeline") {
    sim::Config c;
    c.model = "gpt2";
    c.topology = {1, 4};
    c.micro_batch = 2;
    c.seq_len = 256;
    const calib::Calibration hw = calib::load_hardware("h100-sxm");
    const sim::SimResult result = sim::simulate(c, hw);
    const sim::Timeline tl = sim::make_timeline(result, c, "h100-sxm");
    dtsim::test::TempDir dir;
    write_chrome_trace(tl, dir.file("t.json"));
    const TraceAnalysis read = analyze_trace(read_trace(dir.file("t.json")));
    const TraceAnalysis direct = analyze_trace(from_timeline(tl));
    REQUIRE(read.steps.size() == 1);
    REQUIRE(direct.steps.size() == 1);
    CHECK(read.steps[0].basis == BreakdownBasis::dtsim_streams);
    CHECK(read.steps[0].dur_ns == direct.steps[0].dur_ns);
    CHECK(read.steps[0].breakdown.compute_ns == direct.steps[0].breakdown.compute_ns);
    CHECK(read.steps[0].breakdown.idle_ns == direct.steps[0].breakdown.idle_ns);
    CHECK(read.steps[0].comm_ns > 0);
    // The step is the timeline's span: first start to last end.
    std::int64_t lo = tl.events.front().start_ns, hi = 0;
    for (const auto& e : tl.events) {
        lo = std::min(lo, e.start_ns);
        hi = std::max(hi, e.start_ns + e.dur_ns);
    }
    CHECK(read.steps[0].dur_ns == hi - lo);
    REQUIRE(read.collectives.size() == direct.collectives.size());
    REQUIRE_FALSE(read.collectives.empty());
    for (const CollectiveCall& call : read.collectives) {
        CHECK(call.size_bytes > 0);
        CHECK(call.group_size == 4);
        CHECK(call.busbw_gbps == Approx(call.algbw_gbps * bus_bandwidth_factor(call.op, 4)));
    }
}

TEST_CASE("nccl-tests bus bandwidth factors") {
    CHECK(bus_bandwidth_factor("allreduce", 8) == Approx(1.75));
    CHECK(bus_bandwidth_factor("allgather", 8) == Approx(0.875));
    CHECK(bus_bandwidth_factor("reducescatter", 4) == Approx(0.75));
    CHECK(bus_bandwidth_factor("alltoall", 2) == Approx(0.5));
    CHECK(bus_bandwidth_factor("broadcast", 8) == 1);
    CHECK(bus_bandwidth_factor("sendrecv", 2) == 1);
}

// tests/data/traces/training_step_cpu.json's [memory] events, by hand: Total
// Allocated 1000, 1512, 1768, 1800 and 1804 bytes inside ProfilerStep#1.
TEST_CASE("a step's peak allocated memory comes from torch.profiler's [memory] events") {
    const std::string file = std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/training_step_cpu.json";
    const TraceAnalysis a = analyze_trace(read_trace(file));
    REQUIRE(a.steps.size() == 1);
    CHECK(a.steps[0].peak_allocated_bytes == 1804);
    CHECK(a.steps[0].memory_series == "[memory] CPU");
    // A trace without memory events says so with -1, not 0.
    const std::string no_memory = std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/begin_end.json";
    const TraceAnalysis b = analyze_trace(read_trace(no_memory));
    REQUIRE_FALSE(b.steps.empty());
    for (const auto& s : b.steps) CHECK(s.peak_allocated_bytes == -1);
}
