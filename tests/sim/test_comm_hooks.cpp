// DDP communication hooks (strategy-semantics.md §2): fp16/bf16 compression,
// PowerSGD, batched PowerSGD and post-local SGD. Expected bytes come from the
// workload's parameter shapes and the hooks' rules, not from the simulator.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

// Communication-heavy: GPT-2 small, bf16 autocast (fast compute, fp32 gradients), 2 nodes x 8.
Config gpt2_2x8(const std::string& hook) {
    Config c;
    c.model = "gpt2";
    c.topology = {2, 8};
    c.micro_batch = 1;
    c.precision = Precision::bf16_mixed;
    c.knobs = {{"comm_hook", hook}};
    return c;
}

const calib::Calibration& a100() {
    static const calib::Calibration cal = calib::load_hardware("a100-sxm");
    return cal;
}

std::map<int, const models::Parameter*> shapes(const models::Workload& w) {
    std::map<int, const models::Parameter*> out;
    for (const auto& layer : w.layers)
        for (const auto& p : layer.params) out[p.index] = &p;
    return out;
}

// powerSGD_hook's split of a set of parameters at rank `rank`, min_compression_rate 2:
// elements allreduced uncompressed, and sum of n*r' (Ps) and m*r' (Qs) over compressed matrices.
struct Expected {
    std::int64_t uncompressed = 0, p = 0, q = 0, numel = 0;
};
Expected powersgd_split(const std::vector<const models::Parameter*>& params, std::int64_t rank) {
    Expected e;
    for (const auto* p : params) {
        std::int64_t numel = 1;
        for (auto d : p->shape) numel *= d;
        e.numel += numel;
        const std::int64_t n = p->shape.size() >= 2 ? p->shape[0] : numel;
        const std::int64_t m = numel / n;
        const std::int64_t r = std::min({n, m, rank});
        if (p->shape.size() >= 2 && (n + m) * r * 2 < n * m) {
            e.p += n * r;
            e.q += m * r;
        } else {
            e.uncompressed += numel;
        }
    }
    return e;
}

std::vector<const models::Parameter*> all_params(const models::Workload& w) {
    std::vector<const models::Parameter*> out;
    for (const auto& [index, p] : shapes(w)) out.push_back(p);
    return out;
}

// Gradient allreduces (bucket >= 0), in issue order.
std::vector<std::size_t> bucket_allreduces(const Plan& plan, int bucket = -2) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const Task& t = plan.tasks[i];
        if (t.kind == TaskKind::collective && t.collective == CollectiveKind::allreduce && t.bucket >= 0 &&
            (bucket == -2 || t.bucket == bucket))
            out.push_back(i);
    }
    return out;
}

std::int64_t bucket_allreduce_bytes(const Plan& plan) {
    std::int64_t sum = 0;
    for (auto i : bucket_allreduces(plan)) sum += plan.tasks[i].bytes;
    return sum;
}

std::int64_t ceil_sqrt(std::int64_t x) {
    std::int64_t s = 0;
    while (s * s < x) ++s;
    return s;
}

bool overlaps(const TaskTiming& a, const TaskTiming& b) {
    return a.start_ns < b.end_ns && b.start_ns < a.end_ns;
}

}  // namespace

TEST_CASE("fp16/bf16 compression halves the allreduce bytes, slower per byte but faster overall when comm-bound") {
    const SimResult plain = simulate(gpt2_2x8("allreduce"), a100());
    const std::int64_t psi = plain.workload->param_count();
    REQUIRE(bucket_allreduce_bytes(plain.plan) == 4 * psi);
    for (const char* hook : {"fp16_compress", "bf16_compress"}) {
        INFO(hook);
        const SimResult half = simulate(gpt2_2x8(hook), a100());
        CHECK(bucket_allreduce_bytes(half.plan) == 2 * psi);
        CHECK(bucket_allreduces(half.plan).size() == half.plan.buckets.size());
        // The allreduce carries the half type, so a calibration with a curve of its own prices it (gloo).
        for (const auto i : bucket_allreduces(half.plan))
            CHECK(half.plan.tasks[i].dtype == (std::string(hook) == "fp16_compress" ? DType::fp16 : DType::bf16));
        for (const auto i : bucket_allreduces(plain.plan)) CHECK(plain.plan.tasks[i].dtype == DType::fp32);
        for (const auto i : bucket_allreduces(half.plan))
            CHECK(half.plan.tasks[i].bytes * 2 ==
                  half.plan.buckets[static_cast<std::size_t>(half.plan.tasks[i].bucket)].bytes);
        // Smaller messages sit lower on the bandwidth curve...
        CHECK(half.metrics.comm_s / double(half.metrics.comm_bytes_per_step) >
              plain.metrics.comm_s / double(plain.metrics.comm_bytes_per_step));
        // ...but half the bytes still wins on a communication-heavy step.
        CHECK(half.metrics.step_time_s < plain.metrics.step_time_s);
        // Every bucket is decompressed (a compression pass after its allreduce) before the optimizer runs.
        std::size_t optimizer = 0;
        for (std::size_t i = 0; i < half.plan.tasks.size(); ++i)
            if (half.plan.tasks[i].phase == Phase::optimizer) optimizer = i;
        for (const auto ar : bucket_allreduces(half.plan)) {
            bool decompressed = false;
            for (std::size_t i = ar + 1; i < half.plan.tasks.size(); ++i) {
                const auto deps = half.plan.deps_of(half.plan.tasks[i]);
                if (half.plan.tasks[i].phase == Phase::compression &&
                    std::find(deps.begin(), deps.end(), static_cast<std::int32_t>(ar)) != deps.end()) {
                    decompressed = true;
                    CHECK(half.schedule.timings[i].end_ns <= half.schedule.timings[optimizer].start_ns);
                    CHECK(half.plan.tasks[i].bytes == 6 * half.plan.tasks[ar].bytes / 2);  // read 2 B, write 4 B
                }
            }
            CHECK(decompressed);
        }
    }
}

TEST_CASE("PowerSGD: bytes per step from the matrix shapes, three sequential allreduces per bucket") {
    for (std::int64_t rank : {1, 4}) {
        INFO("rank " << rank);
        Config c = gpt2_2x8("powerSGD");
        c.knobs.push_back({"matrix_approximation_rank", std::to_string(rank)});
        const SimResult r = simulate(c, a100());
        const auto by_index = shapes(*r.workload);
        const Expected all = powersgd_split(all_params(*r.workload), rank);
        REQUIRE(all.p > 0);
        REQUIRE(all.uncompressed > 0);
        CHECK(bucket_allreduce_bytes(r.plan) == 4 * all.uncompressed + 4 * (all.p + all.q));
        CHECK(all.numel == r.workload->param_count());

        const auto& plan = r.plan;
        const auto& timing = r.schedule.timings;
        std::int64_t previous_end = 0;
        for (const auto& bucket : plan.buckets) {
            std::vector<const models::Parameter*> params;
            for (int p : bucket.params) params.push_back(by_index.at(p));
            const Expected e = powersgd_split(params, rank);
            const auto ars = bucket_allreduces(plan, bucket.index);
            REQUIRE(ars.size() == 3);
            // #1 uncompressed tensors, #2 all Ps, #3 all Qs, fp32.
            CHECK(plan.tasks[ars[0]].bytes == 4 * e.uncompressed);
            CHECK(plan.tasks[ars[1]].bytes == 4 * e.p);
            CHECK(plan.tasks[ars[2]].bytes == 4 * e.q);
            // Each waits for the previous one, and buckets do not interleave.
            CHECK(timing[ars[0]].start_ns >= previous_end);
            CHECK(timing[ars[1]].start_ns >= timing[ars[0]].end_ns);
            CHECK(timing[ars[2]].start_ns >= timing[ars[1]].end_ns);
            previous_end = timing[ars[2]].end_ns;
        }
        // The device sync per bucket: no backward kernel runs while any of a bucket's allreduces is in flight.
        for (const auto ar : bucket_allreduces(plan))
            for (std::size_t i = 0; i < plan.tasks.size(); ++i)
                if (plan.tasks[i].phase == Phase::backward && timing[ar].end_ns > timing[ar].start_ns)
                    CHECK_FALSE(overlaps(timing[i], timing[ar]));
        // The compression math is on the compute stream.
        bool has_math = false;
        for (const auto& t : plan.tasks) has_math = has_math || (t.phase == Phase::compression && t.flops > 0);
        CHECK(has_math);
    }
}

TEST_CASE("PowerSGD warm-up: vanilla allreduce until start_powerSGD_iter") {
    Config c = gpt2_2x8("powerSGD");
    const auto phases = step_phases(c);
    REQUIRE(phases.size() >= 2);
    CHECK(phases[0].label == "steady state (PowerSGD)");
    CHECK(phases[0].weight == 1.0);
    const auto warm = std::find_if(phases.begin(), phases.end(),
                                   [](const StepPhase& p) { return p.label.find("warm-up") != std::string::npos; });
    REQUIRE(warm != phases.end());
    CHECK(warm->weight == 0.0);
    CHECK(warm->iteration >= 2);
    CHECK(warm->iteration <= 1000);

    const auto w = build_workload(c);
    const std::int64_t psi = w.param_count();
    c.iteration = warm->iteration;
    Plan plan = lower(w, c);
    CHECK(bucket_allreduce_bytes(plan) == 4 * psi);
    CHECK(bucket_allreduces(plan).size() == plan.buckets.size());
    CHECK(plan.resident[static_cast<int>(MemCategory::error_feedback)] == 0);  // created on first use

    // PowerSGDState.iter is iteration - 1: iteration start_powerSGD_iter is the last uncompressed one.
    c.knobs.push_back({"start_powerSGD_iter", "10"});
    c.iteration = 10;
    CHECK(bucket_allreduce_bytes(lower(w, c)) == 4 * psi);
    c.iteration = 11;
    CHECK(bucket_allreduce_bytes(lower(w, c)) < psi);
}

TEST_CASE("PowerSGD keeps error feedback (one gradient copy) and, with warm start, P and Q") {
    Config c = gpt2_2x8("powerSGD");
    const auto w = build_workload(c);
    const std::int64_t psi = w.param_count();
    auto error_feedback = [&](std::vector<std::pair<std::string, std::string>> knobs) {
        Config k = c;
        for (auto& kv : knobs) k.knobs.push_back(kv);
        return lower(w, k).resident[static_cast<int>(MemCategory::error_feedback)];
    };
    const Expected r1 = powersgd_split(all_params(w), 1);
    const Expected r4 = powersgd_split(all_params(w), 4);
    CHECK(error_feedback({}) == 4 * psi + 4 * (r1.p + r1.q));
    CHECK(error_feedback({{"matrix_approximation_rank", "4"}}) == 4 * psi + 4 * (r4.p + r4.q));
    CHECK(error_feedback({{"warm_start", "false"}}) == 4 * psi);
    CHECK(error_feedback({{"use_error_feedback", "false"}}) == 4 * (r1.p + r1.q));
    CHECK(error_feedback({{"use_error_feedback", "false"}, {"warm_start", "false"}}) == 0);
    // fp16_compress_wrapper: PowerSGD runs on the fp16 bucket, so its state and wire bytes are 2 B per element.
    CHECK(error_feedback({{"comm_wrapper", "fp16"}}) == 2 * psi + 2 * (r1.p + r1.q));
    c.knobs.push_back({"comm_wrapper", "bf16"});
    CHECK(bucket_allreduce_bytes(lower(w, c)) == 2 * r1.uncompressed + 2 * (r1.p + r1.q));
    // The error-feedback memory shows in the peak.
    const SimResult sim = simulate(gpt2_2x8("powerSGD"), a100());
    CHECK(sim.metrics.peak_breakdown[static_cast<std::size_t>(MemCategory::error_feedback)] ==
          4 * psi + 4 * (r1.p + r1.q));
}

TEST_CASE(
    "PowerSGD knobs: start_powerSGD_iter must be > 1 with error feedback or warm start, and hook knobs need the hook") {
    Config c = gpt2_2x8("powerSGD");
    const auto w = build_workload(c);
    c.knobs.push_back({"start_powerSGD_iter", "1"});
    CHECK_THROWS_AS(lower(w, c), ConfigError);
    CHECK_THROWS_WITH(lower(w, c), Catch::Contains("start_powerSGD_iter"));
    CHECK_THROWS_WITH(step_phases(c), Catch::Contains("start_powerSGD_iter"));
    c.knobs.push_back({"use_error_feedback", "false"});
    CHECK_THROWS_WITH(lower(w, c), Catch::Contains("start_powerSGD_iter"));  // warm_start still on
    c.knobs.push_back({"warm_start", "false"});
    CHECK_NOTHROW(lower(w, c));

    Config plain = gpt2_2x8("allreduce");
    plain.knobs.push_back({"matrix_approximation_rank", "4"});
    CHECK_THROWS_AS(lower(w, plain), ConfigError);
    CHECK_THROWS_WITH(lower(w, plain), Catch::Contains("matrix_approximation_rank"));
}

TEST_CASE("batched PowerSGD: each bucket as an s x s matrix, two allreduces of s*r elements") {
    const SimResult r = simulate(gpt2_2x8("batched_powerSGD"), a100());
    const auto& plan = r.plan;
    std::int64_t total = 0, state = 0;
    for (const auto& bucket : plan.buckets) {
        const std::int64_t s = ceil_sqrt(bucket.bytes / 4);
        const auto ars = bucket_allreduces(plan, bucket.index);
        REQUIRE(ars.size() == 2);
        CHECK(plan.tasks[ars[0]].bytes == s * 1 * 4);
        CHECK(plan.tasks[ars[1]].bytes == s * 1 * 4);
        CHECK(r.schedule.timings[ars[1]].start_ns >= r.schedule.timings[ars[0]].end_ns);
        total += 2 * s * 1 * 4;
        state += 4 * s * s + 4 * 2 * s;  // error feedback (padded) + P and Q
    }
    CHECK(bucket_allreduce_bytes(plan) == total);
    CHECK(plan.resident[static_cast<int>(MemCategory::error_feedback)] == state);
    CHECK(state >= 4 * r.workload->param_count());
}

TEST_CASE("post-local SGD: node-local gradient allreduces, a world parameter average every period") {
    Config c = gpt2_2x8("post_localSGD");
    const auto w = std::make_shared<const models::Workload>(build_workload(c));
    const std::int64_t psi = w->param_count();
    const auto phases = step_phases(c);
    REQUIRE(phases.size() == 4);  // and DDP's iteration 1
    CHECK(phases[0].label == "local step");
    CHECK(phases[0].weight == Approx(0.75));
    CHECK(phases[1].label == "averaging step");
    CHECK(phases[1].weight == Approx(0.25));
    CHECK(phases[2].label.find("warm-up") == 0);
    CHECK(phases[2].weight == 0.0);
    // PeriodicModelAverager.step = iteration - 1 averages when it is a multiple of the period.
    CHECK((phases[1].iteration - 1) % 4 == 0);
    CHECK((phases[0].iteration - 1) % 4 != 0);

    auto collectives = [&](std::int64_t iteration, std::vector<std::pair<std::string, std::string>> extra = {}) {
        Config k = c;
        k.iteration = iteration;
        for (auto& kv : extra) k.knobs.push_back(kv);
        return simulate(w, k, a100());
    };
    // Local step: every gradient allreduce stays inside one node.
    const SimResult local = collectives(phases[0].iteration);
    CHECK(bucket_allreduce_bytes(local.plan) == 4 * psi);
    for (const auto& t : local.plan.tasks)
        if (t.kind == TaskKind::collective && t.collective == CollectiveKind::allreduce) {
            CHECK(local.plan.groups[static_cast<std::size_t>(t.group)].size == 8);
            CHECK(local.plan.groups[static_cast<std::size_t>(t.group)].nodes == 1);
        }
    // Averaging step: the same plus one world allreduce of all parameters after the optimizer.
    const SimResult avg = collectives(phases[1].iteration);
    CHECK(bucket_allreduce_bytes(avg.plan) == 4 * psi);
    int world = 0;
    std::size_t optimizer = 0;
    for (std::size_t i = 0; i < avg.plan.tasks.size(); ++i)
        if (avg.plan.tasks[i].phase == Phase::optimizer) optimizer = i;
    for (std::size_t i = 0; i < avg.plan.tasks.size(); ++i) {
        const Task& t = avg.plan.tasks[i];
        if (t.kind == TaskKind::collective && t.collective == CollectiveKind::allreduce &&
            avg.plan.groups[static_cast<std::size_t>(t.group)].size == 16) {
            ++world;
            CHECK(t.bytes == 4 * psi);
            CHECK(avg.schedule.timings[i].start_ns >= avg.schedule.timings[optimizer].end_ns);
        }
    }
    CHECK(world == 1);
    CHECK(avg.metrics.step_time_s > local.metrics.step_time_s);
    // Warm-up: global gradient allreduces.
    const SimResult warm = collectives(phases[2].iteration);
    for (const auto i : bucket_allreduces(warm.plan))
        CHECK(warm.plan.groups[static_cast<std::size_t>(warm.plan.tasks[i].group)].size == 16);
    // post_local_gradient_allreduce=false: no gradient communication after the start.
    const SimResult none = collectives(phases[0].iteration, {{"post_local_gradient_allreduce", "false"}});
    CHECK(bucket_allreduces(none.plan).empty());
    CHECK(none.metrics.step_time_s < local.metrics.step_time_s);

    // The long-run average lies between the two kinds of step, weighted 3:1.
    const PhasedResult phased = simulate_phases(w, c, a100());
    CHECK(phased.average_step_time_s > local.metrics.step_time_s);
    CHECK(phased.average_step_time_s < avg.metrics.step_time_s);
    CHECK(phased.average_step_time_s == Approx(0.75 * local.metrics.step_time_s + 0.25 * avg.metrics.step_time_s));
}

TEST_CASE("post-local SGD: model_averaging_period=1 averages every step, warmup_steps delays averaging") {
    Config c = gpt2_2x8("post_localSGD");
    c.knobs.push_back({"model_averaging_period", "1"});
    auto phases = step_phases(c);
    REQUIRE(phases.size() == 3);  // averaging, warm-up, DDP's iteration 1
    CHECK(phases[0].label == "averaging step");
    CHECK(phases[0].weight == 1.0);

    c = gpt2_2x8("post_localSGD");
    c.knobs.push_back({"warmup_steps", "3"});
    phases = step_phases(c);
    CHECK((phases[1].iteration - 1 - 3) % 4 == 0);
    const auto w = build_workload(c);
    auto world_allreduces = [&](std::int64_t iteration) {
        Config k = c;
        k.iteration = iteration;
        const Plan plan = lower(w, k);
        int n = 0;
        for (const auto& t : plan.tasks)
            n += t.kind == TaskKind::collective && t.collective == CollectiveKind::allreduce && t.bucket < 0 &&
                 plan.groups[static_cast<std::size_t>(t.group)].size == 16;
        return n;
    };
    CHECK(world_allreduces(3) == 0);  // averager step 2 < warmup_steps
    CHECK(world_allreduces(4) == 1);  // step 3 = warmup_steps
    CHECK(world_allreduces(5) == 0);
    CHECK(world_allreduces(8) == 1);
}

TEST_CASE("comm hooks are deterministic") {
    for (const char* hook : {"fp16_compress", "powerSGD", "batched_powerSGD", "post_localSGD"}) {
        INFO(hook);
        const SimResult a = simulate(gpt2_2x8(hook), a100());
        const SimResult b = simulate(gpt2_2x8(hook), a100());
        CHECK(a.plan.tasks.size() == b.plan.tasks.size());
        CHECK(a.duration_ns == b.duration_ns);
        CHECK(a.schedule.makespan_ns == b.schedule.makespan_ns);
        CHECK(a.schedule.peak_memory_bytes == b.schedule.peak_memory_bytes);
    }
}
