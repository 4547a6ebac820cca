#include "dtsim/sim/selective_ac.hpp"

#include <string_view>

namespace dtsim::sim {
namespace {

bool is_sdpa(const models::Op& op) {
    return std::string_view(op.name).starts_with("flash.");
}

// aten.mm: a 2-D GEMM (batch 1) of a Linear without a bias. A Linear's bias is
// the layer's parameter named "<...>.<op name>.bias" (HF and torch naming).
bool is_mm(const models::Layer& layer, const models::Op& op) {
    if (op.kind != models::OpKind::gemm || op.batch != 1 || is_sdpa(op)) return false;
    const std::string suffix = op.name + ".bias";
    for (const auto& p : layer.params) {
        const std::string_view n = p.name;
        if (n.ends_with(suffix) && (n.size() == suffix.size() || n[n.size() - suffix.size() - 1] == '.')) return false;
    }
    return true;
}

}  // namespace

std::vector<std::vector<char>> op_sac_saved_ops(const models::Workload& w,
                                                const std::vector<std::pair<int, int>>& blocks) {
    std::vector<std::vector<char>> saved(w.layers.size());
    for (const auto& [first, last] : blocks) {
        int mm_count = 0;  // torchtitan's meta["forward_mm_count"]: one context per block's forward
        for (int l = first; l <= last; ++l) {
            const auto& layer = w.layers[static_cast<std::size_t>(l)];
            auto& mask = saved[static_cast<std::size_t>(l)];
            mask.assign(layer.forward.size(), 0);
            for (std::size_t i = 0; i < layer.forward.size(); ++i) {
                const auto& op = layer.forward[i];
                if (is_sdpa(op))
                    mask[i] = 1;
                else if (is_mm(layer, op))
                    mask[i] = ++mm_count % 2 != 0;
            }
        }
    }
    return saved;
}

std::int64_t op_sac_output_bytes(const models::Layer& layer, const models::Op& op) {
    if (op.kind == models::OpKind::gemm && !is_sdpa(op)) return op.batch * op.m * op.n * dtype_bytes(op.dtype);
    if (op.name != "flash.out") return 0;  // SDPA's GEMMs: their result is the output, counted once below
    // SDPA returns the output (flash.out reads and writes it) and the fp32
    // log-sum-exp per (batch x head, query row): flash.qk's batch x m.
    std::int64_t lse = 0;
    for (const auto& o : layer.forward)
        if (o.name == "flash.qk") lse = 4 * o.batch * o.m;
    return op.bytes / 2 + lse;
}

}  // namespace dtsim::sim
