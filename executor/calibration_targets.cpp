#include "dtsim/executor/calibration_targets.hpp"

#include <algorithm>
#include <set>

namespace dtsim::executor {

std::vector<profiler::GemmShape> gemm_shapes(const models::Workload& w, int& skipped, double max_flops) {
    std::set<profiler::GemmShape> shapes;
    skipped = 0;
    for (const auto& layer : w.layers)
        for (const auto* ops : {&layer.forward, &layer.backward})
            for (const auto& op : *ops) {
                if (op.kind != models::OpKind::gemm) continue;
                const profiler::GemmShape s{op.m * op.batch, op.n, op.k, op.layout};
                if (2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) > max_flops)
                    ++skipped;
                else
                    shapes.insert(s);
            }
    return {shapes.begin(), shapes.end()};
}

namespace {

template <class T>
void append_unique(std::vector<T>& to, const std::vector<T>& from) {
    to.insert(to.end(), from.begin(), from.end());
    std::sort(to.begin(), to.end());
    to.erase(std::unique(to.begin(), to.end()), to.end());
}

}  // namespace

void add_calibration_targets(profiler::CalibrationTargets& o, const models::Workload& w, const sim::Plan& plan) {
    int skipped = 0;
    append_unique(o.gemm_shapes, gemm_shapes(w, skipped));
    std::vector<std::pair<calib::CollectiveKind, std::int64_t>> sizes;
    for (const auto& t : plan.tasks)
        if (t.kind == sim::TaskKind::collective) sizes.emplace_back(t.collective, t.bytes);
    append_unique(o.collective_sizes, sizes);
}

profiler::CalibrationTargets joined(profiler::CalibrationTargets a, const profiler::CalibrationTargets& b) {
    append_unique(a.gemm_shapes, b.gemm_shapes);
    append_unique(a.collective_sizes, b.collective_sizes);
    return a;
}

}  // namespace dtsim::executor
