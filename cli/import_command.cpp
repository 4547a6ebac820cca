// `dtsim import`: reads PyTorch profiler (Kineto) or Chrome traces, one file
// per rank, and reports per rank and step the step time, HTA's temporal
// breakdown, communication/computation overlap, idle time by cause, the top
// ops or kernels and every collective with its bandwidth and straggler.
#include "commands.hpp"
#include "dtsim/traces/trace_analysis.hpp"
#include "dtsim/traces/trace_reader.hpp"
#include "format_units.hpp"
#include "progress.hpp"
#include "reporter.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>

namespace dtsim::cli {
namespace {

struct ImportOptions {
    std::vector<std::string> paths;
    Reporter report;
    std::int64_t step = -1;
    std::size_t top = 10;
};

constexpr std::size_t kMaxCollectiveRows = 60;  // the table lists this many; JSON lists every one

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }
std::string us(double ns) { return fmt::format("{:.1f}", ns / 1e3); }
std::string pct(std::int64_t part, std::int64_t whole) {
    return whole > 0 ? fmt::format("{:.1f}", 100.0 * static_cast<double>(part) / static_cast<double>(whole)) : "-";
}
std::string step_label(std::int64_t step) { return step < 0 ? "all" : std::to_string(step); }

std::string shorten(std::string_view s, std::size_t width) {
    if (s.size() <= width) return std::string(s);
    return std::string(s.substr(0, width - 3)) + "...";
}

std::string table(const traces::TraceModel& m, const traces::TraceAnalysis& a, const ImportOptions& o) {
    std::string out;
    out += fmt::format("{} rank{} read: {} events ({} of phases dtsim does not model skipped, {} dropped)\n",
                       m.ranks.size(), m.ranks.size() == 1 ? "" : "s", format_thousands(static_cast<std::int64_t>(m.stats.events)),
                       m.stats.unknown_phase_events, m.stats.dropped_events);
    for (std::size_t r = 0; r < m.ranks.size(); ++r) {
        const auto& info = m.ranks[r];
        out += fmt::format("  rank {:<3} {}  ({}{}{})\n", info.rank, info.source_file, info.generator,
                           info.backend.empty() ? "" : ", " + info.backend,
                           info.world_size > 0 ? fmt::format(", world size {}", info.world_size) : "");
    }

    const auto rank_no = [&](std::int32_t index) { return m.ranks[static_cast<std::size_t>(index)].rank; };

    out += "\nSteps: the breakdown splits the step window into compute (communication or memory under compute\n"
           "counts as compute), non-compute (communication or memory alone) and idle; overlap = share of\n"
           "communication time with compute running.\n";
    out += fmt::format("{:>5} {:>5} {:>11} {:>11} {:>8} {:>12} {:>10} {:>16} {:>14} {:>11} {:>10}  {}\n", "rank", "step",
                       "step (ms)", "idle (ms)", "idle %", "compute (ms)", "compute %", "non-compute (ms)",
                       "non-compute %", "comm (ms)", "overlap %", "basis");
    bool any_idle_causes = false;
    for (const auto& s : a.steps) {
        out += fmt::format("{:>5} {:>5} {:>11} {:>11} {:>8} {:>12} {:>10} {:>16} {:>14} {:>11} {:>10}  {}\n",
                           rank_no(s.rank), step_label(s.step), ms(s.dur_ns), ms(s.breakdown.idle_ns),
                           pct(s.breakdown.idle_ns, s.window_ns), ms(s.breakdown.compute_ns),
                           pct(s.breakdown.compute_ns, s.window_ns), ms(s.breakdown.non_compute_ns),
                           pct(s.breakdown.non_compute_ns, s.window_ns), ms(s.comm_ns),
                           s.comm_ns > 0 ? fmt::format("{:.1f}", s.overlap_ratio * 100) : "-",
                           traces::to_string(s.basis));
        any_idle_causes = any_idle_causes || s.idle.computable;
    }
    if (a.steps.empty()) out += "  (no steps to analyse)\n";
    if (std::any_of(a.steps.begin(), a.steps.end(), [](const auto& s) { return s.peak_allocated_bytes >= 0; })) {
        out += "\nMemory: the most allocated during each step (torch.profiler's profile_memory=True events):\n";
        for (const auto& s : a.steps)
            if (s.peak_allocated_bytes >= 0)
                out += fmt::format("{:>5} {:>5} {:>14}  {}\n", rank_no(s.rank), step_label(s.step),
                                   format_bytes(static_cast<std::int64_t>(s.peak_allocated_bytes)), s.memory_series);
    }
    if (any_idle_causes) {
        out += "\nGPU idle time by cause (summed over streams; HTA's definitions):\n";
        out += fmt::format("{:>5} {:>5} {:>15} {:>17} {:>16}\n", "rank", "step", "host wait (ms)", "kernel wait (ms)",
                           "other wait (ms)");
        for (const auto& s : a.steps)
            if (s.idle.computable)
                out += fmt::format("{:>5} {:>5} {:>15} {:>17} {:>16}\n", rank_no(s.rank), step_label(s.step),
                                   ms(s.idle.host_wait_ns), ms(s.idle.kernel_wait_ns), ms(s.idle.other_wait_ns));
    }

    out += fmt::format("\nTop {} ops by total time{} (inclusive; per rank):\n", o.top,
                       o.step >= 0 ? fmt::format(" in step {}", o.step) : "");
    out += fmt::format("{:>5}  {:<60} {:<14} {:>7} {:>11} {:>11} {:>11} {:>11}\n", "rank", "name", "kind", "count",
                       "total (ms)", "mean (us)", "min (us)", "max (us)");
    for (const auto& op : a.top_ops)
        out += fmt::format("{:>5}  {:<60} {:<14} {:>7} {:>11} {:>11} {:>11} {:>11}\n", rank_no(op.rank),
                           shorten(op.name, 60), traces::to_string(op.kind), op.count, ms(op.total_ns), us(op.mean_ns),
                           us(static_cast<double>(op.min_ns)), us(static_cast<double>(op.max_ns)));

    if (!a.annotations.empty()) {
        out += "\nUser annotations (time per name, per rank):\n";
        out += fmt::format("{:>5}  {:<60} {:>7} {:>11} {:>11} {:>11} {:>11}\n", "rank", "name", "count", "total (ms)",
                           "mean (ms)", "min (ms)", "max (ms)");
        for (const auto& x : a.annotations)
            out += fmt::format("{:>5}  {:<60} {:>7} {:>11} {:>11} {:>11} {:>11}\n", rank_no(x.rank),
                               shorten(x.name, 60), x.count, ms(x.total_ns),
                               fmt::format("{:.3f}", x.mean_ns / 1e6), ms(x.min_ns), ms(x.max_ns));
    }

    out += "\nCollectives (size S, algbw = S / time and busbw as nccl-tests; straggler = the rank that entered last):\n";
    if (a.collectives.empty()) {
        out += "  (none)\n";
    } else {
        out += fmt::format("{:>5} {:>5}  {:<14} {:<10} {:>12} {:>11} {:>13} {:>13} {:>10} {:>10}  {}\n", "rank", "#",
                           "op", "dtype", "size (MB)", "time (ms)", "algbw (GB/s)", "busbw (GB/s)", "straggler",
                           "lag (ms)", "name");
        for (std::size_t i = 0; i < a.collectives.size() && i < kMaxCollectiveRows; ++i) {
            const auto& c = a.collectives[i];
            out += fmt::format(
                "{:>5} {:>5}  {:<14} {:<10} {:>12} {:>11} {:>13} {:>13} {:>10} {:>10}  {}\n", rank_no(c.rank),
                c.ordinal, c.op, c.dtype.empty() ? "-" : c.dtype,
                c.size_bytes > 0 ? fmt::format("{:.3f}", static_cast<double>(c.size_bytes) / 1e6) : "-", ms(c.dur_ns),
                c.size_bytes > 0 ? fmt::format("{:.2f}", c.algbw_gbps) : "-",
                c.size_bytes > 0 ? fmt::format("{:.2f}", c.busbw_gbps) : "-",
                c.straggler_rank >= 0 ? std::to_string(c.straggler_rank) : "-",
                c.straggler_rank >= 0 ? ms(c.straggler_lag_ns) : "-", shorten(c.name, 60));
        }
        if (a.collectives.size() > kMaxCollectiveRows)
            out += fmt::format("  ... {} more (--format json lists every one)\n",
                               a.collectives.size() - kMaxCollectiveRows);
    }
    for (const auto& n : a.notes) out += "note: " + n + "\n";
    return out;
}

nlohmann::ordered_json to_json(const traces::TraceModel& m, const traces::TraceAnalysis& a) {
    using J = nlohmann::ordered_json;
    J j;
    j["units"] = "times in nanoseconds (*_ns), sizes in bytes, bandwidths in GB/s (1e9 B/s)";
    J ranks = J::array();
    for (const auto& r : m.ranks)
        ranks.push_back(J{{"rank", r.rank},
                          {"file", r.source_file},
                          {"generator", r.generator},
                          {"backend", r.backend},
                          {"world_size", r.world_size}});
    j["ranks"] = ranks;
    j["events"] = m.stats.events;
    j["unknown_phase_events"] = m.stats.unknown_phase_events;
    j["dropped_events"] = m.stats.dropped_events;
    const auto rank_no = [&](std::int32_t index) { return m.ranks[static_cast<std::size_t>(index)].rank; };
    J steps = J::array();
    for (const auto& s : a.steps) {
        J x{{"rank", rank_no(s.rank)},
            {"step", s.step < 0 ? J(nullptr) : J(s.step)},
            {"start_ns", s.start_ns},
            {"step_ns", s.dur_ns},
            {"basis", traces::to_string(s.basis)},
            {"window_ns", s.window_ns},
            {"idle_ns", s.breakdown.idle_ns},
            {"compute_ns", s.breakdown.compute_ns},
            {"non_compute_ns", s.breakdown.non_compute_ns},
            {"comm_ns", s.comm_ns},
            {"comm_under_compute_ns", s.comm_under_compute_ns},
            {"overlap_ratio", s.overlap_ratio}};
        if (s.peak_allocated_bytes >= 0) {
            x["peak_allocated_bytes"] = s.peak_allocated_bytes;
            x["memory_series"] = s.memory_series;
        }
        if (s.idle.computable)
            x["idle_causes"] = J{{"host_wait_ns", s.idle.host_wait_ns},
                                 {"kernel_wait_ns", s.idle.kernel_wait_ns},
                                 {"other_wait_ns", s.idle.other_wait_ns}};
        steps.push_back(x);
    }
    j["steps"] = steps;
    J ops = J::array();
    for (const auto& o : a.top_ops)
        ops.push_back(J{{"rank", rank_no(o.rank)},
                        {"name", o.name},
                        {"kind", traces::to_string(o.kind)},
                        {"count", o.count},
                        {"total_ns", o.total_ns},
                        {"mean_ns", o.mean_ns},
                        {"min_ns", o.min_ns},
                        {"max_ns", o.max_ns}});
    j["top_ops"] = ops;
    J ann = J::array();
    for (const auto& x : a.annotations)
        ann.push_back(J{{"rank", rank_no(x.rank)},
                        {"name", x.name},
                        {"count", x.count},
                        {"total_ns", x.total_ns},
                        {"mean_ns", x.mean_ns},
                        {"min_ns", x.min_ns},
                        {"max_ns", x.max_ns}});
    j["annotations"] = ann;
    J colls = J::array();
    for (const auto& c : a.collectives)
        colls.push_back(J{{"rank", rank_no(c.rank)},
                          {"ordinal", c.ordinal},
                          {"op", c.op},
                          {"name", c.name},
                          {"dtype", c.dtype},
                          {"start_ns", c.start_ns},
                          {"dur_ns", c.dur_ns},
                          {"size_bytes", c.size_bytes},
                          {"group_size", c.group_size},
                          {"algbw_gbps", c.algbw_gbps},
                          {"busbw_gbps", c.busbw_gbps},
                          {"straggler_rank", c.straggler_rank < 0 ? J(nullptr) : J(c.straggler_rank)},
                          {"straggler_lag_ns", c.straggler_lag_ns}});
    j["collectives"] = colls;
    j["notes"] = a.notes;
    return j;
}

}  // namespace

void add_import_command(CLI::App& app) {
    auto o = std::make_shared<ImportOptions>();
    auto* cmd = app.add_subcommand(
        "import", "read PyTorch profiler (Kineto) or Chrome traces and report steps, breakdown, overlap, top ops and "
                  "collectives");
    cmd->add_option("traces", o->paths,
                    "trace files (.json, .json.gz: one rank each) or directories of them (every *.json / *.json.gz, "
                    "or only *.pt.trace.json* where there are such)")
        ->required();
    o->report.add_option(*cmd, {"table", "json"}, "output: table or json");
    cmd->add_option("--step", o->step, "only ProfilerStep#N (default: every step, or the whole trace without steps)");
    cmd->add_option("--top", o->top, "ops per rank in the top-ops table")->check(CLI::Range(1, 100000))->capture_default_str();
    cmd->footer(
        "The breakdown follows HTA (Holistic Trace Analysis): on GPU traces over the kernels, on CPU-only traces\n"
        "(torch + gloo) over the main thread's ops, with gloo ops on any thread as communication.\n\n"
        "Examples:\n"
        "  dtsim import traces/                      # a tensorboard_trace_handler directory, one file per rank\n"
        "  dtsim import rank0.pt.trace.json.gz rank1.pt.trace.json.gz --step 3 --top 5\n"
        "  dtsim import ddp.json --format json       # a trace written by dtsim simulate --trace");
    cmd->callback([o] {
        std::uint64_t total_bytes = 0;
        for (const auto& p : o->paths) {
            std::error_code ec;
            if (std::filesystem::is_directory(p, ec)) {
                for (const auto& e : std::filesystem::directory_iterator(p, ec))
                    if (e.is_regular_file(ec)) total_bytes += e.file_size(ec);
            } else if (std::filesystem::is_regular_file(p, ec)) {
                total_bytes += std::filesystem::file_size(p, ec);
            }
        }
        // A bar only where reading takes a while (~64 MB and up).
        ProgressBar bar(total_bytes >= (std::uint64_t{64} << 20));
        traces::ReadOptions ro;
        ro.progress = [&bar](std::uint64_t done, std::uint64_t total) {
            if (total > 0) bar.update("reading traces", static_cast<double>(done) / static_cast<double>(total));
        };
        const traces::TraceModel model = traces::read_traces(o->paths, ro);
        bar.finish("");
        const traces::TraceAnalysis analysis =
            traces::analyze_trace(model, traces::AnalysisOptions{.step = o->step, .top_k = o->top});
        o->report.print({.text = [&] { return table(model, analysis, *o); },
                         .json = [&] { return to_json(model, analysis).dump(1); }});
    });
}

}  // namespace dtsim::cli
