// Prices tasks from a Calibration: GEMMs by a shape-efficiency curve corrected
// by measured points, streaming kernels by bandwidth, collectives by the
// measured (or preset) curve for their kind, link and group size.
#pragma once

#include "dtsim/models/workload.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/engine.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "dtsim/sim/plan.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace dtsim::sim {

class CostModel {
public:
    // `nccl_env`: the NCCL variables of the run (Config::env), for calibrations
    // with an NCCL model.
    explicit CostModel(const calib::Calibration& calibration, NcclEnv nccl_env = {});

    const calib::Calibration& calibration() const { return *cal_; }

    // `align_elements`: the GEMM's alignment class (models::Op::align_elements);
    // 0 takes it from n and k. `layout`: its transposes, priced at the curve's
    // layout ratio and corrected foremost by points measured in that layout.
    double gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, DType dtype,
                   std::int32_t align_elements = 0, GemmLayout layout = GemmLayout::nn) const;
    double elementwise_ns(std::int64_t bytes) const;
    double op_ns(const models::Op& op) const;
    // An explicit pass: streaming `bytes`, matmul-like `flops`, and `launches`
    // extra kernels (launch-bound loops such as Gram-Schmidt). `in_place`: it
    // writes only what it read (an optimizer step), at the calibration's
    // in_place_speedup.
    double pass_ns(std::int64_t bytes, double flops, int launches, bool in_place = false) const;

    // One collective over `group`. A measured table of this kind and group
    // prices the sizes it covers. Elsewhere, a calibration with an NCCL model
    // (Calibration::nccl) prices NCCL's own choice over the whole group
    // (sim/nccl_model), scaled to meet a measured table of the group at its
    // nearest end. Without one: ring inside a node; across nodes, the
    // hierarchical form (reduce-scatter in the node, the inter-node collective
    // on 1/per_node of the data, all-gather in the node). `dtype`: the
    // elements' type, priced by its own curve where the calibration has one and
    // by the fp32 curve at the same bytes otherwise.
    double collective_ns(calib::CollectiveKind kind, std::int64_t bytes, const CommGroup& group,
                         DType dtype = DType::fp32) const;
    // NCCL's choice for the call, where the NCCL model prices it (the
    // calibration has one and no measured table of the group covers the size);
    // nullopt otherwise.
    std::optional<NcclChoice> nccl_choice(calib::CollectiveKind kind, std::int64_t bytes, const CommGroup& group,
                                          DType dtype = DType::fp32) const;
    // One collective on one link, from that link's curve.
    double link_collective_ns(calib::CollectiveKind kind, std::int64_t bytes, int group_size, calib::LinkScope scope,
                              DType dtype = DType::fp32) const;

    double copy_ns(Transfer direction, std::int64_t bytes, bool pinned) const;      // over PCIe
    double host_optimizer_ns(std::int64_t parameters, bool torch_optimizer) const;  // CPU Adam
    double nvme_ns(Transfer direction, std::int64_t bytes) const;

    // Standalone duration of every task of `plan` in nanoseconds.
    std::vector<std::int64_t> price(const Plan& plan, const models::Workload& workload) const;

    // How the run's process groups run their collectives (run_engine): over
    // gloo, two at a time, as ProcessGroupGloo's two worker threads do, each
    // collective's latency part being its group's price for a call of one
    // element a rank (at most its whole `duration_ns`); elsewhere one at a
    // time per stream.
    CollectiveLanes lanes(const Plan& plan, const std::vector<std::int64_t>& duration_ns) const;

private:
    // The measured curve (two points or more) of this kind, group and dtype
    // (else fp32) inside one node; nullptr when there is none.
    const calib::CollectiveCurve* measured_curve(calib::CollectiveKind kind, int group_size, DType dtype) const;
    const calib::CollectiveCurve& curve(calib::CollectiveKind kind, int group_size, calib::LinkScope scope,
                                        DType dtype) const;
    double gemm_efficiency(const calib::GemmCurve& c, double m, double n, double k) const;
    // The curve's time for a GEMM with `rows` = m * batch, before measured corrections.
    double curve_gemm_ns(const calib::GemmCurve& c, double rows, double n, double k, double batch, DType dtype,
                         std::int32_t align_elements, GemmLayout layout) const;

    const calib::Calibration* cal_;
    NcclEnv nccl_env_;
    // Whether the calibration measured GEMM points in each layout (by GemmLayout).
    std::array<bool, 3> layout_measured_{};
    // The collectives run over gloo, as torch's ProcessGroupGloo calls it: an
    // all-gather lands in a fresh flat buffer and a reduce-scatter allreduces a
    // fresh clone of its input (runtime/gloo_communicator.cpp). The calibration
    // timed them with memory kept; torch's allocator gives those buffers fresh
    // pages every call.
    bool gloo_ = false;
};

using calib::busbw_factor;
using calib::ring_steps;

}  // namespace dtsim::sim
