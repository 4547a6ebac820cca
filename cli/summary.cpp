#include "summary.hpp"

#include "format_units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <tuple>

namespace dtsim::cli {
namespace {

using sim::MemCategory;

template <class... Args>
void line(std::string& out, fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
    out += '\n';
}

std::string breakdown_line(const sim::MemoryBreakdown& b) {
    std::vector<std::pair<std::int64_t, std::string>> parts;
    for (int c = 0; c < sim::kMemCategories; ++c)
        if (b[static_cast<std::size_t>(c)] > 0 && !sim::is_host(static_cast<MemCategory>(c)))
            parts.emplace_back(b[static_cast<std::size_t>(c)], std::string(to_string(static_cast<MemCategory>(c))));
    std::stable_sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::vector<std::string> text;
    for (const auto& [bytes, name] : parts) text.push_back(fmt::format("{} {}", name, format_bytes(bytes)));
    return fmt::format("{}", fmt::join(text, ", "));
}

// "allreduce Tree/Simple x 60, Tree/LL128 x 1; all-gather Ring/Simple x 48":
// the algorithm and protocol NCCL's cost model picks, with the calls per step.
std::string nccl_line(const sim::SimResult& r, const sim::Config& config, const calib::Calibration& cal) {
    const std::vector<std::string> labels = sim::nccl_choices(r, config, cal);
    std::vector<std::tuple<calib::CollectiveKind, std::string, int>> uses;  // in the report's order
    for (std::size_t i = 0; i < labels.size(); ++i) {
        if (labels[i].empty()) continue;
        const auto& c = r.metrics.collectives[i];
        auto it = std::find_if(uses.begin(), uses.end(),
                               [&](const auto& u) { return std::get<0>(u) == c.kind && std::get<1>(u) == labels[i]; });
        if (it == uses.end())
            uses.emplace_back(c.kind, labels[i], c.count);
        else
            std::get<2>(*it) += c.count;
    }
    std::string out;
    for (std::size_t i = 0; i < uses.size(); ++i) {
        const auto& [kind, label, count] = uses[i];
        const bool same_kind = i > 0 && std::get<0>(uses[i - 1]) == kind;
        out += fmt::format("{}{} x {}",
                           i == 0      ? std::string(to_string(kind)) + " "
                           : same_kind ? ", "
                                       : "; " + std::string(to_string(kind)) + " ",
                           label, count);
    }
    return out;
}

}  // namespace

std::string summary_text(const sim::SimResult& r, const sim::Config& config, const calib::Calibration& cal,
                         const sim::ReportExtras& extras) {
    const sim::Metrics& m = r.metrics;
    std::string out;
    line(out, "{} ({} parameters) | {} | {} node{} x {} GPU{} {} ({}) | micro-batch {}{}{} | {} | {}", config.model,
         format_count(static_cast<double>(r.workload->param_count())), config.strategy, config.topology.nodes,
         config.topology.nodes > 1 ? "s" : "", config.topology.gpus_per_node,
         config.topology.gpus_per_node > 1 ? "s" : "", cal.name, cal.provenance.source, config.micro_batch,
         r.workload->seq_len > 1 ? fmt::format(" x {} tokens", r.workload->seq_len) : "",
         config.grad_accum > 1 ? fmt::format(" x {} accumulation steps", config.grad_accum) : "",
         to_string(config.precision), sim::optimizer_name(config));
    line(out, "");
    line(out, "  Step time          {}{}", format_seconds(m.step_time_s),
         extras.phases.size() > 1 ? fmt::format("   {}", extras.phases.front().label) : "");
    for (std::size_t i = 1; i < extras.phases.size(); ++i)
        line(out, "                     {}   {}{}", format_seconds(extras.phases[i].step_time_s),
             extras.phases[i].label,
             extras.phases[i].weight > 0 ? fmt::format(", {:.0f} % of steps", extras.phases[i].weight * 100) : "");
    if (extras.phases.size() > 1 && extras.average_step_time_s != m.step_time_s)
        line(out, "  Average step       {} (weighted over the phases above)",
             format_seconds(extras.average_step_time_s));
    if (r.workload->seq_len > 1)
        line(out, "  Throughput         {:.1f} samples/s, {} tokens/s (global batch {})", m.samples_per_s,
             format_count(m.tokens_per_s), m.global_batch);
    else
        line(out, "  Throughput         {:.1f} samples/s (global batch {})", m.samples_per_s, m.global_batch);
    line(out, "  MFU                {:.1f} % of the {} peak ({:.1f} TFLOPS)", m.mfu * 100,
         to_string(r.workload->activation_dtype), m.mfu_peak_tflops);
    line(out, "  Compute            {}", format_seconds(m.compute_s));
    if (m.comm_s > 0) {
        line(out, "  Communication      {}, of which {} exposed (overlap {:.1f} %)", format_seconds(m.comm_s),
             format_seconds(m.exposed_comm_s), m.overlap_fraction * 100);
        if (m.straggler_wait_s > 0)
            line(out,
                 "    Stragglers       {} of it waiting for the slowest rank (the same compute {:.1f} % slower on "
                 "the slowest of {} ranks, calibrated)",
                 format_seconds(m.straggler_wait_s), (cal.overlap.straggler - 1) * 100, cal.overlap.straggler_ranks);
    } else {
        line(out, "  Communication      none (one rank)");
    }
    if (const std::string nccl = nccl_line(r, config, cal); !nccl.empty()) line(out, "    NCCL's choice    {}", nccl);
    if (const std::string sockets = sim::socket_summary(config, cal); !sockets.empty())
        line(out, "    NCCL sockets     {}", sockets);
    if (!config.env.empty()) {
        std::vector<std::string> env;
        for (const auto& [name, value] : config.env) env.push_back(name + "=" + value);
        line(out, "    NCCL env         {}", fmt::join(env, " "));
    }
    line(out, "  Peak memory / GPU  {} of {} usable ({:.0f} %; {} reserved for CUDA context and NCCL)",
         format_bytes(m.peak_memory_bytes), format_bytes(m.usable_memory_bytes),
         100.0 * static_cast<double>(m.peak_memory_bytes) / static_cast<double>(m.usable_memory_bytes),
         format_bytes(m.device_memory_bytes - m.usable_memory_bytes));
    line(out, "    {}", breakdown_line(m.peak_breakdown));
    if (m.host_memory_bytes > 0)
        line(out, "  Host memory / rank {} (pinned, offload)", format_bytes(m.host_memory_bytes));
    if (m.copy_s > 0)
        line(out, "  Host<->device      {} copying ({} to device, {} to host)", format_seconds(m.copy_s),
             format_bytes(m.h2d_bytes), format_bytes(m.d2h_bytes));
    if (m.host_compute_s > 0)
        line(out, "  Host CPU           {} (offloaded optimizer)", format_seconds(m.host_compute_s));
    if (m.io_s > 0)
        line(out, "  NVMe               {} ({} read, {} written)", format_seconds(m.io_s),
             format_bytes(m.nvme_read_bytes), format_bytes(m.nvme_write_bytes));
    if (!m.collectives.empty()) {
        line(out, "");
        line(out, "  Collectives per step ({} in total)", format_bytes(m.comm_bytes_per_step));
        const std::size_t shown = std::min<std::size_t>(m.collectives.size(), 6);
        for (std::size_t i = 0; i < shown; ++i) {
            const auto& c = m.collectives[i];
            line(out, "    {:<15} {:>12} x {:<4} over {} ranks", to_string(c.kind), format_bytes(c.bytes), c.count,
                 c.group_size);
        }
        if (shown < m.collectives.size())
            line(out, "    ... {} more sizes (see --format json)", m.collectives.size() - shown);
    }
    if (!r.plan.buckets.empty()) {
        line(out, "");
        line(out, "  Allreduce buckets: {}", r.plan.buckets.size());
        const std::size_t shown = std::min<std::size_t>(r.plan.buckets.size(), 4);
        for (std::size_t i = 0; i < shown; ++i) {
            const auto& b = r.plan.buckets[i];
            line(out, "    #{:<4} {:>12}  {} parameter tensor{}", b.index, format_bytes(b.bytes), b.params.size(),
                 b.params.size() == 1 ? "" : "s");
        }
        if (shown < r.plan.buckets.size()) {
            const auto& b = r.plan.buckets.back();
            if (shown + 1 < r.plan.buckets.size()) line(out, "    ...");
            line(out, "    #{:<4} {:>12}  {} parameter tensor{}", b.index, format_bytes(b.bytes), b.params.size(),
                 b.params.size() == 1 ? "" : "s");
        }
    }
    if (!r.plan.notes.empty()) {
        line(out, "");
        for (const auto& n : r.plan.notes) line(out, "  Note: {}", n);
    }
    if (!extras.launch.empty()) line(out, "  Launch (once per run, not per step): {}", extras.launch);
    return out;
}

std::string does_not_fit_message(const sim::SimResult& r, const sim::Config& config, const calib::Calibration& cal) {
    const sim::Metrics& m = r.metrics;
    const std::vector<std::string> tries = sim::memory_levers(r, config);
    return fmt::format(
        "does not fit: {} with --micro-batch {} needs {} per GPU but the {} has {} usable (over by {}; "
        "{}). Try {}.",
        config.model, config.micro_batch, format_bytes(m.peak_memory_bytes), cal.device.name,
        format_bytes(m.usable_memory_bytes), format_bytes(m.peak_memory_bytes - m.usable_memory_bytes),
        breakdown_line(m.peak_breakdown), fmt::join(tries, ", or "));
}

}  // namespace dtsim::cli
