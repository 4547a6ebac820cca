#include "dtsim/sim/metrics.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace dtsim::sim {
namespace {

using Interval = std::pair<std::int64_t, std::int64_t>;

// Sorted, disjoint union of the given intervals.
std::vector<Interval> merge(std::vector<Interval> v) {
    std::sort(v.begin(), v.end());
    std::vector<Interval> out;
    for (const auto& iv : v) {
        if (iv.second <= iv.first) continue;
        if (!out.empty() && iv.first <= out.back().second)
            out.back().second = std::max(out.back().second, iv.second);
        else
            out.push_back(iv);
    }
    return out;
}

std::int64_t length(const std::vector<Interval>& v) {
    std::int64_t sum = 0;
    for (const auto& iv : v) sum += iv.second - iv.first;
    return sum;
}

std::int64_t intersection(const std::vector<Interval>& a, const std::vector<Interval>& b) {
    std::int64_t sum = 0;
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        const std::int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
        if (hi > lo) sum += hi - lo;
        (a[i].second < b[j].second) ? ++i : ++j;
    }
    return sum;
}

}  // namespace

Metrics compute_metrics(const Plan& plan, const Schedule& schedule, const models::Workload& workload,
                        const Config& config, const calib::Calibration& calibration) {
    Metrics m;
    m.step_time_s = static_cast<double>(schedule.makespan_ns) * 1e-9;
    m.global_batch = workload.micro_batch * config.grad_accum * config.topology.world_size();
    if (m.step_time_s > 0) {
        m.samples_per_s = static_cast<double>(m.global_batch) / m.step_time_s;
        m.tokens_per_s = m.samples_per_s * static_cast<double>(workload.seq_len);
        m.mfu_peak_tflops = calibration.peak_tflops(workload.activation_dtype);
        if (m.mfu_peak_tflops > 0)
            m.mfu = workload.model_flops() * config.grad_accum / (m.step_time_s * m.mfu_peak_tflops * 1e12);
    }
    std::vector<Interval> compute, comm, copy, host, io, waits;
    std::vector<std::tuple<int, std::int64_t, int>> calls;  // (kind, bytes, group size) per collective
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const Task& t = plan.tasks[i];
        const Interval iv{schedule.timings[i].start_ns, schedule.timings[i].end_ns};
        if (t.kind == TaskKind::compute) compute.push_back(iv);
        if (t.kind == TaskKind::copy) copy.push_back(iv);
        if (t.kind == TaskKind::host_compute) host.push_back(iv);
        if (t.kind == TaskKind::io) io.push_back(iv);
        switch (t.transfer) {
            case Transfer::h2d: m.h2d_bytes += t.bytes; break;
            case Transfer::d2h: m.d2h_bytes += t.bytes; break;
            case Transfer::nvme_read: m.nvme_read_bytes += t.bytes; break;
            case Transfer::nvme_write: m.nvme_write_bytes += t.bytes; break;
            case Transfer::none: break;
        }
        if (t.kind == TaskKind::collective) {
            comm.push_back(iv);
            if (!schedule.straggler_wait_ns.empty() && schedule.straggler_wait_ns[i] > 0)
                waits.push_back({iv.first, iv.first + schedule.straggler_wait_ns[i]});
            const int group = plan.groups[static_cast<std::size_t>(t.group)].size;
            calls.emplace_back(static_cast<int>(t.collective), t.bytes, group);
            m.comm_bytes_per_step += t.bytes;
        }
    }
    compute = merge(std::move(compute));
    comm = merge(std::move(comm));
    const std::int64_t overlap = intersection(compute, comm);
    m.compute_s = static_cast<double>(length(compute)) * 1e-9;
    m.comm_s = static_cast<double>(length(comm)) * 1e-9;
    m.exposed_comm_s = static_cast<double>(length(comm) - overlap) * 1e-9;
    m.straggler_wait_s = static_cast<double>(length(merge(std::move(waits)))) * 1e-9;
    m.overlap_fraction = length(comm) > 0 ? static_cast<double>(overlap) / static_cast<double>(length(comm)) : 0.0;
    m.copy_s = static_cast<double>(length(merge(std::move(copy)))) * 1e-9;
    m.host_compute_s = static_cast<double>(length(merge(std::move(host)))) * 1e-9;
    m.io_s = static_cast<double>(length(merge(std::move(io)))) * 1e-9;
    m.host_memory_bytes = schedule.peak_host_bytes;
    m.peak_memory_bytes = schedule.peak_memory_bytes;
    m.peak_breakdown = schedule.peak_breakdown;
    m.device_memory_bytes = calibration.device.memory_bytes;
    m.usable_memory_bytes = calibration.device.memory_bytes - calibration.device.reserved_bytes;
    m.fits = m.peak_memory_bytes <= m.usable_memory_bytes;
    std::sort(calls.begin(), calls.end());
    for (std::size_t i = 0; i < calls.size();) {
        std::size_t j = i;
        while (j < calls.size() && calls[j] == calls[i]) ++j;
        m.collectives.push_back({static_cast<calib::CollectiveKind>(std::get<0>(calls[i])), std::get<1>(calls[i]),
                                 std::get<2>(calls[i]), static_cast<int>(j - i)});
        i = j;
    }
    // Largest payloads first within a kind, so the report reads top-down.
    std::stable_sort(m.collectives.begin(), m.collectives.end(), [](const auto& a, const auto& b) {
        return std::tie(a.kind, b.bytes, a.group_size) < std::tie(b.kind, a.bytes, b.group_size);
    });
    return m;
}

}  // namespace dtsim::sim
