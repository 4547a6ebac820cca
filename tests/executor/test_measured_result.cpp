// What a run's timings yield: the peak memory (the Plan's allocations placed
// at task times; the simulator's own schedule must reproduce its peak, one that
// overlaps more a higher one) and the per-kind comparison with a prediction.
#include "dtsim/executor/measured_memory.hpp"
#include "dtsim/executor/measured_result.hpp"
#include "dtsim/executor/validation.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

using namespace dtsim;

namespace {

sim::SimResult simulated(const std::string& strategy, std::vector<std::pair<std::string, std::string>> knobs) {
    sim::Config c;
    c.model = "mlp-4x256";
    c.strategy = strategy;
    c.knobs = std::move(knobs);
    c.topology = {1, 2};
    c.micro_batch = 8;
    return sim::simulate(c, calib::load_hardware("h100-sxm"));
}

std::vector<executor::TaskTiming> timings_of(const sim::Schedule& s) {
    std::vector<executor::TaskTiming> row;
    for (const auto& t : s.timings) row.push_back({t.start_ns, t.end_ns});
    return row;
}

}  // namespace

TEST_CASE("the plan's allocations at the simulator's times give the simulator's peak", "[executor]") {
    for (const auto& [strategy, knobs] :
         std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>{
             {"ddp", {}},
             {"fsdp", {{"auto_wrap_policy", "size"}, {"min_num_params", "1e4"}}},
             {"deepspeed", {{"stage", "3"}}}}) {
        INFO(strategy);
        const sim::SimResult r = simulated(strategy, knobs);
        CHECK(executor::peak_memory_in_measured_order(r.plan, timings_of(r.schedule)) == r.schedule.peak_memory_bytes);
    }
}

TEST_CASE("tasks that run all at once reach at least the simulated peak", "[executor]") {
    const sim::SimResult r = simulated("fsdp", {{"auto_wrap_policy", "size"}, {"min_num_params", "1e4"}});
    // Every task from 0 to 1: every allocation is live before any free.
    std::vector<executor::TaskTiming> together(r.plan.tasks.size(), executor::TaskTiming{0, 1});
    const std::int64_t all_at_once = executor::peak_memory_in_measured_order(r.plan, together);
    CHECK(all_at_once >= r.schedule.peak_memory_bytes);
    std::int64_t allocated = 0;
    for (const auto& t : r.plan.tasks)
        for (const auto& m : r.plan.memory_of(t))
            if (m.bytes > 0 && !sim::is_host(m.category)) allocated += m.bytes;
    std::int64_t resident = 0;
    for (int c = 0; c < sim::kMemCategories; ++c)
        if (!sim::is_host(static_cast<sim::MemCategory>(c))) resident += r.plan.resident[static_cast<std::size_t>(c)];
    CHECK(all_at_once == resident + allocated);
}

TEST_CASE("the process's peak resident set is read from the OS", "[executor]") {
    const std::int64_t before = executor::process_peak_rss_bytes();
    CHECK(before > 0);
    std::vector<char> block(64 << 20, 1);  // touched: resident
    CHECK(executor::process_peak_rss_bytes() >= before);
    CHECK(executor::process_peak_rss_bytes() >= static_cast<std::int64_t>(block.size()));
}

TEST_CASE("validation compares task kinds on the rank that computed longest", "[executor]") {
    const sim::SimResult r = simulated("ddp", {});
    const std::vector<executor::TaskTiming> fast = timings_of(r.schedule);
    std::vector<executor::TaskTiming> slow = fast;  // the same schedule, every task twice as long
    for (auto& t : slow) t = {t.start_ns * 2, t.end_ns * 2};
    executor::ExecResult measured;
    measured.world_size = 2;
    measured.timings = {{fast, slow}, {fast, slow}};  // two steps, ranks 0 and 1
    measured.median_step_time_s = 1;
    const executor::Comparison c = executor::compare(r, measured);
    CHECK(c.rank == 1);
    double predicted = 0, measured_sum = 0;
    for (std::size_t k = 0; k < executor::kTaskKinds.size(); ++k) {
        predicted += c.predicted_kind_s[k];
        measured_sum += c.measured_kind_s[k];
    }
    CHECK(measured_sum == Approx(2 * predicted));
    // Every task ran twice as long as predicted: each kind that ran is -50 %.
    CHECK(c.kind_error(sim::TaskKind::compute) == Approx(-0.5));
    CHECK(c.kind_error(sim::TaskKind::collective) == Approx(-0.5));
    CHECK(c.kind_error(sim::TaskKind::io) == 0);  // DDP runs no file I/O
}

TEST_CASE("validation compares every task, and lists those furthest from measured first", "[executor]") {
    const sim::SimResult r = simulated("ddp", {});
    std::vector<executor::TaskTiming> measured_times = timings_of(r.schedule);
    // Task 0 ran 1 ms longer than scheduled; the last task 3 ms longer; the rest as predicted.
    const std::size_t last = measured_times.size() - 1;
    measured_times[0].end_ns += 1'000'000;
    measured_times[last].end_ns += 3'000'000;
    executor::ExecResult measured;
    measured.world_size = 1;
    measured.timings = {{measured_times}};
    const executor::Comparison c = executor::compare(r, measured);
    REQUIRE(c.tasks.size() == r.plan.tasks.size());
    for (std::size_t t = 0; t < c.tasks.size(); ++t) {
        const auto& timing = r.schedule.timings[t];
        CHECK(c.tasks[t].predicted_s == Approx(static_cast<double>(timing.end_ns - timing.start_ns) * 1e-9));
        CHECK(c.tasks[t].kind == r.plan.tasks[t].kind);
    }
    const auto top = executor::furthest_tasks(c, 2);
    REQUIRE(top.size() == 2);
    CHECK(top[0].task == static_cast<int>(last));
    CHECK(top[0].measured_s - top[0].predicted_s == Approx(3e-3));
    CHECK(top[1].task == 0);
    CHECK(top[1].measured_s - top[1].predicted_s == Approx(1e-3));
    CHECK(top[1].name == sim::task_name(r.plan, *r.workload, r.plan.tasks[0]));
    CHECK(executor::furthest_tasks(c, 1'000'000).size() == c.tasks.size());
}

TEST_CASE("warm-up steps are left out of the per-kind times and bounded by the steps run", "[executor]") {
    const sim::SimResult r = simulated("ddp", {});
    const std::vector<executor::TaskTiming> fast = timings_of(r.schedule);
    std::vector<executor::TaskTiming> slow = fast;  // a warm-up step, every task ten times as long
    for (auto& t : slow) t = {t.start_ns * 10, t.end_ns * 10};
    executor::ExecResult measured;
    measured.world_size = 1;
    measured.timings = {{slow}, {slow}, {fast}};
    measured.warmup_steps = 2;
    CHECK(executor::first_measured_step(measured) == 2);
    const executor::Comparison c = executor::compare(r, measured);
    CHECK(c.kind_error(sim::TaskKind::compute) == Approx(0).margin(1e-9));  // only the third step counts
    measured.warmup_steps = 5;  // more than were run: the last step still counts
    CHECK(executor::first_measured_step(measured) == 2);
    measured.warmup_steps = 0;
    CHECK(executor::first_measured_step(measured) == 0);
    CHECK(executor::compare(r, measured).kind_error(sim::TaskKind::compute) == Approx(-0.9));  // slow steps count
}

TEST_CASE("a bracketed comparison takes the mean of the prices before and after the run", "[executor]") {
    const sim::SimResult before = simulated("ddp", {});
    sim::Config slower;  // the same plan, priced on slower hardware
    slower.model = "mlp-4x256";
    slower.strategy = "ddp";
    slower.topology = {1, 2};
    slower.micro_batch = 8;
    const sim::SimResult after = sim::simulate(slower, calib::load_hardware("a100-sxm"));
    REQUIRE(after.metrics.step_time_s > before.metrics.step_time_s);
    executor::ExecResult measured;
    measured.world_size = 1;
    measured.timings = {{timings_of(before.schedule)}};
    measured.median_step_time_s = before.metrics.step_time_s;
    const executor::Comparison one = executor::compare(before, measured);
    const executor::Comparison other = executor::compare(after, measured);
    const executor::Comparison both = executor::compare_bracketed(before, after, measured);
    CHECK(both.predicted_s == Approx((before.metrics.step_time_s + after.metrics.step_time_s) / 2));
    CHECK(both.measured_s == one.measured_s);
    for (std::size_t k = 0; k < executor::kTaskKinds.size(); ++k) {
        CHECK(both.predicted_kind_s[k] == Approx((one.predicted_kind_s[k] + other.predicted_kind_s[k]) / 2));
        CHECK(both.measured_kind_s[k] == one.measured_kind_s[k]);
    }
    CHECK(both.error() > 0);  // the run took the first price; the mean is above it
    CHECK(both.error() < other.error());
}
