// DeepSpeed ZeRO (strategy-semantics.md §4, §8): bytes per step, ordering,
// memory formulas, offload.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

constexpr std::int64_t kBucket = 20'000'000;  // elements: several ipg buckets for gpt2-medium

Config zero_config(int stage, std::vector<std::pair<std::string, std::string>> knobs = {}) {
    Config c;
    c.model = "gpt2-medium";
    c.strategy = "deepspeed";
    c.topology = {1, 8};
    c.micro_batch = 1;
    c.seq_len = 128;  // small activations: the peak is in backward, with the gradients
    c.precision = Precision::bf16_mixed;
    c.knobs = {{"stage", std::to_string(stage)}, {"reduce_bucket_size", std::to_string(kBucket)}};
    for (auto& k : knobs) c.knobs.push_back(std::move(k));
    return c;
}

SimResult run(const Config& c) {
    static const auto cal = calib::load_hardware("a100-sxm");
    return simulate(c, cal);
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
    return (a + b - 1) / b;
}

std::int64_t resident(const Plan& p, MemCategory c) {
    return p.resident[static_cast<std::size_t>(c)];
}

std::int64_t at_peak(const SimResult& r, MemCategory c) {
    return r.metrics.peak_breakdown[static_cast<std::size_t>(c)];
}

struct Bytes {
    std::int64_t total = 0;
    int calls = 0;
    std::int64_t largest = 0;
};

Bytes collective_bytes(const Plan& p, CollectiveKind kind) {
    Bytes b;
    for (const Task& t : p.tasks)
        if (t.kind == TaskKind::collective && t.collective == kind) {
            b.total += t.bytes;
            ++b.calls;
            b.largest = std::max(b.largest, t.bytes);
        }
    return b;
}

// Stage-3 partitioning, computed from the workload (§4.3).
struct Stage3Sizes {
    std::int64_t part = 0;            // sum of ceil(numel / N) over every tensor
    std::int64_t gathered = 0;        // non-persistent elements, each tensor padded to N
    std::int64_t persistent = 0;      // persistent elements
    std::int64_t persist_padded = 0;  // padded to N
    std::int64_t all_padded = 0;      // every tensor padded to N
};

Stage3Sizes stage3_sizes(const models::Workload& w, int n, std::int64_t threshold) {
    Stage3Sizes s;
    for (const auto& layer : w.layers)
        for (const auto& p : layer.params) {
            const std::int64_t numel = p.numel(), padded = ceil_div(numel, n) * n;
            s.part += ceil_div(numel, n);
            s.all_padded += padded;
            if (numel <= threshold) {
                s.persistent += numel;
                s.persist_padded += padded;
            } else {
                s.gathered += padded;
            }
        }
    return s;
}

bool is_optimizer(const Task& t) {
    return t.phase == Phase::optimizer;
}

}  // namespace

TEST_CASE("ZeRO-1/2 bytes per step: allreduce buckets of 2 psi in total plus one all-gather of 2 psi (§4.2, §8)") {
    for (int stage : {1, 2}) {
        SimResult r = run(zero_config(stage));
        const std::int64_t psi = r.workload->param_count();
        const int n = 8;
        const Bytes ar = collective_bytes(r.plan, CollectiveKind::allreduce);
        const Bytes ag = collective_bytes(r.plan, CollectiveKind::allgather);
        CHECK(ar.total == 2 * psi);  // bf16 gradients, each exactly once
        CHECK(ar.calls == static_cast<int>(r.plan.buckets.size()));
        CHECK(ar.calls > 3);
        // Every bucket holds at most reduce_bucket_size elements, unless one tensor alone is larger.
        std::int64_t largest_tensor = 0;
        for (const auto& l : r.workload->layers)
            for (const auto& p : l.params) largest_tensor = std::max(largest_tensor, p.numel());
        CHECK(ar.largest <= 2 * std::max(kBucket, largest_tensor));
        CHECK(ag.calls == 1);
        CHECK(ag.total == 2 * ceil_div(psi, n) * n);
        CHECK(collective_bytes(r.plan, CollectiveKind::reduce_scatter).calls == 0);
    }
}

TEST_CASE("gradient accumulation: stage 2 reduces every micro-step, stage 1 only at the boundary (§4.2, §6)") {
    Config c1 = zero_config(1);
    c1.grad_accum = 3;
    Config c2 = zero_config(2);
    c2.grad_accum = 3;
    SimResult r1 = run(c1), r2 = run(c2);
    const std::int64_t psi = r1.workload->param_count();
    CHECK(collective_bytes(r1.plan, CollectiveKind::allreduce).total == 2 * psi);
    CHECK(collective_bytes(r2.plan, CollectiveKind::allreduce).total == 3 * 2 * psi);
    CHECK(collective_bytes(r1.plan, CollectiveKind::allgather).calls == 1);
    CHECK(collective_bytes(r2.plan, CollectiveKind::allgather).calls == 1);
}

TEST_CASE("use_multi_rank_bucket_allreduce=false: one reduce per owning rank, same gradient bytes") {
    SimResult r = run(zero_config(2, {{"use_multi_rank_bucket_allreduce", "false"}}));
    const Bytes red = collective_bytes(r.plan, CollectiveKind::reduce);
    CHECK(red.total == 2 * r.workload->param_count());
    CHECK(red.calls >= 8);
    CHECK(collective_bytes(r.plan, CollectiveKind::allreduce).calls == 0);
}

TEST_CASE("ZeRO-3 bytes per step: all-gathers 2 x 2 psi (less persistent tensors) + reduce-scatter 2 psi (§4.3, §8)") {
    // stage3_max_reuse_distance=0 and no prefetch: every layer is released
    // after forward and re-gathered (a prefetch that passes over a layer still
    // gathered would keep it: the prefetch test below).
    SimResult r = run(zero_config(3, {{"stage3_max_reuse_distance", "0"}, {"stage3_prefetch_bucket_size", "0"}}));
    const Stage3Sizes s = stage3_sizes(*r.workload, 8, 100'000);
    REQUIRE(s.persistent > 0);  // biases and layer norms
    const Bytes ag = collective_bytes(r.plan, CollectiveKind::allgather);
    const Bytes rs = collective_bytes(r.plan, CollectiveKind::reduce_scatter);
    // Forward and backward gathers, then one re-gather of the persistent tensors after the step.
    CHECK(ag.total == 2 * 2 * s.gathered + 2 * s.persist_padded);
    CHECK(rs.total == 2 * s.all_padded);
    CHECK(rs.calls == static_cast<int>(r.plan.buckets.size()));
    CHECK(collective_bytes(r.plan, CollectiveKind::allreduce).calls == 0);
    // Within a few elements per tensor of the paper's 3 x 2 psi.
    const std::int64_t psi = r.workload->param_count();
    CHECK(std::abs(double(ag.total + rs.total + 4 * s.persistent - 2 * s.persist_padded) - 3.0 * 2 * double(psi)) <
          3.0 * 2 * 8 * 1000);
}

TEST_CASE("ZeRO-3 ordering: each layer's all-gather ends before its forward or backward starts") {
    SimResult r = run(zero_config(3, {{"stage3_max_reuse_distance", "0"}}));
    int gated = 0;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.phase != Phase::forward && t.phase != Phase::backward) continue;
        bool has_gather = false;
        for (auto d : r.plan.deps_of(t)) {
            const Task& dep = r.plan.tasks[static_cast<std::size_t>(d)];
            if (dep.kind != TaskKind::collective || dep.collective != CollectiveKind::allgather) continue;
            has_gather = true;
            CHECK(r.schedule.timings[static_cast<std::size_t>(d)].end_ns <= r.schedule.timings[i].start_ns);
        }
        // Every layer holding a tensor above the persistence threshold waits for
        // its gather in forward, and in backward unless the prefetcher kept it
        // gathered from forward (the prefetch test below).
        std::int64_t largest = 0;
        for (const auto& p : r.workload->layers[static_cast<std::size_t>(t.layer)].params)
            largest = std::max(largest, p.numel());
        if (t.phase == Phase::forward)
            CHECK(has_gather == (largest > 100'000));
        else if (has_gather)
            CHECK(largest > 100'000);
        gated += has_gather;
    }
    CHECK(gated > 0);
    // At no time are more elements gathered than stage3_max_live_parameters allows plus one layer's overshoot.
    CHECK(at_peak(r, MemCategory::gathered) <= 2 * (1'000'000'000LL + r.workload->param_count()));
}

TEST_CASE("the optimizer step follows its gradients' reduction") {
    for (int stage : {1, 2, 3}) {
        SimResult r = run(zero_config(stage));
        std::int64_t reduced = 0, step_start = -1;
        for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
            const Task& t = r.plan.tasks[i];
            if (t.kind == TaskKind::collective && t.collective != CollectiveKind::allgather)
                reduced = std::max(reduced, r.schedule.timings[i].end_ns);
            if (is_optimizer(t) && step_start < 0) step_start = r.schedule.timings[i].start_ns;
        }
        INFO("stage " << stage);
        REQUIRE(step_start >= 0);
        CHECK(step_start >= reduced);
    }
}

TEST_CASE("offload: gradient copies precede the CPU step, which precedes the copy back") {
    for (auto knobs : std::vector<std::vector<std::pair<std::string, std::string>>>{
             {{"stage", "2"}, {"offload_optimizer", "cpu"}},
             {{"stage", "3"}, {"offload_optimizer", "cpu"}},
             {{"stage", "3"}, {"offload_optimizer", "nvme"}}}) {
        Config c = zero_config(2);
        for (auto& k : knobs) c.knobs.push_back(k);
        SimResult r = run(c);
        const int stage = std::stoi(knobs[0].second);
        INFO("stage " << stage << " offload_optimizer=" << knobs[1].second);
        std::int64_t last_d2h = -1, cpu_start = -1, cpu_end = -1, first_h2d_after = -1;
        std::int64_t d2h_bytes = 0, h2d_bytes = 0, nvme_read = 0;
        for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
            const Task& t = r.plan.tasks[i];
            const auto& tm = r.schedule.timings[i];
            if (t.transfer == Transfer::d2h) {
                last_d2h = std::max(last_d2h, tm.end_ns);
                d2h_bytes += t.bytes;
            }
            if (t.transfer == Transfer::nvme_read) nvme_read += t.bytes;
            if (t.kind == TaskKind::host_compute && t.elements > 0) {  // the CPU optimizer, not stage 3's hooks
                cpu_start = cpu_start < 0 ? tm.start_ns : std::min(cpu_start, tm.start_ns);
                cpu_end = std::max(cpu_end, tm.end_ns);
            }
            if (t.transfer == Transfer::h2d) {
                h2d_bytes += t.bytes;
                if (first_h2d_after < 0 || tm.start_ns < first_h2d_after) first_h2d_after = tm.start_ns;
            }
        }
        const std::int64_t psi = r.workload->param_count();
        const std::int64_t part = stage == 3 ? stage3_sizes(*r.workload, 8, 100'000).part : ceil_div(psi, 8);
        REQUIRE(cpu_start >= 0);
        CHECK(last_d2h <= cpu_start);
        CHECK(cpu_end <= first_h2d_after);
        CHECK(r.metrics.host_compute_s > 0);
        if (stage == 3) {
            CHECK(std::abs(double(d2h_bytes) - 4.0 * double(part)) <= 4.0 * 8 * double(r.plan.buckets.size()));
            CHECK(h2d_bytes == 2 * part);  // the updated bf16 partition, converted on the host (§4.3)
        } else {
            CHECK(d2h_bytes == 4 * part);
            CHECK(h2d_bytes == 4 * part);  // DeepSpeed 0.16.5 copies fp32 (§4.2 version note)
        }
        if (knobs[1].second == "nvme") CHECK(nvme_read == 12 * part);
        // Model states move to the host.
        CHECK(resident(r.plan, MemCategory::optimizer_states) == 0);
        CHECK(resident(r.plan, MemCategory::host) >= 16 * part - (knobs[1].second == "nvme" ? 12 * part : 0));
    }
}

TEST_CASE("offload_param: every fetch copies the layer's bf16 partition host-to-device, twice per step") {
    // No prefetch: no layer is kept from forward to backward (see the prefetch test).
    SimResult r = run(zero_config(3, {{"offload_optimizer", "cpu"},
                                      {"offload_param", "cpu"},
                                      {"stage3_max_reuse_distance", "0"},
                                      {"stage3_prefetch_bucket_size", "0"}}));
    const Stage3Sizes s = stage3_sizes(*r.workload, 8, 100'000);
    std::int64_t h2d = 0;
    for (const Task& t : r.plan.tasks)
        if (t.transfer == Transfer::h2d) h2d += t.bytes;
    CHECK(h2d ==
          2 * 2 * (s.gathered / 8));  // forward + backward, 2 B per partition element; the update stays on the host
    CHECK(resident(r.plan, MemCategory::parameters) == 2 * s.persistent);
    CHECK(resident(r.plan, MemCategory::host) == 18 * s.part);  // §8: 18 psi/N with optimizer and parameter offload
}

TEST_CASE("memory: model states equal the ZeRO paper's formulas (§4.4, §8)") {
    const int n = 8;
    SECTION("stage 1: 2 psi parameters + 2 psi gradients + 12 psi/N") {
        SimResult r = run(zero_config(1));
        const std::int64_t psi = r.workload->param_count();
        CHECK(resident(r.plan, MemCategory::parameters) == 2 * psi);
        CHECK(resident(r.plan, MemCategory::optimizer_states) == 12 * ceil_div(psi, n));
        // One ipg buffer without overlap_comm, allocated by backward, not resident.
        CHECK(resident(r.plan, MemCategory::buckets) == 0);
        // The peak is at the step, after the epilogue freed the ipg buffer.
        CHECK(at_peak(r, MemCategory::buckets) == 0);
        CHECK(at_peak(r, MemCategory::other) > 0);
        // The full bf16 gradients are held at the peak (end of backward).
        CHECK(at_peak(r, MemCategory::gradients) == 2 * psi);
        CHECK(at_peak(r, MemCategory::parameters) + at_peak(r, MemCategory::gradients) +
                  at_peak(r, MemCategory::optimizer_states) ==
              4 * psi + 12 * ceil_div(psi, n));
    }
    SECTION("stage 2: 2 psi + 14 psi/N; overlap_comm doubles the ipg buffer") {
        SimResult r = run(zero_config(2, {{"overlap_comm", "true"}}));
        const std::int64_t psi = r.workload->param_count();
        CHECK(resident(r.plan, MemCategory::parameters) == 2 * psi);
        CHECK(resident(r.plan, MemCategory::optimizer_states) == 12 * ceil_div(psi, n));
        // grads_in_partition and the ipg buffers are transient (allocated in backward).
        CHECK(resident(r.plan, MemCategory::gradients) == 0);
        CHECK(resident(r.plan, MemCategory::buckets) == 0);
        CHECK(at_peak(r, MemCategory::buckets) == 2 * 2 * kBucket);
        CHECK(at_peak(r, MemCategory::gradients) >= 2 * ceil_div(psi, n));
    }
    SECTION("stage 3: 16 psi/N plus the persistent tensors whole") {
        SimResult r = run(zero_config(3));
        const Stage3Sizes s = stage3_sizes(*r.workload, n, 100'000);
        CHECK(resident(r.plan, MemCategory::parameters) == 2 * s.part + 2 * s.persistent);
        CHECK(resident(r.plan, MemCategory::gradients) == 2 * s.part);
        CHECK(resident(r.plan, MemCategory::optimizer_states) == 12 * s.part);
        CHECK(resident(r.plan, MemCategory::buckets) == 2 * kBucket);
        CHECK(at_peak(r, MemCategory::gathered) > 0);
        // With no persistent tensors it is the paper's 16 psi/N, up to the padding of each tensor.
        SimResult none = run(zero_config(3, {{"stage3_param_persistence_threshold", "0"}}));
        const std::int64_t states = resident(none.plan, MemCategory::parameters) +
                                    resident(none.plan, MemCategory::gradients) +
                                    resident(none.plan, MemCategory::optimizer_states);
        const std::int64_t psi = none.workload->param_count();
        CHECK(states >= 16 * psi / n);
        CHECK(states - 16 * psi / n <= 16 * 400);  // < 1 element of padding per tensor
    }
    SECTION("no autocast weight copies: ZeRO keeps the model itself in bf16") {
        SimResult r = run(zero_config(2));
        CHECK(at_peak(r, MemCategory::other) <= 4 * ceil_div(r.workload->param_count(), n));
    }
}

TEST_CASE("overlap_comm: the stage-2 reduction overlaps backward only with overlap_comm") {
    SimResult blocking = run(zero_config(2, {{"overlap_comm", "false"}}));
    SimResult overlapped = run(zero_config(2, {{"overlap_comm", "true"}}));
    CHECK(blocking.metrics.overlap_fraction == Approx(0.0).margin(1e-9));
    CHECK(overlapped.metrics.overlap_fraction > 0.1);
    CHECK(overlapped.metrics.step_time_s < blocking.metrics.step_time_s);
}

TEST_CASE("llama2-70b with ZeRO-1 on 8 GPUs does not fit") {
    Config c;
    c.model = "llama2-70b";
    c.strategy = "deepspeed";
    c.topology = {1, 8};
    c.micro_batch = 1;
    c.seq_len = 512;
    c.precision = Precision::bf16_mixed;
    c.knobs = {{"stage", "1"}};
    SimResult r = run(c);
    CHECK_FALSE(r.metrics.fits);
    // 2 psi parameters alone are ~138 GB.
    CHECK(r.metrics.peak_memory_bytes > 2 * r.workload->param_count());
}

TEST_CASE("ZeRO simulations are deterministic") {
    for (int stage : {1, 2, 3}) {
        Config c = zero_config(stage, {{"offload_optimizer", stage == 3 ? "nvme" : "cpu"}});
        c.grad_accum = 2;
        SimResult a = run(c), b = run(c);
        REQUIRE(a.plan.tasks.size() == b.plan.tasks.size());
        CHECK(a.schedule.makespan_ns == b.schedule.makespan_ns);
        CHECK(a.schedule.peak_memory_bytes == b.schedule.peak_memory_bytes);
        for (std::size_t i = 0; i < a.schedule.timings.size(); ++i) {
            CHECK(a.schedule.timings[i].start_ns == b.schedule.timings[i].start_ns);
            if (a.schedule.timings[i].start_ns != b.schedule.timings[i].start_ns) break;
        }
    }
}

TEST_CASE("one rank: ZeRO runs without collectives") {
    for (int stage : {1, 2, 3}) {
        Config c = zero_config(stage);
        c.topology = {1, 1};
        SimResult r = run(c);
        CHECK(r.metrics.collectives.empty());
    }
}

TEST_CASE("contradictory ZeRO knobs are ConfigErrors that name the knob") {
    auto message = [](const Config& c) -> std::string {
        try {
            run(c);
        } catch (const ConfigError& e) {
            return e.what();
        }
        return "no error";
    };
    CHECK_THAT(message(zero_config(2, {{"offload_param", "cpu"}})), Catch::Contains("offload_param"));
    CHECK_THAT(message(zero_config(1, {{"offload_optimizer", "nvme"}})), Catch::Contains("offload_optimizer=nvme"));
    CHECK_THAT(message(zero_config(0)), Catch::Contains("stage"));
    CHECK_THAT(message(zero_config(4)), Catch::Contains("stage"));
    CHECK_THAT(message(zero_config(2, {{"overlap_comm", "maybe"}})), Catch::Contains("overlap_comm"));
    Config sgd = zero_config(2, {{"offload_optimizer", "cpu"}});
    sgd.optimizer = OptimizerKind::sgd;
    CHECK_THAT(message(sgd), Catch::Contains("offload_optimizer"));
}

namespace {

Config llama(int stage, std::vector<std::pair<std::string, std::string>> knobs = {}) {
    Config c;
    c.model = "llama2-7b";
    c.strategy = "deepspeed";
    c.topology = {1, 8};
    c.micro_batch = 1;
    c.precision = Precision::bf16_mixed;
    c.knobs = {{"stage", std::to_string(stage)}};
    for (auto& k : knobs) c.knobs.push_back(std::move(k));
    return c;
}

int allgathers(const SimResult& r, Phase after_phase_of_consumer) {
    // All-gathers some compute task of the given phase waits for.
    int count = 0;
    for (const Task& t : r.plan.tasks) {
        if (t.kind != TaskKind::compute || t.phase != after_phase_of_consumer) continue;
        for (auto d : r.plan.deps_of(t)) {
            const Task& dep = r.plan.tasks[static_cast<std::size_t>(d)];
            count += dep.kind == TaskKind::collective && dep.collective == CollectiveKind::allgather;
        }
    }
    return count;
}

}  // namespace

TEST_CASE("ZeRO-1/2 ipg buffers and grads_in_partition are backward transients, not resident (§4.2, §8)") {
    for (int stage : {1, 2}) {
        for (const char* overlap : {"false", "true"}) {
            INFO("stage " << stage << " overlap_comm=" << overlap);
            Config c = llama(stage, {{"overlap_comm", overlap}});
            c.grad_accum = 2;
            SimResult r = run(c);
            const std::int64_t ipg = 2 * 500'000'000LL * (std::string(overlap) == "true" ? 2 : 1);
            CHECK(resident(r.plan, MemCategory::buckets) == 0);
            CHECK(resident(r.plan, MemCategory::gradients) == 0);
            // Allocated by a backward task (the first of each reducing micro-step), freed by a reduction.
            std::int64_t alloc_bwd = 0, freed_by_collective = 0, other = 0;
            for (const Task& t : r.plan.tasks)
                for (const MemoryDelta& d : r.plan.memory_of(t)) {
                    if (d.category != MemCategory::buckets) continue;
                    if (d.bytes > 0 && t.phase == Phase::backward)
                        alloc_bwd += d.bytes;
                    else if (d.bytes < 0 && t.kind == TaskKind::collective)
                        freed_by_collective -= d.bytes;
                    else
                        other += d.bytes;
                }
            const int reducing = stage == 2 ? 2 : 1;  // stage 1 reduces at the boundary only
            CHECK(alloc_bwd == reducing * ipg);
            CHECK(freed_by_collective == reducing * ipg);
            CHECK(other == 0);
        }
    }
    SECTION("no ipg buffer while forward runs: it is allocated after the last forward task of the micro-step") {
        for (int stage : {1, 2}) {
            Config c = llama(stage);
            c.micro_batch = 4;
            SimResult r = run(c);
            INFO("stage " << stage);
            std::int64_t forward_end = 0, first_alloc = -1;
            for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
                const Task& t = r.plan.tasks[i];
                if (t.phase == Phase::forward) forward_end = std::max(forward_end, r.schedule.timings[i].end_ns);
                for (const MemoryDelta& d : r.plan.memory_of(t))
                    if (d.category == MemCategory::buckets && d.bytes > 0 && first_alloc < 0)
                        first_alloc = r.schedule.timings[i].start_ns;
            }
            REQUIRE(first_alloc >= 0);
            CHECK(first_alloc >= forward_end);
            CHECK(at_peak(r, MemCategory::buckets) <= 2 * 500'000'000LL);
        }
    }
}

TEST_CASE("llama2-7b on 8 GPUs: peak(stage 1) >= peak(stage 2) >= peak(stage 3) when model states dominate") {
    // Short sequences: model states dominate the peak. At 4096 tokens the
    // activations dominate and stage 2's peak (its Psi/N partition buffer is
    // allocated at the first reduction on the last rank, and allreduce_bucket's
    // flat copy of a 5e8-element bucket is alive during each reduction, while
    // activations are still held) is within 0.2 GiB plus that copy of stage 1's,
    // which reduces after backward (overlap_comm=false).
    auto peak = [](int stage, std::int64_t seq) {
        Config c = llama(stage);
        c.seq_len = seq;
        return run(c).metrics.peak_memory_bytes;
    };
    CHECK(peak(1, 512) >= peak(2, 512));
    CHECK(peak(2, 512) >= peak(3, 512));
    CHECK(std::abs(double(peak(1, 4096) - peak(2, 4096))) < 0.2 * 1024 * 1024 * 1024 + 2 * 500'000'000.0);
    CHECK(peak(2, 4096) >= peak(3, 4096));
}

TEST_CASE("ZeRO-3 pays host hook time per submodule: slower than ZeRO-2 with overlap_comm (llama2-7b, 8xA100)") {
    SimResult z2 = run(llama(2, {{"overlap_comm", "true"}}));
    SimResult z3 = run(llama(3));
    CHECK(z3.metrics.step_time_s > z2.metrics.step_time_s);
    int hooks = 0;
    for (const Task& t : z3.plan.tasks) hooks += t.kind == TaskKind::host_compute;
    CHECK(hooks == 2 * static_cast<int>(z3.workload->layers.size()));  // one per layer, forward and backward
}

TEST_CASE("stage3_max_reuse_distance: the last layers of forward stay gathered for backward") {
    // Without prefetch, so that only the reuse distance keeps layers (the
    // prefetcher keeps more: the prefetch test below).
    SimResult none = run(llama(3, {{"stage3_max_reuse_distance", "0"}, {"stage3_prefetch_bucket_size", "0"}}));
    SimResult deflt = run(llama(3, {{"stage3_prefetch_bucket_size", "0"}}));
    const auto& layers = deflt.workload->layers;
    // Expected from the rule: layer l is kept iff 2 x (elements of the layers after it) < 1e9.
    int gathered_layers = 0, kept = 0;
    std::int64_t later = 0;
    for (auto l = layers.rbegin(); l != layers.rend(); ++l) {
        std::int64_t largest = 0;
        for (const auto& p : l->params) largest = std::max(largest, p.numel());
        if (largest > 100'000) {
            ++gathered_layers;
            kept += 2 * later < 1'000'000'000LL;
        }
        later += l->param_count();
    }
    REQUIRE(kept > 0);
    REQUIRE(kept < gathered_layers);
    CHECK(allgathers(none, Phase::forward) == gathered_layers);
    CHECK(allgathers(none, Phase::backward) == gathered_layers);
    CHECK(allgathers(deflt, Phase::forward) == gathered_layers);
    CHECK(allgathers(deflt, Phase::backward) == gathered_layers - kept);
    CHECK(collective_bytes(deflt.plan, CollectiveKind::allgather).total <
          collective_bytes(none.plan, CollectiveKind::allgather).total);
    // Kept layers stay gathered: more gathered memory at the peak.
    CHECK(at_peak(deflt, MemCategory::gathered) >= at_peak(none, MemCategory::gathered));
}

TEST_CASE("offload_param with pageable memory blocks the host, and pinned copies overlap") {
    auto time = [](bool param, bool pinned) {
        std::vector<std::pair<std::string, std::string>> k = {{"offload_optimizer", "cpu"},
                                                              {"pin_memory", pinned ? "true" : "false"}};
        if (param) k.emplace_back("offload_param", "cpu");
        return run(llama(3, k)).metrics.step_time_s;
    };
    const double opt_pageable = time(false, false), both_pageable = time(true, false);
    const double opt_pinned = time(false, true), both_pinned = time(true, true);
    CHECK(both_pageable > opt_pageable);
    CHECK(both_pinned < both_pageable);
    CHECK(opt_pinned <= opt_pageable);
    // Pinned parameter copies overlap compute, and the updated partition stays on
    // the host (no 2 Psi/N H2D after the CPU step): no slower than optimizer offload alone.
    CHECK(both_pinned <= opt_pinned);
}

TEST_CASE("ZeRO-3 prefetch: a use the prefetcher passes over while the layer is gathered keeps it for backward") {
    // DeepSpeed's fetch_sub_module skips trace entries whose parameters are not
    // NOT_AVAILABLE and records the skipped use; __params_to_release then keeps
    // them gathered, so their backward needs no all-gather. With a prefetch
    // window larger than the model, every layer's backward use is passed over
    // during forward; with none, every layer is gathered again.
    const std::vector<std::pair<std::string, std::string>> common = {{"stage3_max_reuse_distance", "0"},
                                                                     {"stage3_param_persistence_threshold", "0"},
                                                                     {"stage3_max_live_parameters", "100000000000"}};
    auto with = [&](const char* prefetch) {
        auto k = common;
        k.emplace_back("stage3_prefetch_bucket_size", prefetch);
        return run(zero_config(3, k));
    };
    const SimResult wide = with("100000000000"), off = with("0");
    int layers = 0;
    for (const auto& l : wide.workload->layers) layers += l.param_count() > 0;
    CHECK(allgathers(off, Phase::forward) == layers);
    CHECK(allgathers(off, Phase::backward) == layers);
    CHECK(allgathers(wide, Phase::forward) == layers);
    CHECK(allgathers(wide, Phase::backward) == 0);
    // Held layers stay gathered from forward to backward: more gathered memory
    // at the peak, and half the all-gather bytes.
    CHECK(at_peak(wide, MemCategory::gathered) > at_peak(off, MemCategory::gathered));
    CHECK(2 * collective_bytes(wide.plan, CollectiveKind::allgather).total ==
          collective_bytes(off.plan, CollectiveKind::allgather).total);
}

namespace {

// The highest sum of a category's deltas, walking the plan in issue order
// (allocations at a task's start, its frees at its end).
std::int64_t max_in_issue_order(const Plan& p, MemCategory c) {
    std::int64_t now = resident(p, c), best = now;
    for (const Task& t : p.tasks) {
        for (const MemoryDelta& d : p.memory_of(t))
            if (d.category == c && d.bytes > 0) now += d.bytes;
        best = std::max(best, now);
        for (const MemoryDelta& d : p.memory_of(t))
            if (d.category == c && d.bytes < 0) now += d.bytes;
    }
    return best;
}

}  // namespace

TEST_CASE(
    "ZeRO-1 with overlap_comm keeps only its partition of the 16-bit gradients at the boundary, as stage 2 "
    "(reduce_independent_p_g_buckets_and_remove_grads)") {
    // stage_1_and_2.py: with overlap_comm and contiguous_gradients the hooks copy
    // each gradient into the ipg bucket and free it; copy_grads_in_partition keeps
    // this rank's share (Psi/N x 2 B). Without overlap_comm nothing is freed
    // before the step.
    const SimResult hooks = run(zero_config(1, {{"overlap_comm", "true"}}));
    const SimResult stage2 = run(zero_config(2, {{"overlap_comm", "true"}}));
    const SimResult no_hooks = run(zero_config(1, {{"overlap_comm", "false"}}));
    const std::int64_t psi = hooks.workload->param_count();
    const std::int64_t partition = 2 * ceil_div(psi, 8);
    std::int64_t largest_layer = 0;
    for (const auto& l : hooks.workload->layers) largest_layer = std::max(largest_layer, 2 * l.param_count());
    CHECK(max_in_issue_order(hooks.plan, MemCategory::gradients) <= partition + largest_layer);
    CHECK(max_in_issue_order(hooks.plan, MemCategory::gradients) ==
          max_in_issue_order(stage2.plan, MemCategory::gradients));
    CHECK(max_in_issue_order(no_hooks.plan, MemCategory::gradients) >= 2 * psi);
    CHECK(hooks.metrics.peak_memory_bytes < no_hooks.metrics.peak_memory_bytes);
    // Every gradient allocation is freed: by its hook, or with the partition at the step.
    std::int64_t net = 0;
    for (const MemoryDelta& d : hooks.plan.memory)
        if (d.category == MemCategory::gradients) net += d.bytes;
    CHECK(net == 0);

    SECTION("with accumulation the hooks wait for the boundary: full gradients accumulate before it") {
        Config c = zero_config(1, {{"overlap_comm", "true"}});
        c.grad_accum = 2;
        const SimResult accum = run(c);
        CHECK(max_in_issue_order(accum.plan, MemCategory::gradients) >= 2 * psi);
        std::int64_t left = 0;
        for (const MemoryDelta& d : accum.plan.memory)
            if (d.category == MemCategory::gradients) left += d.bytes;
        CHECK(left == 0);
    }
}

TEST_CASE("ZeRO-3's step frees the persistent parameters and _post_step gathers them back one tensor at a time") {
    SimResult r = run(zero_config(3));
    const Stage3Sizes s = stage3_sizes(*r.workload, 8, 100'000);
    std::vector<std::int64_t> expected;  // padded bytes of each persistent tensor, in parameter order
    for (const auto& layer : r.workload->layers)
        for (const auto& p : layer.params)
            if (p.numel() <= 100'000) expected.push_back(2 * ceil_div(p.numel(), 8) * 8);
    REQUIRE(expected.size() > 50);  // gpt2-medium: 2 norms and 4 biases per block
    std::size_t last_optimizer = 0;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i)
        if (is_optimizer(r.plan.tasks[i])) last_optimizer = i;
    std::vector<std::int64_t> after_step;
    std::int64_t regathered = 0;
    for (std::size_t i = last_optimizer + 1; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.kind != TaskKind::collective || t.collective != CollectiveKind::allgather) continue;
        after_step.push_back(t.bytes);
        for (const MemoryDelta& d : r.plan.memory_of(t))
            if (d.category == MemCategory::parameters) regathered += d.bytes;
    }
    CHECK(after_step == expected);
    CHECK(regathered == 2 * s.persistent);
    // ... after the step released them: the parameters end the step as they began.
    std::int64_t net = 0;
    for (const MemoryDelta& d : r.plan.memory)
        if (d.category == MemCategory::parameters) net += d.bytes;
    CHECK(net == 0);
    // Latency-bound: the many small gathers cost more than one flat gather of the same bytes would.
    const auto cal = calib::load_hardware("a100-sxm");
    double each = 0;
    for (std::int64_t b : expected) each += sim::CostModel(cal).collective_ns(CollectiveKind::allgather, b, {8, 1});
    CHECK(each > 10 * sim::CostModel(cal).collective_ns(CollectiveKind::allgather, 2 * s.persist_padded, {8, 1}));
}

TEST_CASE("ZeRO-1/2's allreduce_bucket flattens each bucket into a new tensor while it is reduced") {
    for (const char* per_owner : {"true", "false"}) {
        INFO("use_multi_rank_bucket_allreduce=" << per_owner);
        SimResult r = run(zero_config(2, {{"use_multi_rank_bucket_allreduce", per_owner}}));
        std::vector<std::int64_t> flat(r.plan.buckets.size(), 0), held(r.plan.buckets.size(), 0);
        for (const Task& t : r.plan.tasks) {
            if (t.kind != TaskKind::collective || t.bucket < 0) continue;
            for (const MemoryDelta& d : r.plan.memory_of(t))
                if (d.category == MemCategory::other)
                    (d.bytes > 0 ? flat : held)[static_cast<std::size_t>(t.bucket)] += d.bytes;
        }
        for (const auto& b : r.plan.buckets) {
            INFO("bucket " << b.index);
            CHECK(flat[static_cast<std::size_t>(b.index)] == b.bytes);
            CHECK(held[static_cast<std::size_t>(b.index)] == -b.bytes);
        }
    }
}
