// refresh_cpu_calibration: a calibration's drifting figures re-measured for
// the targets of the Plans about to run.
#include "cpu_calibration_parts.hpp"

#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/collective_benchmarks.hpp"
#include "dtsim/profiler/fit.hpp"
#include "dtsim/profiler/host_info.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>

namespace dtsim::profiler {

using calib::CollectiveKind;

namespace {

// Measured GEMM points replace those of the same shape, or join them.
void merge_gemm_points(std::vector<calib::GemmPoint>& into, const std::vector<calib::GemmPoint>& fresh) {
    for (const auto& p : fresh) {
        auto same = std::find_if(into.begin(), into.end(), [&](const calib::GemmPoint& q) {
            return q.dtype == p.dtype && q.m == p.m && q.n == p.n && q.k == p.k && q.batch == p.batch &&
                   q.layout == p.layout;
        });
        if (same != into.end())
            *same = p;
        else
            into.push_back(p);
    }
}

// Measured collective points replace those of the same size in the curve of
// their kind on this node's group (or start it), which is then refitted.
void merge_collective_points(std::vector<calib::CollectiveCurve>& curves, CollectiveKind kind, int group_size,
                             std::vector<calib::CollectivePoint> points) {
    auto curve = std::find_if(curves.begin(), curves.end(), [&](const calib::CollectiveCurve& k) {
        return k.kind == kind && k.scope == calib::LinkScope::intra_node && k.group_size == group_size &&
               k.dtype == DType::fp32;  // the targets are fp32 buckets
    });
    if (curve != curves.end())
        for (const auto& old : curve->points)
            if (std::none_of(points.begin(), points.end(),
                             [&](const calib::CollectivePoint& p) { return p.size_bytes == old.size_bytes; }))
                points.push_back(old);
    calib::CollectiveCurve fitted = fit_collective(kind, calib::LinkScope::intra_node, group_size, points);
    if (curve != curves.end())
        *curve = std::move(fitted);
    else
        curves.push_back(std::move(fitted));
}

}  // namespace

std::string why_not_refreshable(const calib::Calibration& c, int ranks) {
    const auto& p = c.provenance;
    if (p.source != "measured" || (p.backend != cpu_backend_name(runtime::CommBackend::mpi) &&
                                   p.backend != cpu_backend_name(runtime::CommBackend::gloo)))
        return fmt::format("it is not a measured CPU calibration (source {}, backend {})", p.source,
                           p.backend.empty() ? "none" : p.backend);
    if (p.world_size != ranks) return fmt::format("it was measured with {} ranks, not {}", p.world_size, ranks);
    if (const std::string here = machine_name(host_info()); p.machine != here)
        return fmt::format("it was measured on {}, not on this machine, {}", p.machine, here);
    return "";
}

calib::Calibration refresh_cpu_calibration(const calib::Calibration& base, const CalibrationTargets& targets) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // The full run's repeats: there are few targets, and their figures must
    // hold as well as the calibration's they replace.
    const RepeatPolicy policy = machine_policy(false);
    calib::Calibration c = base;
    std::vector<calib::GemmPoint> fresh = bench_gemm(targets.gemm_shapes, policy, {});
    for (auto& p : fresh) p.time_us = pace_time(p.time_us);
    merge_gemm_points(c.gemm_points, fresh);
    if (!c.gemm_curves.empty() && !fresh.empty()) {
        // Refit so that the curve and its points describe the same state of the machine.
        std::erase_if(c.gemm_curves, [](const calib::GemmCurve& g) { return g.dtype == DType::fp32; });
        c.gemm_curves.push_back(fit_gemm_curve(DType::fp32, 0, c.gemm_points));
    }
    measure_memory_and_adam(c, policy, {});

    if (size > 1 && !targets.collective_sizes.empty()) {
        CollectiveSweep sweep;
        for (const auto& [kind, bytes] : targets.collective_sizes)
            if (std::find(sweep.kinds.begin(), sweep.kinds.end(), kind) == sweep.kinds.end())
                sweep.kinds.push_back(kind);
        sweep.extra_sizes = targets.collective_sizes;
        sweep.only_extra_sizes = true;
        const auto comm = runtime::make_communicator(transport_of(base), MPI_COMM_WORLD, half_sum_of(base));
        const auto rows = bench_collectives(sweep, policy, {}, *comm);
        for (CollectiveKind kind : sweep.kinds)
            if (auto points = points_of(rows_of_kind(rows, kind)); !points.empty())
                merge_collective_points(c.collectives, kind, size, std::move(points));
    }
    c.provenance.notes += "; refreshed (targets, memory, Adam) at " + utc_timestamp();
    if (const std::string refreshed = describe(policy); c.provenance.sampling != refreshed)
        c.provenance.sampling = fmt::format("refreshed figures: {}; the others: {}", refreshed,
                                            c.provenance.sampling.empty() ? "not recorded" : c.provenance.sampling);
    return c;
}

}  // namespace dtsim::profiler
