// Engine: hand-checkable schedules and invariants on real plans.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Plan two_stream_plan() {
    Plan p;
    p.add_stream("compute", TaskKind::compute);
    p.add_stream("nccl", TaskKind::collective);
    p.add_group({2, 1});
    return p;
}

Task compute_task() {
    return Task{.kind = TaskKind::compute, .stream = 0};
}
Task comm_task() {
    Task t{.kind = TaskKind::collective, .stream = 1};
    t.group = 0;
    return t;
}

}  // namespace

TEST_CASE("a dependency chain runs back to back across streams") {
    Plan p = two_stream_plan();
    int a = p.add_task(compute_task(), {});
    int b = p.add_task(comm_task(), {a});
    p.add_task(compute_task(), {b});
    Schedule s = run_engine(p, {100, 50, 30}, {1.0, 1.0});
    CHECK(s.timings[1].start_ns == 100);
    CHECK(s.timings[2].start_ns == 150);
    CHECK(s.makespan_ns == 180);
}

TEST_CASE("a stream runs its tasks in issue order even when a later one is ready first") {
    Plan p = two_stream_plan();
    int slow = p.add_task(compute_task(), {});
    p.add_task(comm_task(), {slow});  // head of the comm stream waits for the compute task
    p.add_task(comm_task(), {});      // ready at 0 but queued behind it
    Schedule s = run_engine(p, {100, 10, 10}, {1.0, 1.0});
    CHECK(s.timings[2].start_ns == 110);
}

TEST_CASE("overlap slows compute by the calibrated factor while a collective runs") {
    Plan p = two_stream_plan();
    p.add_task(compute_task(), {});
    p.add_task(comm_task(), {});
    // Compute runs at 1/1.5 while the 100 ns collective runs: 66.67 ns of work
    // done by t=100, the remaining 33.33 ns at full speed -> ends at 133.33, rounded up.
    Schedule s = run_engine(p, {100, 100}, {1.5, 1.0});
    CHECK(s.timings[1].end_ns == 100);
    CHECK(s.timings[0].end_ns == 134);
}

TEST_CASE("host work and compute slow each other by their calibrated factors") {
    Plan p;
    p.add_stream("compute", TaskKind::compute);
    p.add_stream("host", TaskKind::host_compute);
    p.add_task(compute_task(), {});
    p.add_task(Task{.kind = TaskKind::host_compute, .stream = 1}, {});
    calib::OverlapSpec overlap;
    overlap.compute_slowdown_under_host = 4.0;
    overlap.host_slowdown_under_compute = 2.0;
    // Both run: compute at 1/4, host at 1/2. The 100 ns host task ends at 200,
    // when compute has done 50 ns of its 100; the rest at full speed -> 250.
    Schedule s = run_engine(p, {100, 100}, overlap);
    CHECK(s.timings[1].end_ns == 200);
    CHECK(s.timings[0].end_ns == 250);
    // The presets' factors (1.0): both at full speed.
    Schedule free = run_engine(p, {100, 100}, {});
    CHECK(free.timings[0].end_ns == 100);
    CHECK(free.timings[1].end_ns == 100);
}

TEST_CASE("concurrent collectives share the link") {
    Plan p;
    p.add_stream("a", TaskKind::collective);
    p.add_stream("b", TaskKind::collective);
    p.add_group({2, 1});
    Task x{.kind = TaskKind::collective, .stream = 0};
    x.group = 0;
    Task y = x;
    y.stream = 1;
    p.add_task(x, {});
    p.add_task(y, {});
    Schedule s = run_engine(p, {100, 100}, {1.0, 1.0});
    CHECK(s.timings[0].end_ns == 200);
    CHECK(s.timings[1].end_ns == 200);
}

TEST_CASE("memory: allocations at start, frees at end, peak with its breakdown") {
    Plan p = two_stream_plan();
    p.resident[static_cast<int>(MemCategory::parameters)] = 1000;
    p.add_task(compute_task(), {});
    p.alloc(MemCategory::activations, 500);
    p.add_task(compute_task(), {});
    p.release(MemCategory::activations, 500);
    Schedule s = run_engine(p, {10, 10}, {1.0, 1.0});
    CHECK(s.peak_memory_bytes == 1500);
    CHECK(s.peak_breakdown[static_cast<int>(MemCategory::activations)] == 500);
    CHECK(s.memory.back().total_bytes == 1000);
}

namespace {

SimResult realistic(int grad_accum) {
    Config c;
    c.model = "gpt2";
    c.topology = {2, 8};
    c.micro_batch = 4;
    c.seq_len = 512;
    c.grad_accum = grad_accum;
    c.precision = Precision::bf16_mixed;
    return simulate(c, calib::load_hardware("h100-sxm"));
}

}  // namespace

TEST_CASE("engine invariants on a real DDP plan") {
    for (int accum : {1, 3}) {
        SimResult r = realistic(accum);
        const auto& tasks = r.plan.tasks;
        // No two events overlap on one stream.
        std::map<int, std::vector<TaskTiming>> by_stream;
        for (std::size_t i = 0; i < tasks.size(); ++i) by_stream[tasks[i].stream].push_back(r.schedule.timings[i]);
        for (auto& [stream, timings] : by_stream) {
            std::sort(timings.begin(), timings.end(), [](auto& a, auto& b) { return a.start_ns < b.start_ns; });
            for (std::size_t i = 1; i < timings.size(); ++i) CHECK(timings[i - 1].end_ns <= timings[i].start_ns);
        }
        // Every task starts after its dependencies end, and lasts at least its standalone price.
        std::int64_t last_end = 0;
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            for (auto d : r.plan.deps_of(tasks[i]))
                CHECK(r.schedule.timings[static_cast<std::size_t>(d)].end_ns <= r.schedule.timings[i].start_ns);
            CHECK(r.schedule.timings[i].end_ns - r.schedule.timings[i].start_ns >= r.duration_ns[i]);
            last_end = std::max(last_end, r.schedule.timings[i].end_ns);
        }
        CHECK(r.schedule.makespan_ns == last_end);
        for (const auto& m : r.schedule.memory) CHECK(m.total_bytes >= 0);
        // Gradients are allreduced once per step, whatever the accumulation.
        CHECK(r.metrics.comm_bytes_per_step == r.workload->param_count() * 4);
        // The optimizer step follows every allreduce.
        std::int64_t last_comm_end = 0, step_start = 0;
        for (std::size_t i = 0; i < tasks.size(); ++i) {
            if (tasks[i].kind == TaskKind::collective)
                last_comm_end = std::max(last_comm_end, r.schedule.timings[i].end_ns);
            if (tasks[i].phase == Phase::optimizer) step_start = r.schedule.timings[i].start_ns;
        }
        CHECK(step_start >= last_comm_end);
    }
}

TEST_CASE("overlap: steady-state DDP hides communication that iteration 1 exposes") {
    Config c;
    c.model = "gpt2-medium";
    c.topology = {2, 8};
    c.micro_batch = 4;
    c.seq_len = 1024;
    c.precision = Precision::bf16_mixed;
    const auto cal = calib::load_hardware("a100-sxm");
    SimResult steady = simulate(c, cal);
    c.iteration = 1;
    SimResult first = simulate(c, cal);
    CHECK(steady.metrics.overlap_fraction > 0.3);
    CHECK(first.metrics.overlap_fraction < 0.05);
    CHECK(first.metrics.step_time_s > steady.metrics.step_time_s);
    // Both move the same bytes.
    CHECK(first.metrics.comm_bytes_per_step == steady.metrics.comm_bytes_per_step);
}

TEST_CASE("the simulator is deterministic: byte-identical reports") {
    Config c;
    c.model = "gpt2-large";
    c.topology = {4, 8};
    c.micro_batch = 2;
    c.grad_accum = 2;
    c.precision = Precision::fp16_mixed;
    c.knobs = {{"bucket_cap_mb", "40"}};
    const auto cal = calib::load_hardware("h100-sxm");
    const std::string a = report_json(simulate(c, cal), c, cal).dump(2);
    const std::string b = report_json(simulate(c, cal), c, cal).dump(2);
    CHECK(a == b);
}
