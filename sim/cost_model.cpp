#include "dtsim/sim/cost_model.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/gemm_alignment.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace dtsim::sim {

using calib::CollectiveKind;
using calib::LinkScope;

namespace {

// Plans repeat the same collective call (per layer, per bucket): each distinct
// call is priced once.
class CallPrices {
public:
    struct Key {
        CollectiveKind kind;
        DType dtype;
        std::int64_t bytes;
        std::int32_t group;
        bool operator==(const Key&) const = default;
    };
    template <class Price>
    double of(const Key& key, const Price& price) {
        auto it = std::find(keys_.begin(), keys_.end(), key);
        if (it != keys_.end()) return prices_[static_cast<std::size_t>(it - keys_.begin())];
        keys_.push_back(key);
        prices_.push_back(price());
        return prices_.back();
    }

private:
    std::vector<Key> keys_;
    std::vector<double> prices_;
};

}  // namespace

CostModel::CostModel(const calib::Calibration& calibration, NcclEnv nccl_env)
    : cal_(&calibration), nccl_env_(nccl_env), gloo_(calibration.provenance.gloo_collectives()) {
    for (const auto& p : calibration.gemm_points) layout_measured_[static_cast<std::size_t>(p.layout)] = true;
}

double CostModel::gemm_efficiency(const calib::GemmCurve& c, double m, double n, double k) const {
    return c.max_efficiency * (m / (m + c.half_m)) * (n / (n + c.half_n)) * (k / (k + c.half_k));
}

double CostModel::curve_gemm_ns(const calib::GemmCurve& c, double rows, double n, double k, double batch, DType dtype,
                                std::int32_t align_elements, GemmLayout layout) const {
    const double efficiency = gemm_efficiency(c, rows, n, k) *
                              c.alignment_ratio(gemm_alignment_class(align_elements, dtype)) * c.layout_ratio(layout);
    const double compute_ns = 2.0 * rows * n * k / (c.peak_tflops * 1e12 * efficiency) * 1e9;
    // Thin GEMMs are bound by reading A and B and writing C.
    const double bytes = (rows * k + k * n * batch + rows * n) * static_cast<double>(dtype_bytes(dtype));
    const double memory_ns = bytes / (cal_->device.mem_bw_gbps * cal_->device.elementwise_efficiency);
    return std::max(compute_ns, memory_ns) + cal_->device.kernel_overhead_us * 1e3;
}

double CostModel::gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dtype,
                          std::int32_t align_elements, GemmLayout layout) const {
    const calib::GemmCurve* c = cal_->gemm_curve(dtype);
    if (!c)
        throw CalibrationError(
            fmt::format("calibration '{}' has no GEMM data for {}; measure it with `dtsim calibrate` or use a preset",
                        cal_->name, to_string(dtype)));
    if (align_elements <= 0) align_elements = gemm_alignment(n, k);
    // A batched GEMM fills the machine like one with `batch` times the rows.
    const double rows = static_cast<double>(m) * static_cast<double>(batch);
    const double ns = curve_gemm_ns(*c, rows, double(n), double(k), double(batch), dtype, align_elements, layout);
    // Measured points correct the curve: their measured/modelled time ratios are
    // interpolated by inverse squared distance in log2 shape space, so a
    // measured shape is priced at exactly its measured time. Only points of the
    // GEMM's own kernel family count (the same alignment class). Each point's
    // ratio is against the curve in its own layout; where the calibration
    // measured this GEMM's layout, points of other layouts sit kLayoutDistance
    // further away, so its own layout's points lead.
    const int family = gemm_alignment_class(align_elements, dtype);
    // The curve itself enters as a ratio-1 prior at kPriorDistance, so a lone,
    // distant measurement fades out instead of rescaling every shape.
    constexpr double kPriorDistance = 4.0;   // squared log2 distance: a factor of 4 in one dimension
    constexpr double kLayoutDistance = 1.0;  // as far as a factor of 2 in one dimension
    const bool layout_measured = layout_measured_[static_cast<std::size_t>(layout)];
    double wsum = 0, rsum = 0, measured = 0;
    for (const auto& p : cal_->gemm_points) {
        const std::int32_t p_align = gemm_alignment(p.n, p.k);
        if (p.dtype != dtype || gemm_alignment_class(p_align, dtype) != family) continue;
        const double prows = static_cast<double>(p.m) * static_cast<double>(p.batch);
        const double ratio = p.time_us * 1e3 / curve_gemm_ns(*c, prows, double(p.n), double(p.k), double(p.batch),
                                                             dtype, p_align, p.layout);
        const double d = std::pow(std::log2(rows / prows), 2) + std::pow(std::log2(double(n) / double(p.n)), 2) +
                         std::pow(std::log2(double(k) / double(p.k)), 2) +
                         (layout_measured && p.layout != layout ? kLayoutDistance : 0.0);
        if (d < 1e-12) return p.time_us * 1e3 * c->layout_ratio(p.layout) / c->layout_ratio(layout);
        wsum += 1.0 / d;
        rsum += ratio / d;
        ++measured;
    }
    if (measured == 0) return ns;
    return ns * (rsum + 1.0 / kPriorDistance) / (wsum + 1.0 / kPriorDistance);
}

double CostModel::elementwise_ns(std::int64_t bytes) const {
    if (bytes <= 0) return 0;
    return static_cast<double>(bytes) / (cal_->device.mem_bw_gbps * cal_->device.elementwise_efficiency) +
           cal_->device.kernel_overhead_us * 1e3;
}

double CostModel::pass_ns(std::int64_t bytes, double flops, int launches, bool in_place) const {
    // An optimizer step updates parameters and states where they lie: no write-allocate reads.
    double ns = elementwise_ns(bytes);
    if (in_place && bytes > 0)
        ns -= static_cast<double>(bytes) / (cal_->device.mem_bw_gbps * cal_->device.elementwise_efficiency) *
              (1.0 - 1.0 / cal_->device.in_place_speedup);
    if (flops > 0) {
        // Matmul-like work in an explicit pass (PowerSGD): at the best fp32 GEMM rate.
        const calib::GemmCurve* c = cal_->gemm_curve(DType::fp32);
        if (c)
            ns = std::max(
                ns, flops / (c->peak_tflops * 1e12 * c->max_efficiency) * 1e9 + cal_->device.kernel_overhead_us * 1e3);
    }
    return ns + launches * cal_->device.kernel_overhead_us * 1e3;
}

double CostModel::op_ns(const models::Op& op) const {
    if (op.measured_ns > 0) return static_cast<double>(op.measured_ns);  // read from a profile
    if (op.kind == models::OpKind::gemm)
        return gemm_ns(op.m, op.n, op.k, op.batch, op.dtype, op.align_elements, op.layout);
    double ns = elementwise_ns(op.bytes);
    // torch's non-vectorized kernels (broadcast, strided or casting operands)
    // run at an element rate, whatever their bytes (bench/results/cuda.md).
    if (op.indexed_elements > 0 && cal_->device.indexed_elements_per_s > 0)
        ns = std::max(ns, static_cast<double>(op.indexed_elements) / cal_->device.indexed_elements_per_s * 1e9 +
                              cal_->device.kernel_overhead_us * 1e3);
    return ns + (op.kernels - 1) * cal_->device.kernel_overhead_us * 1e3;
}

const calib::CollectiveCurve& CostModel::curve(CollectiveKind kind, int group_size, LinkScope scope,
                                               DType dtype) const {
    const calib::CollectiveCurve* any = nullptr;
    for (const auto& c : cal_->collectives) {
        if (c.kind != kind || c.scope != scope || c.dtype != dtype) continue;
        if (c.group_size == group_size) return c;
        if (c.group_size == 0) any = &c;
    }
    if (any) return *any;
    if (dtype != DType::fp32) return curve(kind, group_size, scope, DType::fp32);  // same bytes, fp32's rate
    std::vector<int> have;
    for (const auto& c : cal_->collectives)
        if (c.kind == kind && c.scope == scope) have.push_back(c.group_size);
    throw CalibrationError(fmt::format(
        "calibration '{}' has no {} data for a group of {} ranks {} (it has group sizes: {}). "
        "Measure it: `mpirun -np {} dtsim calibrate --out cal.json`{}",
        cal_->name, to_string(kind), group_size, scope == LinkScope::intra_node ? "inside a node" : "across nodes",
        have.empty() ? std::string("none") : fmt::format("{}", fmt::join(have, ", ")), group_size,
        scope == LinkScope::inter_node ? " across the nodes" : ""));
}

double CostModel::link_collective_ns(CollectiveKind kind, std::int64_t bytes, int group_size, LinkScope scope,
                                     DType dtype) const {
    if (group_size <= 1 || bytes <= 0) return 0;
    const calib::CollectiveCurve& c = curve(kind, group_size, scope, dtype);
    const double s = static_cast<double>(bytes);
    const auto& pts = c.points;
    if (pts.size() >= 2 && bytes >= pts.front().size_bytes && bytes <= pts.back().size_bytes) {
        // Piecewise linear in log(size)-log(time) between measured points.
        auto hi = std::lower_bound(pts.begin(), pts.end(), bytes,
                                   [](const calib::CollectivePoint& p, std::int64_t b) { return p.size_bytes < b; });
        if (hi->size_bytes == bytes) return hi->time_us * 1e3;
        auto lo = hi - 1;
        const double t = (std::log(s) - std::log(double(lo->size_bytes))) /
                         (std::log(double(hi->size_bytes)) - std::log(double(lo->size_bytes)));
        return std::exp(std::log(lo->time_us) + t * (std::log(hi->time_us) - std::log(lo->time_us))) * 1e3;
    }
    const double latency_us = c.latency_us + ring_steps(kind, group_size) * c.step_latency_us;
    return latency_us * 1e3 + s * busbw_factor(kind, group_size) / c.bus_bw_gbps;
}

const calib::CollectiveCurve* CostModel::measured_curve(CollectiveKind kind, int group_size, DType dtype) const {
    for (const auto& c : cal_->collectives)
        if (c.kind == kind && c.scope == LinkScope::intra_node && c.dtype == dtype && c.group_size == group_size &&
            c.points.size() >= 2)
            return &c;
    return dtype != DType::fp32 ? measured_curve(kind, group_size, DType::fp32) : nullptr;
}

std::optional<NcclChoice> CostModel::nccl_choice(CollectiveKind kind, std::int64_t bytes, const CommGroup& group,
                                                 DType dtype) const {
    if (!cal_->nccl.present() || group.size <= 1 || bytes <= 0) return std::nullopt;
    if (const auto* table = group.nodes == 1 ? measured_curve(kind, group.size, dtype) : nullptr)
        if (bytes >= table->points.front().size_bytes && bytes <= table->points.back().size_bytes) return std::nullopt;
    return nccl_choose(cal_->nccl, kind, bytes, group.size, group.nodes, dtype, nccl_env_);
}

double CostModel::collective_ns(CollectiveKind kind, std::int64_t bytes, const CommGroup& group, DType dtype) const {
    if (group.size <= 1 || bytes <= 0) return 0;
    if (cal_->nccl.present()) {
        const auto choice = nccl_choice(kind, bytes, group, dtype);
        // No choice: a measured table of the group covers the size.
        if (!choice) return link_collective_ns(kind, bytes, group.size, LinkScope::intra_node, dtype);
        const calib::CollectiveCurve* table = group.nodes == 1 ? measured_curve(kind, group.size, dtype) : nullptr;
        if (!table) return choice->time_us * 1e3;
        // Beyond the table: the model's shape, meeting the table at its nearest end.
        const auto& pts = table->points;
        const calib::CollectivePoint& edge = bytes < pts.front().size_bytes ? pts.front() : pts.back();
        return choice->time_us * 1e3 * edge.time_us /
               nccl_choose(cal_->nccl, kind, edge.size_bytes, group.size, group.nodes, dtype, nccl_env_).time_us;
    }
    const int g = group.per_node();
    if (group.nodes == 1) return link_collective_ns(kind, bytes, group.size, LinkScope::intra_node, dtype);
    if (g == 1) return link_collective_ns(kind, bytes, group.nodes, LinkScope::inter_node, dtype);
    const std::int64_t shard = (bytes + g - 1) / g;
    auto intra = [&](CollectiveKind k, std::int64_t b) {
        return link_collective_ns(k, b, g, LinkScope::intra_node, dtype);
    };
    auto inter = [&](CollectiveKind k, std::int64_t b) {
        return link_collective_ns(k, b, group.nodes, LinkScope::inter_node, dtype);
    };
    switch (kind) {
        case CollectiveKind::allreduce:
            return intra(CollectiveKind::reduce_scatter, bytes) + inter(CollectiveKind::allreduce, shard) +
                   intra(CollectiveKind::allgather, bytes);
        case CollectiveKind::reduce_scatter:
            return intra(CollectiveKind::reduce_scatter, bytes) + inter(CollectiveKind::reduce_scatter, shard);
        case CollectiveKind::allgather:
            return inter(CollectiveKind::allgather, shard) + intra(CollectiveKind::allgather, bytes);
        case CollectiveKind::broadcast:
        case CollectiveKind::reduce: return inter(kind, bytes) + intra(kind, bytes);
    }
    return 0;
}

namespace {

double require_rate(double rate, const std::string& calibration, const char* field, const char* what) {
    if (rate <= 0)
        throw CalibrationError(fmt::format("calibration '{}' has no {} (host.{}); the plan needs it for {}",
                                           calibration, field, field, what));
    return rate;
}

}  // namespace

double CostModel::copy_ns(Transfer direction, std::int64_t bytes, bool pinned) const {
    if (bytes <= 0) return 0;
    const auto& h = cal_->host;
    const bool h2d = direction == Transfer::h2d;
    const double gbps =
        h2d ? (pinned ? h.h2d_pinned_gbps : h.h2d_pageable_gbps) : (pinned ? h.d2h_pinned_gbps : h.d2h_pageable_gbps);
    const char* field =
        h2d ? (pinned ? "h2d_pinned_gbps" : "h2d_pageable_gbps") : (pinned ? "d2h_pinned_gbps" : "d2h_pageable_gbps");
    return static_cast<double>(bytes) / require_rate(gbps, cal_->name, field, "host<->device copies") +
           cal_->device.kernel_overhead_us * 1e3;
}

double CostModel::host_optimizer_ns(std::int64_t parameters, bool torch_optimizer) const {
    if (parameters <= 0) return 0;
    const double rate = torch_optimizer ? require_rate(cal_->host.cpu_torch_adam_params_per_s, cal_->name,
                                                       "cpu_torch_adam_params_per_s", "torch's CPU optimizer")
                                        : require_rate(cal_->host.cpu_adam_params_per_s, cal_->name,
                                                       "cpu_adam_params_per_s", "DeepSpeed's CPU optimizer");
    return static_cast<double>(parameters) / rate * 1e9;
}

double CostModel::nvme_ns(Transfer direction, std::int64_t bytes) const {
    if (bytes <= 0) return 0;
    const bool read = direction == Transfer::nvme_read;
    const double gbps = read ? cal_->host.nvme_read_gbps : cal_->host.nvme_write_gbps;
    return static_cast<double>(bytes) /
           require_rate(gbps, cal_->name, read ? "nvme_read_gbps" : "nvme_write_gbps", "NVMe offload");
}

std::vector<std::int64_t> CostModel::price(const Plan& plan, const models::Workload& workload) const {
    // Layers repeat across micro-steps: price each layer's phase once.
    const std::size_t nl = workload.layers.size();
    std::vector<double> forward_ns(nl, -1), backward_ns(nl, -1), recompute_ns(nl, -1);
    auto layer_ns = [&](const Task& t) -> double {
        const auto i = static_cast<std::size_t>(t.layer);
        // Op-level selective AC: a recompute skips the ops whose outputs the forward saved.
        const std::vector<char>* saved =
            t.phase == Phase::recompute && i < plan.recompute_saved.size() && !plan.recompute_saved[i].empty()
                ? &plan.recompute_saved[i]
                : nullptr;
        auto& cache = t.phase == Phase::backward ? backward_ns : saved != nullptr ? recompute_ns : forward_ns;
        if (cache[i] < 0) {
            const auto& ops = t.phase == Phase::backward ? workload.layers[i].backward : workload.layers[i].forward;
            double sum = 0;
            for (std::size_t k = 0; k < ops.size(); ++k)
                if (saved == nullptr || (*saved)[k] == 0) sum += op_ns(ops[k]);
            cache[i] = sum;
        }
        return cache[i];
    };
    std::vector<std::int64_t> out(plan.tasks.size());
    // torch's CPU allocator: gradients come back from the OS each step (Config::host_memory_reuse).
    // A profile's measured layers already paid it for theirs; what the strategy
    // adds (FSDP's flat gradient, its gathered parameters, the reduced shards) they did not.
    // Buffers the strategy allocates around a collective are reused once glibc's
    // dynamic threshold has risen, but it stops at 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX,
    // 64-bit): a larger one is mapped afresh and unmapped at its free every time,
    // so it pays first touch every time too.
    constexpr std::int64_t kAlwaysMapped = 32LL << 20;
    const bool fresh = plan.fresh_gradient_pages && cal_->host.first_touch_gbps > 0;
    const bool first_touch = fresh && workload.profile.empty();
    const auto touch_ns = [&](std::int64_t bytes) {
        return fresh ? static_cast<double>(bytes) / cal_->host.first_touch_gbps : 0.0;
    };
    const auto fresh_ns = [&](std::int64_t bytes) { return bytes > kAlwaysMapped ? touch_ns(bytes) : 0.0; };
    CallPrices calls;
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const Task& t = plan.tasks[i];
        double ns = 0;
        switch (t.kind) {
            case TaskKind::compute:
                ns = t.layer >= 0     ? layer_ns(t) + elementwise_ns(t.bytes)
                     : t.fixed_ns > 0 ? static_cast<double>(t.fixed_ns)  // measured in a profile
                                      : pass_ns(t.bytes, t.flops, t.launches, t.phase == Phase::optimizer);
                if (first_touch)
                    for (const MemoryDelta& d : plan.memory_of(t))
                        if (d.category == MemCategory::gradients && d.bytes > 0)
                            ns += static_cast<double>(d.bytes) / cal_->host.first_touch_gbps;
                // A pass's fresh output (FSDP's flat gradient) pays first touch at every
                // size. It sits above the unit's gradients on the heap and is freed last,
                // after its reduce-scatter, when those and the collective's temporary are
                // free too: the heap's free top then exceeds glibc's trim threshold
                // (twice the risen mmap threshold) and goes back to the OS. Measured:
                // dtsim's executor under --allocator torch faults all 8 of an mlp-8x2048
                // FULL_SHARD step's 16 MiB flat gradients, every step; torch 2.15 faulted
                // 32-224 MiB a step in 10 runs, 100 MiB on average, against these
                // 128 MiB (bench/results/torch_xcheck.md, 2026-11-28). Measured on units
                // of one size and one micro-step a step: where a larger unit has raised
                // the threshold further, or no_sync keeps the gradient, glibc may keep
                // it instead, and this charge is an upper bound.
                if (t.fresh_output) ns += touch_ns(t.bytes / 2);
                break;
            case TaskKind::collective: {
                ns = calls.of({t.collective, t.dtype, t.bytes, t.group}, [&] {
                    return collective_ns(t.collective, t.bytes, plan.groups[static_cast<std::size_t>(t.group)],
                                         t.dtype);
                });
                // Its output, where the strategy allocates it for the call (FSDP's all-gathers and reduce-scatters),
                // and over gloo the buffer torch's ProcessGroupGloo allocates inside it (`gloo_`).
                if (!fresh) break;  // GPUs, and allocators that keep memory: nothing to add
                for (const MemoryDelta& d : plan.memory_of(t))
                    if (d.category == MemCategory::gradients || d.category == MemCategory::gathered)
                        ns += fresh_ns(d.bytes);
                if (gloo_ &&
                    (t.collective == CollectiveKind::allgather || t.collective == CollectiveKind::reduce_scatter))
                    ns += fresh_ns(t.bytes);
                break;
            }
            case TaskKind::copy: ns = copy_ns(t.transfer, t.bytes, t.pinned); break;
            case TaskKind::host_compute:
                ns = t.fixed_ns > 0 ? static_cast<double>(t.fixed_ns)
                                    : host_optimizer_ns(t.elements, t.torch_cpu_optimizer);
                break;
            case TaskKind::io: ns = nvme_ns(t.transfer, t.bytes); break;
        }
        out[i] = static_cast<std::int64_t>(ns + 0.5);  // ns >= 0
    }
    return out;
}

CollectiveLanes CostModel::lanes(const Plan& plan, const std::vector<std::int64_t>& duration_ns) const {
    CollectiveLanes out;
    if (!gloo_) return out;
    out.lanes = 2;  // ProcessGroupGloo::Options::threads: 2 per device, one device
    out.latency_ns.assign(plan.tasks.size(), 0);
    CallPrices calls;
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const Task& t = plan.tasks[i];
        if (t.kind != TaskKind::collective) continue;
        const CommGroup& group = plan.groups[static_cast<std::size_t>(t.group)];
        const std::int64_t one_element = static_cast<std::int64_t>(group.size) * dtype_bytes(t.dtype);
        const double latency = calls.of({t.collective, t.dtype, one_element, t.group},
                                        [&] { return collective_ns(t.collective, one_element, group, t.dtype); });
        out.latency_ns[i] = std::min(duration_ns[i], static_cast<std::int64_t>(latency + 0.5));
    }
    return out;
}

}  // namespace dtsim::sim
