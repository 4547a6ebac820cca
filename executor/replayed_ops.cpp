#include "replayed_ops.hpp"

#include <algorithm>

namespace dtsim::executor {

const std::vector<models::Op>* ops_of(const models::Workload& w, const sim::Task& t) {
    if (t.layer < 0) return nullptr;
    const auto& l = w.layers[static_cast<std::size_t>(t.layer)];
    return t.phase == sim::Phase::backward ? &l.backward : &l.forward;
}

bool replays_op(const sim::Plan& plan, const sim::Task& t, std::size_t k) {
    if (t.phase != sim::Phase::recompute || t.layer < 0) return true;
    const auto l = static_cast<std::size_t>(t.layer);
    return l >= plan.recompute_saved.size() || k >= plan.recompute_saved[l].size() || plan.recompute_saved[l][k] == 0;
}

std::int64_t memory_pass_bytes(const models::Workload& w, const sim::Task& t) {
    std::int64_t bytes = t.bytes;
    if (const auto* ops = ops_of(w, t))
        for (const auto& op : *ops)
            if (op.kind != models::OpKind::gemm) bytes = std::max(bytes, op.bytes);
    return bytes;
}

}  // namespace dtsim::executor
