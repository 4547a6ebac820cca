#include "dtsim/profiler/calibration.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

namespace dtsim::calib {

std::string_view to_string(CollectiveKind k) {
    switch (k) {
        case CollectiveKind::allreduce: return "allreduce";
        case CollectiveKind::reduce_scatter: return "reduce_scatter";
        case CollectiveKind::allgather: return "allgather";
        case CollectiveKind::broadcast: return "broadcast";
        case CollectiveKind::reduce: return "reduce";
    }
    return "?";
}

CollectiveKind collective_kind_from_string(std::string_view s) {
    for (auto k : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                   CollectiveKind::broadcast, CollectiveKind::reduce})
        if (to_string(k) == s) return k;
    throw ConfigError(
        unknown_name_message("collective", s, {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce"}));
}

double busbw_factor(CollectiveKind kind, int n) {
    const double nn = n;
    switch (kind) {
        case CollectiveKind::allreduce: return 2.0 * (nn - 1) / nn;
        case CollectiveKind::reduce_scatter:
        case CollectiveKind::allgather: return (nn - 1) / nn;
        case CollectiveKind::broadcast:
        case CollectiveKind::reduce: return 1.0;
    }
    return 1.0;
}

int ring_steps(CollectiveKind kind, int n) {
    return kind == CollectiveKind::allreduce ? 2 * (n - 1) : n - 1;
}

std::string_view to_string(LinkScope s) {
    return s == LinkScope::intra_node ? "intra_node" : "inter_node";
}

LinkScope link_scope_from_string(std::string_view s) {
    if (s == "intra_node") return LinkScope::intra_node;
    if (s == "inter_node") return LinkScope::inter_node;
    throw ConfigError(unknown_name_message("link scope", s, {"intra_node", "inter_node"}));
}

const GemmCurve* Calibration::gemm_curve(DType dtype) const {
    for (const auto& c : gemm_curves)
        if (c.dtype == dtype) return &c;
    // fp16 and bf16 run on the same tensor cores at the same rate.
    if (dtype != DType::fp32)
        for (const auto& c : gemm_curves)
            if (c.dtype != DType::fp32) return &c;
    return nullptr;
}

double Calibration::peak_tflops(DType dtype) const {
    const GemmCurve* c = gemm_curve(dtype);
    return c ? c->peak_tflops : 0.0;
}

}  // namespace dtsim::calib
