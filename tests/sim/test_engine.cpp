// Engine: hand-checkable schedules and invariants on real plans.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"

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

namespace {

// One collective stream holding `n` independent collectives.
Plan one_collective_stream(int n) {
    Plan p;
    p.add_stream("gloo", TaskKind::collective);
    p.add_group({2, 1});
    Task c{.kind = TaskKind::collective, .stream = 0};
    c.group = 0;
    for (int i = 0; i < n; ++i) p.add_task(c, {});
    return p;
}

}  // namespace

TEST_CASE("two lanes: a collective stream runs two at once, and they hide each other's latency") {
    const Plan p = one_collective_stream(3);
    // One lane (NCCL): in issue order, one after another.
    Schedule one = run_engine(p, {100, 100, 100}, {1.0, 1.0});
    CHECK(one.timings[1].start_ns == 100);
    CHECK(one.timings[2].end_ns == 300);
    // Two lanes, no latency part: the first two share the link from the start
    // (both end at 200) and the third waits for a free lane.
    CollectiveLanes lanes;
    lanes.lanes = 2;
    Schedule shared = run_engine(p, {100, 100, 100}, {1.0, 1.0}, lanes);
    CHECK(shared.timings[1].start_ns == 0);
    CHECK(shared.timings[0].end_ns == 200);
    CHECK(shared.timings[1].end_ns == 200);
    CHECK(shared.timings[2].start_ns == 200);
    CHECK(shared.timings[2].end_ns == 300);
    // 60 of each 100 is latency: both run it at full pace (to 60), then share
    // the last 40 each (to 140); the third runs alone from 140 to 240.
    lanes.latency_ns = {60, 60, 60};
    Schedule hidden = run_engine(p, {100, 100, 100}, {1.0, 1.0}, lanes);
    CHECK(hidden.timings[0].end_ns == 140);
    CHECK(hidden.timings[1].end_ns == 140);
    CHECK(hidden.timings[2].start_ns == 140);
    CHECK(hidden.timings[2].end_ns == 240);
}

TEST_CASE("two lanes: a latency part that outlasts the other collective ends on its own clock") {
    const Plan p = one_collective_stream(2);
    CollectiveLanes lanes;
    lanes.lanes = 2;
    // Task 0 is all latency (50); task 1 has 10 of latency, then 90 to move.
    // 0-10: both at full pace. 10-50: task 1 shares the link alone (task 0 is
    // still in its latency), so full pace: 40 done. Task 0 ends at 50; task 1
    // has 50 left, alone: ends at 100.
    lanes.latency_ns = {50, 10};
    Schedule s = run_engine(p, {50, 100}, {1.0, 1.0}, lanes);
    CHECK(s.timings[0].end_ns == 50);
    CHECK(s.timings[1].end_ns == 100);
}

TEST_CASE("the slowest of n ranks: the measured spread carried by the expected maximum of n normal samples") {
    CHECK(straggler_factor(1.1, 2, 1) == 1.0);  // one rank waits for no one
    CHECK(straggler_factor(1.1, 2, 2) == Approx(1.1));
    CHECK(straggler_factor(1.0, 2, 8) == 1.0);  // measured together: together at any size
    CHECK(straggler_factor(1.1, 0, 8) == 1.0);  // not measured
    // E[max of n standard normals] (tables: 0.5642, 1.0294, 1.4236 for 2, 4, 8).
    CHECK(straggler_factor(1.1, 2, 4) == Approx(1.0 + 0.1 * 1.0294 / 0.5642).epsilon(1e-4));
    CHECK(straggler_factor(1.1, 2, 8) == Approx(1.0 + 0.1 * 1.4236 / 0.5642).epsilon(1e-4));
    CHECK(straggler_factor(1.2, 8, 2) == Approx(1.0 + 0.2 * 0.5642 / 1.4236).epsilon(1e-4));
    // Only collectives of groups beyond one rank get a factor.
    Plan p = two_stream_plan();
    p.add_group({1, 1});
    p.add_task(compute_task(), {});
    p.add_task(comm_task(), {});
    Task alone = comm_task();
    alone.group = 1;
    p.add_task(alone, {});
    calib::OverlapSpec overlap;
    overlap.straggler = 1.2;
    overlap.straggler_ranks = 2;
    const Stragglers s = stragglers(p, overlap);
    REQUIRE(s.factor.size() == 3);
    CHECK(s.factor[0] == 1.0);
    CHECK(s.factor[1] == Approx(1.2));
    CHECK(s.factor[2] == 1.0);
    CHECK(stragglers(p, {}).factor.empty());  // no spread measured: the hot path stays
}

namespace {

// A DDP-like step of one rank: compute A, then an allreduce of its gradients
// (ready when A ends) beside compute B, then an allreduce of B's, and, where
// `blocking`, B waits for the first allreduce (a CPU backend's synchronous
// collective) instead of running beside it.
Plan two_meetings(bool blocking) {
    Plan p = two_stream_plan();
    const int a = p.add_task(compute_task(), {});
    const int c1 = p.add_task(comm_task(), {a});
    const int b = blocking ? p.add_task(compute_task(), {a, c1}) : p.add_task(compute_task(), {a});
    p.add_task(comm_task(), {b});
    return p;
}

Stragglers all_collectives(double factor) {
    return Stragglers{.factor = {1.0, factor, 1.0, factor}};
}

}  // namespace

TEST_CASE("a collective starts when the slowest rank arrives, and waits without taking the link") {
    // Ranks run 20 % apart: the first allreduce, ready at 100, starts its work
    // at 120; the second, ready when B ends, at 1.2 times that (nothing
    // between made the ranks meet).
    calib::OverlapSpec overlap{2.0, 1.0};  // compute at half speed beside a running collective
    const Plan p = two_meetings(false);
    Schedule s = run_engine(p, {100, 10, 100, 10}, overlap, {}, all_collectives(1.2));
    // B runs at full speed while the allreduce waits (100-120), at half while
    // it runs (120-130: 5 of work), then alone: 75 left, ends at 205.
    CHECK(s.timings[1].start_ns == 100);
    CHECK(s.timings[1].end_ns == 130);
    CHECK(s.timings[2].end_ns == 205);
    CHECK(s.timings[3].end_ns == 246 + 10);
    // The schedule says how long each waited (B's task: none).
    CHECK(s.straggler_wait_ns == std::vector<std::int64_t>{0, 20, 0, 41});
    // Ranks in step (no factor): the same plan as before, and no waits recorded.
    Schedule together = run_engine(p, {100, 10, 100, 10}, overlap);
    CHECK(together.timings[1].end_ns == 110);
    CHECK(together.timings[3].end_ns == 215);
    CHECK(together.straggler_wait_ns.empty());
}

TEST_CASE("ranks meet where one waits on a collective: the next wait counts from there") {
    // B waits for the first allreduce (ends at 130): the ranks have met, and
    // the second allreduce, ready at 230, waits for 1.2 x 100 from 130.
    const Plan p = two_meetings(true);
    Schedule s = run_engine(p, {100, 10, 100, 10}, {1.0, 1.0}, {}, all_collectives(1.2));
    CHECK(s.timings[1].end_ns == 130);
    CHECK(s.timings[2].start_ns == 130);
    CHECK(s.timings[3].start_ns == 230);
    CHECK(s.timings[3].end_ns == 260);
}

TEST_CASE("ranks meet where a collective issues once another returns: the next wait counts from there") {
    // A CPU backend's thread, blocked in a synchronous collective, issues the
    // next one when it returns: the ranks left the first together (at 130), so
    // the second, ready then, does not wait for the spread since the start.
    Plan p = two_stream_plan();
    const int a = p.add_task(compute_task(), {});
    const int c1 = p.add_task(comm_task(), {a});
    p.add_task(comm_task(), {c1});
    Schedule s = run_engine(p, {100, 10, 10}, {1.0, 1.0}, {}, Stragglers{.factor = {1.0, 1.2, 1.2}});
    CHECK(s.timings[1].start_ns == 100);  // waited 20 for the slowest rank, then 10 of work
    CHECK(s.timings[1].end_ns == 130);
    CHECK(s.timings[2].start_ns == 130);
    CHECK(s.timings[2].end_ns == 140);
    CHECK(s.straggler_wait_ns == std::vector<std::int64_t>{0, 20, 0});
}

TEST_CASE("a collective queued past its slowest rank's arrival does not wait") {
    // Two allreduces ready at 0 and 10; the first takes 100. The second's
    // slowest rank arrives at 12, long before the link is free at 100.
    Plan p = two_stream_plan();
    const int a = p.add_task(compute_task(), {});
    p.add_task(comm_task(), {});
    p.add_task(comm_task(), {a});
    Schedule s = run_engine(p, {10, 100, 50}, {1.0, 1.0}, {}, Stragglers{.factor = {1.0, 1.2, 1.2}});
    CHECK(s.timings[1].end_ns == 100);
    CHECK(s.timings[2].start_ns == 100);
    CHECK(s.timings[2].end_ns == 150);
}

namespace {

// DDP of an 8-layer MLP on 2 ranks of one node, fp32, with `bucket_cap_mb`.
Config two_rank_mlp(const char* bucket_cap_mb) {
    Config c;
    c.model = "mlp-8x1024";
    c.topology = {1, 2};
    c.micro_batch = 32;
    c.precision = Precision::fp32;
    c.knobs = {{"bucket_cap_mb", bucket_cap_mb}};
    return c;
}

}  // namespace

TEST_CASE("a CPU calibration's spread: collectives wait, the metrics and the timeline say how long") {
    const Config c = two_rank_mlp("100");  // one exposed bucket at the end of backward
    calib::Calibration cal = calib::load_hardware("a100-sxm");
    cal.provenance.backend = "cpu-gloo-openblas";
    const SimResult together = simulate(c, cal);
    CHECK(together.metrics.straggler_wait_s == 0);
    cal.overlap.straggler = 1.1;
    cal.overlap.straggler_ranks = 2;
    const SimResult apart = simulate(c, cal);
    REQUIRE(apart.duration_ns == together.duration_ns);  // the same prices: only the waits differ
    CHECK(apart.schedule.makespan_ns > together.schedule.makespan_ns);
    CHECK(apart.metrics.straggler_wait_s > 0);
    CHECK(apart.metrics.straggler_wait_s <= apart.metrics.comm_s);
    // The waits are a tenth of the compute before each collective, at most: the
    // step grows by no more than that share of it.
    CHECK(apart.metrics.step_time_s - together.metrics.step_time_s <= 0.1 * together.metrics.step_time_s);
    std::int64_t waited = 0;
    for (const auto& e : make_timeline(apart, c, cal).events)
        for (const auto& [key, value] : e.args)
            if (key == "waited_for_slowest_rank_ns") waited += std::get<std::int64_t>(value);
    CHECK(waited > 0);
    // A GPU preset measures no spread: nothing waits.
    CHECK(simulate(c, calib::load_hardware("a100-sxm")).schedule.straggler_wait_ns.empty());
}

TEST_CASE("over gloo, DDP's bucket allreduces run two at a time, as ProcessGroupGloo's worker threads do") {
    const Config c = two_rank_mlp("1");  // a bucket a layer: allreduces queue up behind each other
    calib::Calibration cal = calib::load_hardware("a100-sxm");
    // Most at once on one stream, over the step.
    const auto most_at_once = [](const SimResult& r) {
        int most = 0;
        for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
            if (r.plan.tasks[i].kind != TaskKind::collective) continue;
            int at_once = 0;
            for (std::size_t j = 0; j < r.plan.tasks.size(); ++j)
                at_once += r.plan.tasks[j].kind == TaskKind::collective &&
                           r.plan.tasks[j].stream == r.plan.tasks[i].stream &&
                           r.schedule.timings[j].start_ns <= r.schedule.timings[i].start_ns &&
                           r.schedule.timings[j].end_ns > r.schedule.timings[i].start_ns;
            most = std::max(most, at_once);
        }
        return most;
    };
    cal.provenance.backend = "cpu-mpi-openblas";
    const SimResult mpi = simulate(c, cal);
    cal.provenance.backend = "cpu-gloo-openblas";
    const SimResult gloo = simulate(c, cal);
    CHECK(most_at_once(mpi) == 1);
    CHECK(most_at_once(gloo) == 2);
    // The same plan and prices; the lanes only hide latency.
    REQUIRE(gloo.duration_ns == mpi.duration_ns);
    CHECK(gloo.schedule.makespan_ns <= mpi.schedule.makespan_ns);
    const CostModel cost(cal);
    const CollectiveLanes lanes = cost.lanes(gloo.plan, gloo.duration_ns);
    CHECK(lanes.lanes == 2);
    for (std::size_t i = 0; i < gloo.plan.tasks.size(); ++i) {
        const Task& t = gloo.plan.tasks[i];
        if (t.kind != TaskKind::collective) {
            CHECK(lanes.latency_ns[i] == 0);
            continue;
        }
        // The group's price of a one-element call: the same for every bucket, within the bucket's own price.
        const double one = cost.collective_ns(t.collective, 2 * 4, gloo.plan.groups[static_cast<std::size_t>(t.group)]);
        CHECK(lanes.latency_ns[i] == std::min(gloo.duration_ns[i], static_cast<std::int64_t>(one + 0.5)));
        CHECK(lanes.latency_ns[i] > 0);
    }
    // A per-call constant: a 25 MiB bucket's latency part is a 4 MiB bucket's, and only part of its time.
    Config big = c;
    big.knobs = {{"bucket_cap_mb", "25"}};
    const SimResult wide = simulate(big, cal);
    const CollectiveLanes wide_lanes = cost.lanes(wide.plan, wide.duration_ns);
    std::size_t small_bucket = 0, large_bucket = 0;
    for (std::size_t i = 0; i < gloo.plan.tasks.size(); ++i)
        if (gloo.plan.tasks[i].kind == TaskKind::collective) small_bucket = i;
    for (std::size_t i = 0; i < wide.plan.tasks.size(); ++i)
        if (wide.plan.tasks[i].kind == TaskKind::collective &&
            (wide.plan.tasks[large_bucket].kind != TaskKind::collective ||
             wide.plan.tasks[i].bytes > wide.plan.tasks[large_bucket].bytes))
            large_bucket = i;
    REQUIRE(wide.plan.tasks[large_bucket].bytes > gloo.plan.tasks[small_bucket].bytes);
    if (lanes.latency_ns[small_bucket] < gloo.duration_ns[small_bucket])
        CHECK(wide_lanes.latency_ns[large_bucket] == lanes.latency_ns[small_bucket]);
    CHECK(wide_lanes.latency_ns[large_bucket] < wide.duration_ns[large_bucket]);
    // The timeline gives the second lane a track of its own: no track holds overlapping events.
    // Titled by the calibration, the timeline names the stream after the library that ran it.
    const Timeline tl = make_timeline(gloo, c, cal);
    const auto has = [](const Timeline& t, const std::string& name) {
        return std::find(t.streams.begin(), t.streams.end(), name) != t.streams.end();
    };
    CHECK(has(tl, "gloo"));
    CHECK(has(tl, "gloo (lane 2)"));
    CHECK_FALSE(has(tl, "nccl"));
    CHECK_FALSE(has(tl, "nccl (lane 2)"));
    std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> tracks;
    for (const auto& e : tl.events) tracks[e.stream].emplace_back(e.start_ns, e.start_ns + e.dur_ns);
    for (auto& [track, spans] : tracks) {
        std::sort(spans.begin(), spans.end());
        for (std::size_t i = 1; i < spans.size(); ++i) CHECK(spans[i - 1].second <= spans[i].first);
    }
    cal.provenance.backend = "cpu-mpi-openblas";
    const Timeline mpi_tl = make_timeline(mpi, c, cal);
    CHECK(mpi_tl.streams.size() == mpi.plan.streams.size());
    CHECK(has(mpi_tl, "mpi"));
    CHECK_FALSE(has(mpi_tl, "nccl"));
    // A GPU preset's collectives are NCCL's.
    CHECK(has(make_timeline(mpi, c, calib::load_hardware("a100-sxm")), "nccl"));
    const CollectiveLanes none = CostModel(cal).lanes(mpi.plan, mpi.duration_ns);
    CHECK(none.lanes == 1);
    CHECK(none.latency_ns.empty());
}

TEST_CASE("name_collective_streams renames the Plan's \"nccl\" stream and its lanes, nothing else") {
    Timeline tl;
    tl.streams = {"compute", "nccl", "nccl (lane 2)", "nccl:allreduce", "ncclx", "shard group"};
    name_collective_streams(tl, "gloo");
    CHECK(tl.streams ==
          std::vector<std::string>{"compute", "gloo", "gloo (lane 2)", "nccl:allreduce", "ncclx", "shard group"});
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
