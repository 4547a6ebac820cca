// DDP's memory effects (strategy-semantics.md §1.5, §6) and buffer broadcasts (§1.8).
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config gpt2_config() {
    Config c;
    c.model = "gpt2-medium";
    c.topology = {1, 8};
    c.micro_batch = 4;
    c.seq_len = 1024;
    return c;
}

std::int64_t category(const Metrics& m, MemCategory c) {
    return m.peak_breakdown[static_cast<std::size_t>(c)];
}

}  // namespace

TEST_CASE("model states at the peak: fp32 parameters, Adam's two moments, one gradient copy per bucket") {
    const auto cal = calib::load_hardware("a100-sxm");
    SimResult r = simulate(gpt2_config(), cal);
    const std::int64_t psi = r.workload->param_count();
    CHECK(category(r.metrics, MemCategory::parameters) == 4 * psi);
    CHECK(category(r.metrics, MemCategory::optimizer_states) == 8 * psi);
    CHECK(category(r.metrics, MemCategory::buckets) == 4 * psi);
    CHECK(category(r.metrics, MemCategory::activations) > 0);
}

TEST_CASE("gradient_as_bucket_view saves one gradient copy when gradients outweigh activations") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    // Small activations: the peak is at the end of backward, buckets plus .grad.
    c.micro_batch = 1;
    c.seq_len = 64;
    SimResult copies = simulate(c, cal);
    c.knobs = {{"gradient_as_bucket_view", "true"}};
    SimResult views = simulate(c, cal);
    const std::int64_t psi = views.workload->param_count();
    CHECK(category(views.metrics, MemCategory::buckets) == 0);
    CHECK(category(views.metrics, MemCategory::gradients) == 4 * psi);  // the views live in the buckets
    // Without views the buckets are resident and .grad is allocated during backward on top of them,
    // as activations are freed: the saving is a full gradient copy less what activations hid of it.
    CHECK(copies.metrics.peak_memory_bytes > views.metrics.peak_memory_bytes);
    CHECK(copies.metrics.peak_memory_bytes - views.metrics.peak_memory_bytes <= 4 * psi);
    CHECK(copies.metrics.peak_memory_bytes - views.metrics.peak_memory_bytes > 3 * psi);
    // And the finalize copy of buckets back into .grad disappears.
    CHECK(views.metrics.step_time_s < copies.metrics.step_time_s);
}

TEST_CASE("with large activations the peak is at the start of backward, where views save nothing") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    SimResult copies = simulate(c, cal);
    c.knobs = {{"gradient_as_bucket_view", "true"}};
    SimResult views = simulate(c, cal);
    CHECK(category(copies.metrics, MemCategory::activations) > 4 * copies.workload->param_count());
    CHECK(copies.metrics.peak_memory_bytes == views.metrics.peak_memory_bytes);
}

TEST_CASE("autocast keeps low-precision weight copies alive until each layer's backward") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    c.precision = Precision::bf16_mixed;
    SimResult r = simulate(c, cal);
    // At the peak (start of backward) every layer's bf16 weights are held: 2 bytes per parameter.
    CHECK(category(r.metrics, MemCategory::other) == 2 * r.workload->param_count());
}

TEST_CASE("plain SGD keeps no optimizer state") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    c.optimizer = OptimizerKind::sgd;
    CHECK(category(simulate(c, cal).metrics, MemCategory::optimizer_states) == 0);
}

TEST_CASE("one rank: the reducer still copies gradients into buckets and back, and its allreduces cost nothing") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    c.topology = {1, 1};
    SimResult r = simulate(c, cal);
    // torch's Reducer runs at world size 1: every bucket is allreduced over a group of one ...
    std::size_t allreduces = 0;
    for (const Task& t : r.plan.tasks)
        if (t.kind == TaskKind::collective) {
            CHECK(t.collective == CollectiveKind::allreduce);
            CHECK(r.plan.groups[static_cast<std::size_t>(t.group)].size == 1);
            CHECK(t.bucket >= 0);
            ++allreduces;
        }
    CHECK(allreduces == r.plan.buckets.size());
    CHECK(r.metrics.exposed_comm_s == 0);  // ... which moves nothing
    // ... after backward copied each gradient into its bucket (read and write), and the buckets are copied
    // back into .grad before the step (read and write every gradient).
    const std::int64_t psi = r.workload->param_count();
    std::int64_t copy_back = 0, backward_extra = 0;
    for (const Task& t : r.plan.tasks) {
        if (t.phase == Phase::gradient_copy) copy_back += t.bytes;
        if (t.kind == TaskKind::compute && t.phase == Phase::backward && t.layer >= 0) backward_extra += t.bytes;
    }
    CHECK(copy_back == 2 * psi * 4);
    CHECK(backward_extra == 2 * psi * 4);
    // With gradient_as_bucket_view the gradients are the buckets: no copy back, a shorter step.
    Config view = c;
    view.knobs = {{"gradient_as_bucket_view", "true"}};
    SimResult v = simulate(view, cal);
    for (const Task& t : v.plan.tasks) CHECK(t.phase != Phase::gradient_copy);
    CHECK(v.metrics.step_time_s < r.metrics.step_time_s);
}

TEST_CASE("torch's CPU default: gradients freed by zero_grad are faulted in again, at the first-touch rate") {
    auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    const SimResult plain = simulate(c, cal);  // a preset: no first-touch rate, no cost
    cal.host.first_touch_gbps = 2.0;
    const SimResult fresh = simulate(c, cal);
    Config reuse = c;
    reuse.host_memory_reuse = true;  // an allocator that keeps freed memory (dtsim's executor)
    const SimResult kept = simulate(reuse, cal);
    CHECK(fresh.plan.fresh_gradient_pages);
    CHECK_FALSE(kept.plan.fresh_gradient_pages);
    CHECK(kept.metrics.step_time_s == plain.metrics.step_time_s);
    // Each backward task that allocates its layer's gradients pays bytes / rate; nothing else changes.
    const auto base = CostModel(calib::load_hardware("a100-sxm")).price(plain.plan, *plain.workload);
    const auto paid = CostModel(cal).price(fresh.plan, *fresh.workload);
    REQUIRE(base.size() == paid.size());
    std::int64_t gradient_bytes = 0;
    for (std::size_t i = 0; i < paid.size(); ++i) {
        std::int64_t allocated = 0;
        for (const auto& d : fresh.plan.memory_of(fresh.plan.tasks[i]))
            if (d.category == MemCategory::gradients && d.bytes > 0) allocated += d.bytes;
        gradient_bytes += allocated;
        const std::int64_t expected = base[i] + std::llround(static_cast<double>(allocated) / 2.0);
        CHECK(std::abs(paid[i] - expected) <= 1);  // each price rounds to the nanosecond once
    }
    CHECK(gradient_bytes == fresh.workload->param_count() * 4);
    CHECK(fresh.metrics.step_time_s > plain.metrics.step_time_s);

    SECTION("gradient_as_bucket_view: each gradient is still born a fresh tensor, copied into its view and freed") {
        Config view = c;
        view.knobs = {{"gradient_as_bucket_view", "true"}};
        const SimResult v = simulate(view, cal);
        std::int64_t allocated = 0, net = 0;
        for (const Task& t : v.plan.tasks)
            for (const auto& d : v.plan.memory_of(t))
                if (d.category == MemCategory::gradients) {
                    if (d.bytes > 0) allocated += d.bytes;
                    net += d.bytes;
                }
        CHECK(allocated == v.workload->param_count() * 4);  // every gradient once, as without views
        CHECK(net == 0);                                     // each freed by the same backward task
        Config view_kept = view;
        view_kept.host_memory_reuse = true;
        CHECK(v.metrics.step_time_s > simulate(view_kept, cal).metrics.step_time_s);
    }
}

TEST_CASE("CPU ranks share their node's memory: fewer ranks a node get min(one rank alone, the node's total)") {
    calib::Calibration cal = calib::load_hardware("a100-sxm");
    cal.provenance.backend = "cpu-mpi-openblas";
    cal.gpus_per_node = 4;  // measured with four ranks busy on the node
    cal.device.mem_bw_gbps = 10;
    cal.host.first_touch_gbps = 1.0;
    const calib::Calibration busy_only = cal;  // a calibration from before the one-rank figures
    cal.host.mem_bw_one_rank_gbps = 25;
    cal.host.first_touch_one_rank_gbps = 1.5;
    // One rank a node: it has the node's memory to itself, but no more than one rank alone moves
    // (min(25, 4 x 10) and min(1.5, 4 x 1.0)).
    const auto one = with_node_share(cal, 1);
    REQUIRE(one);
    CHECK(one->device.mem_bw_gbps == 25);
    CHECK(one->host.first_touch_gbps == 1.5);
    // Two a node share the node's 40 GB/s: 20 each, below one rank alone.
    const auto two = with_node_share(cal, 2);
    REQUIRE(two);
    CHECK(two->device.mem_bw_gbps == 20);
    CHECK(two->host.first_touch_gbps == 1.5);
    // As many ranks as the calibration measured, GPUs, and calibrations without one-rank figures: unchanged.
    CHECK_FALSE(with_node_share(cal, 4));
    CHECK_FALSE(with_node_share(busy_only, 1));
    calib::Calibration gpu = cal;
    gpu.provenance.backend = "cuda-nccl-cublas";
    CHECK_FALSE(with_node_share(gpu, 1));
    // simulate prices a one-rank run at those rates, faster than at the busy node's.
    Config c;
    c.model = "mlp-4x512";
    c.topology = {1, 1};
    c.micro_batch = 16;
    c.optimizer = OptimizerKind::sgd;
    const SimResult shared = simulate(c, cal);
    CHECK(shared.duration_ns == simulate(c, *one).duration_ns);
    CHECK(shared.metrics.step_time_s < simulate(c, busy_only).metrics.step_time_s);
    c.topology = {1, 4};
    CHECK(simulate(c, cal).duration_ns == simulate(c, busy_only).duration_ns);
}

TEST_CASE("broadcast_buffers: BatchNorm buffers are broadcast once per step, before the first forward") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c;
    c.model = "resnet50";
    c.topology = {1, 8};
    c.micro_batch = 32;
    c.grad_accum = 3;
    SimResult r = simulate(c, cal);
    std::int64_t buffers = 0;
    for (const auto& layer : r.workload->layers) buffers += layer.buffer_bytes;
    REQUIRE(buffers > 0);
    int broadcasts = 0;
    for (std::size_t i = 0; i < r.plan.tasks.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        if (t.kind != TaskKind::collective || t.collective != CollectiveKind::broadcast) continue;
        ++broadcasts;
        CHECK(t.bytes == buffers);
        CHECK(t.micro_step == 0);  // later micro-steps follow a no_sync forward (§1.8)
        // The first forward waits for it.
        for (std::size_t j = 0; j < r.plan.tasks.size(); ++j)
            if (r.plan.tasks[j].phase == Phase::forward) {
                CHECK(r.schedule.timings[j].start_ns >= r.schedule.timings[i].end_ns);
                break;
            }
    }
    CHECK(broadcasts == 1);
    c.knobs = {{"broadcast_buffers", "false"}};
    for (const auto& col : simulate(c, cal).metrics.collectives) CHECK(col.kind != CollectiveKind::broadcast);
}

TEST_CASE("find_unused_parameters searches the autograd graph on the CPU before backward, every step") {
    const auto cal = calib::load_hardware("a100-sxm");
    Config c = gpt2_config();
    SimResult plain = simulate(c, cal);
    c.knobs = {{"find_unused_parameters", "true"}};
    SimResult searched = simulate(c, cal);
    std::int64_t nodes = 0;
    for (const auto& l : searched.workload->layers)
        nodes += static_cast<std::int64_t>(l.forward.size() + l.params.size());
    int searches = 0;
    for (std::size_t i = 0; i < searched.plan.tasks.size(); ++i) {
        const Task& t = searched.plan.tasks[i];
        if (t.kind != TaskKind::host_compute) continue;
        ++searches;
        CHECK(searched.duration_ns[i] == nodes * 1000);  // one traversal step per autograd node
        for (std::size_t j = 0; j < searched.plan.tasks.size(); ++j)
            if (searched.plan.tasks[j].phase == Phase::backward) {
                CHECK(searched.schedule.timings[j].start_ns >= searched.schedule.timings[i].end_ns);
                break;
            }
    }
    CHECK(searches == 1);
    for (const auto& t : plain.plan.tasks) CHECK(t.kind != TaskKind::host_compute);
}

namespace {

// The plan's optimizer-step task (the only optimizer pass under DDP and FSDP).
const Task& optimizer_task(const Plan& plan) {
    const Task* found = nullptr;
    for (const Task& t : plan.tasks)
        if (t.phase == Phase::optimizer) {
            REQUIRE(found == nullptr);
            found = &t;
        }
    REQUIRE(found != nullptr);
    return *found;
}

// What the task allocates of `c` when it starts (and must free when it ends).
std::int64_t allocated(const Plan& plan, const Task& t, MemCategory c) {
    std::int64_t up = 0, down = 0;
    for (const MemoryDelta& d : plan.memory_of(t))
        if (d.category == c) (d.bytes > 0 ? up : down) += d.bytes;
    CHECK(up + down == 0);  // a temporary: gone when the step ends
    return up;
}

}  // namespace

TEST_CASE(
    "torch Adam (adam.py): foreach holds one parameter-size temporary, the for-loop three of the largest "
    "tensor, fused none, and 72 B per parameter unfused, 28 fused") {
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = gpt2_config();
    c.model = "gpt2-xl";
    c.micro_batch = 1;
    c.precision = Precision::bf16_mixed;
    const auto w = build_workload(c);
    const std::int64_t psi = w.param_count();
    std::int64_t largest = 0, tensors = 0;
    for (const auto& l : w.layers)
        for (const auto& p : l.params) {
            std::int64_t numel = 1;
            for (auto d : p.shape) numel *= d;
            largest = std::max(largest, numel);
            ++tensors;
        }
    REQUIRE(tensors > 100);

    SimResult foreach_run = simulate(c, cal);  // torch's default on CUDA
    const Plan& fp = foreach_run.plan;
    const Task& f = optimizer_task(fp);
    CHECK(f.optimizer_impl == OptimizerImpl::foreach);
    CHECK(f.bytes == 72 * psi);
    CHECK(allocated(fp, f, MemCategory::other) == 4 * psi);  // _foreach_sqrt over every exp_avg_sq

    c.knobs = {{"foreach", "false"}};
    SimResult loop_run = simulate(c, cal);
    const Task& l = optimizer_task(loop_run.plan);
    CHECK(l.optimizer_impl == OptimizerImpl::for_loop);
    CHECK(l.bytes == 72 * psi);
    CHECK(allocated(loop_run.plan, l, MemCategory::other) == 3 * 4 * largest);
    CHECK(l.launches == 7 * tensors - 1);  // seven kernels per tensor

    c.knobs = {{"fused", "true"}};
    SimResult fused_run = simulate(c, cal);
    const Task& u = optimizer_task(fused_run.plan);
    CHECK(u.optimizer_impl == OptimizerImpl::fused);
    CHECK(u.bytes == 28 * psi);
    CHECK(allocated(fused_run.plan, u, MemCategory::other) == 0);
    CHECK(fused_run.metrics.step_time_s < foreach_run.metrics.step_time_s);

    // At the step DDP holds fp32 parameters, .grad, the buckets and Adam's moments
    // (20 B per parameter) plus foreach's temporary: the peak cannot be lower.
    CHECK(foreach_run.metrics.peak_memory_bytes >= 24 * psi);
    CHECK(foreach_run.metrics.peak_memory_bytes > fused_run.metrics.peak_memory_bytes);
    CHECK(foreach_run.metrics.peak_memory_bytes - fused_run.metrics.peak_memory_bytes <= 4 * psi);

    c.knobs = {{"fused", "true"}, {"foreach", "true"}};
    CHECK_THROWS_WITH(simulate(c, cal), Catch::Contains("cannot be `True` together"));
}

TEST_CASE("torch AdamW: one more pass over the parameters (its weight decay) unless fused, and Adam's state") {
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = gpt2_config();
    c.precision = Precision::bf16_mixed;
    const SimResult adam = simulate(c, cal);
    c.decoupled_weight_decay = true;
    CHECK(optimizer_name(c) == "adamw");
    const SimResult adamw = simulate(c, cal);
    const std::int64_t psi = adam.workload->param_count();
    const Task& a = optimizer_task(adam.plan);
    const Task& w = optimizer_task(adamw.plan);
    // _foreach_mul_(params, 1 - lr * weight_decay): read and write 4 bytes a parameter.
    CHECK(w.bytes - a.bytes == 8 * psi);
    CHECK(w.launches > a.launches);
    CHECK(adamw.metrics.peak_memory_bytes == adam.metrics.peak_memory_bytes);
    CHECK(adamw.metrics.step_time_s > adam.metrics.step_time_s);
    // fused=True applies the decay inside its one kernel.
    c.knobs = {{"fused", "true"}};
    const SimResult fused = simulate(c, cal);
    CHECK(optimizer_task(fused.plan).bytes == 28 * psi);
    // Plain Adam's name and the reports' field.
    c.decoupled_weight_decay = false;
    CHECK(optimizer_name(c) == "adam");
}

TEST_CASE("an optimizer step updates in place: it runs at the calibration's in-place speedup, other passes do not") {
    auto cal = calib::load_hardware("a100-sxm");
    const Config c = gpt2_config();
    const SimResult r = simulate(c, cal);
    const auto base = CostModel(cal).price(r.plan, *r.workload);
    cal.device.in_place_speedup = 1.5;  // a CPU's write-allocate: out-of-place passes move a third more
    const auto faster = CostModel(cal).price(r.plan, *r.workload);
    REQUIRE(base.size() == faster.size());
    const double overhead_ns = cal.device.kernel_overhead_us * 1e3;
    int optimizer_passes = 0, copies_back = 0;
    for (std::size_t i = 0; i < base.size(); ++i) {
        const Task& t = r.plan.tasks[i];
        INFO("task " << i);
        if (t.kind == TaskKind::compute && t.phase == Phase::optimizer) {
            ++optimizer_passes;
            // Its bytes at 1.5x the rate; its launches cost what they did.
            const double launches_ns = (1 + t.launches) * overhead_ns;
            CHECK(static_cast<double>(faster[i]) ==
                  Approx((static_cast<double>(base[i]) - launches_ns) / 1.5 + launches_ns).margin(2));
        } else {
            if (t.phase == Phase::gradient_copy) ++copies_back;  // an out-of-place copy into .grad
            CHECK(faster[i] == base[i]);
        }
    }
    CHECK(optimizer_passes >= 1);
    CHECK(copies_back >= 1);
}
