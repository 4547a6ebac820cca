// The executor's CUDA backend: CUPTI records turned into task timings (no GPU
// needed), the clear "no CUDA device" error where there is none, and, where a
// GPU is, a 2-layer MLP replayed for 2 steps with timings in stream and
// dependency order. Built only with the CUDA toolkit (dtsim_executor_cuda
// defines DTSIM_HAVE_CUDA); the GPU case skips with a message elsewhere.
#ifdef DTSIM_HAVE_CUDA

#include "dtsim/common/error.hpp"
#include "dtsim/executor/execute_cuda.hpp"
#include "dtsim/profiler/cuda_benchmarks.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <mpi.h>
#include "support/check_schedule.hpp"
#include "support/mpi_world.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace dtsim;
using executor::CuptiStep;
using executor::ExecOptions;
using executor::ExecResult;
using executor::Mode;
using executor::TaskTiming;
using profiler::cuda::ActivityKind;
using profiler::cuda::ActivityRecord;

namespace {

sim::Config mlp_config(sim::Precision precision) {
    sim::Config c;
    c.model = "mlp-2x256";
    c.strategy = "ddp";
    c.topology = {1, 1};
    c.micro_batch = 32;
    c.precision = precision;
    return c;
}

ActivityRecord record(std::uint32_t correlation, std::uint64_t start, std::uint64_t end) {
    ActivityRecord r;
    r.kind = ActivityKind::kernel;
    r.start_ns = start;
    r.end_ns = end;
    r.correlation = correlation;
    return r;
}

CuptiStep step_of(std::size_t tasks, std::uint64_t t0) {
    CuptiStep s;
    s.t0_ns = t0;
    s.host_start_ns.assign(tasks, 0);
    s.host_end_ns.assign(tasks, 0);
    s.launched.assign(tasks, 0);
    return s;
}

}  // namespace

TEST_CASE("CUDA executor: CUPTI records become task timings", "[executor][cuda]") {
    // compute: 0 -> 1; nccl: 2 after 1 (no records: NCCL on one rank); host: 3 after 2.
    sim::Plan plan;
    const int compute = plan.add_stream("compute", sim::TaskKind::compute);
    const int nccl = plan.add_stream("nccl:allreduce", sim::TaskKind::collective);
    const int host = plan.add_stream("cpu", sim::TaskKind::host_compute);
    const int g = plan.add_group({1, 1});
    const int a = plan.add_task({.kind = sim::TaskKind::compute, .stream = compute}, {});
    const int b = plan.add_task({.kind = sim::TaskKind::compute, .stream = compute}, {a});
    const int c = plan.add_task({.kind = sim::TaskKind::collective, .stream = nccl, .group = g, .bytes = 64}, {b});
    plan.add_task({.kind = sim::TaskKind::host_compute, .stream = host, .elements = 8}, {c});

    CuptiStep step = step_of(4, 1000);
    step.launched = {1, 1, 0, 0};
    step.host_start_ns[3] = 1900;
    step.host_end_ns[3] = 2500;
    const std::vector<ActivityRecord> records = {record(10, 1100, 1200), record(11, 1250, 1300),
                                                 record(12, 1310, 1800),  // task 1's second kernel
                                                 record(99, 500, 5000)};  // not ours: ignored
    const std::unordered_map<std::uint32_t, int> tasks = {{10, 0}, {11, 1}, {12, 1}};
    const auto t = executor::task_timings_from_cupti(plan, records, tasks, step);
    REQUIRE(t.has_value());
    REQUIRE(t->size() == 4);
    CHECK((*t)[0].start_ns == 100);
    CHECK((*t)[0].end_ns == 200);
    CHECK((*t)[1].start_ns == 250);
    CHECK((*t)[1].end_ns == 800);
    CHECK((*t)[2].start_ns == 800);  // no records, nothing launched: zero time at its dependency's end
    CHECK((*t)[2].end_ns == 800);
    CHECK((*t)[3].start_ns == 900);
    CHECK((*t)[3].end_ns == 1500);

    // A task that launched work but has no record: CUPTI lost it, time by events.
    step.launched[2] = 1;
    CHECK_FALSE(executor::task_timings_from_cupti(plan, records, tasks, step).has_value());
}

TEST_CASE("CUDA executor: no device is a clear error, train mode a config error", "[executor][cuda]") {
    if (dtsim::test::mpi_world_size() != 1) return;
    const sim::Config c = mlp_config(sim::Precision::fp32);
    const auto w = sim::build_workload(c);
    const auto plan = sim::lower(w, c);
    ExecOptions o;
    o.mode = Mode::train;
    CHECK_THROWS_AS(executor::execute_cuda(plan, w, c, o), ConfigError);
    const std::string why = profiler::cuda::cuda_unavailable_reason();
    if (why.empty()) {
        WARN("skipped: this machine has a CUDA device; the GPU case below runs instead");
        return;
    }
    o.mode = Mode::replay;
    try {
        executor::execute_cuda(plan, w, c, o);
        FAIL("execute_cuda ran without a CUDA device");
    } catch (const Error& e) {
        CHECK_THAT(e.what(), Catch::StartsWith("no CUDA device") && Catch::Contains("--backend cpu"));
    }
}

TEST_CASE("CUDA executor: a 2-layer MLP replays for 2 steps in stream and dependency order", "[executor][cuda]") {
    if (dtsim::test::mpi_world_size() != 1) return;
    const std::string why = profiler::cuda::cuda_unavailable_reason();
    if (!why.empty()) {
        WARN("skipped: " << why);
        return;
    }
    for (auto precision : {sim::Precision::fp32, sim::Precision::bf16_mixed}) {
        INFO(sim::to_string(precision));
        const sim::Config c = mlp_config(precision);
        const auto w = sim::build_workload(c);
        const auto plan = sim::lower(w, c);
        ExecOptions o;
        o.steps = 2;
        const ExecResult r = executor::execute_cuda(plan, w, c, o);
        for (const auto& n : r.notes) WARN(n);
        REQUIRE(r.timings.size() == 2);
        for (const auto& step : r.timings) {
            REQUIRE(step.size() == 1);
            const auto& t = step[0];
            test::check_schedule(plan, t);
            for (std::size_t i = 0; i < plan.tasks.size() && i < t.size(); ++i)
                if (plan.tasks[i].kind == sim::TaskKind::compute && plan.tasks[i].layer >= 0)
                    CHECK(t[i].end_ns > t[i].start_ns);
        }
        REQUIRE(r.step_time_s.size() == 2);
        CHECK(r.step_time_s[0] > 0);
        CHECK(r.step_time_s[1] > 0);
        CHECK(r.median_step_time_s == r.step_time_s[1]);
        CHECK(r.peak_memory_bytes > 0);
        CHECK(r.timeline.events.size() == 2 * plan.tasks.size());
        CHECK(r.timeline.ranks.size() == 1);
        CHECK(r.timeline.streams.size() == plan.streams.size());
        CHECK_THAT(executor::format_execution_summary(r), Catch::Contains("CUDA backend"));
    }
}

#endif  // DTSIM_HAVE_CUDA
