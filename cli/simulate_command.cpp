// `dtsim simulate` and `dtsim demo`: one configuration, its summary or JSON,
// and optionally its Chrome trace.
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/deepspeed_config.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/strategy.hpp"
#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/chrome_trace.hpp"
#include "dtsim/traces/trace_reader.hpp"
#include "dtsim/traces/trace_workload.hpp"
#include "summary.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

namespace dtsim::cli {
namespace {

// `simulate --from-trace`: where the workload comes from.
struct TraceSource {
    std::vector<std::string> paths;
    std::int64_t step = -1;
    std::int32_t rank = 0;
    double unprofiled_step_ms = 0;
};

// The workload a profile describes, every op at its measured time.
traces::TraceWorkload read_trace_workload(const TraceSource& t, std::int64_t micro_batch) {
    const traces::TraceModel model = traces::read_traces(t.paths);
    // The rank's own file names it (workload_from_trace refuses a rank the trace lacks).
    const bool known = t.rank >= 0 && static_cast<std::size_t>(t.rank) < model.ranks.size() &&
                       !model.ranks[static_cast<std::size_t>(t.rank)].source_file.empty();
    const std::string source = known ? model.ranks[static_cast<std::size_t>(t.rank)].source_file : t.paths.front();
    traces::TraceWorkload w =
        traces::workload_from_trace(model, source,
                                    {.rank = t.rank,
                                     .step = t.step,
                                     .micro_batch = micro_batch,
                                     .unprofiled_step_ns = std::llround(t.unprofiled_step_ms * 1e6)});
    w.workload.model = fmt::format("trace {}", std::filesystem::path(source).filename().string());
    return w;
}

nlohmann::json trace_json(const traces::TraceWorkload& t) {
    return {{"file", t.workload.profile},
            {"step", t.step},
            {"measured_step_time_s", static_cast<double>(t.step_ns) / 1e9},
            {"measured_forward_s", static_cast<double>(t.forward_ns) / 1e9},
            {"measured_backward_s", static_cast<double>(t.backward_ns) / 1e9},
            {"measured_optimizer_s", static_cast<double>(t.optimizer_ns) / 1e9},
            {"profiler_us_per_op", t.profiler_ns_per_op / 1e3},
            {"layers", t.workload.layers.size()},
            {"parameters", t.workload.param_count()},
            {"notes", t.notes}};
}

void run_simulate(const SimulateOptions& o, const TraceSource& from_trace) {
    if (print_knob_help_if_asked(o)) return;
    if (o.model.empty() && from_trace.paths.empty())
        throw ConfigError("simulate needs --model NAME or --from-trace FILES (see `dtsim simulate --help`)");
    std::optional<traces::TraceWorkload> traced;
    SimulateOptions options = o;
    if (!from_trace.paths.empty()) {
        traced = read_trace_workload(from_trace, o.micro_batch);
        options.model = traced->workload.model;
    }
    std::string launch;
    const sim::Config config = make_config(options, &launch);
    const calib::Calibration cal = load_hardware(options);
    auto workload = traced ? std::make_shared<const models::Workload>(traced->workload)
                           : std::make_shared<const models::Workload>(sim::build_workload(config));
    sim::PhasedResult phased = sim::simulate_phases(workload, config, cal);
    const sim::SimResult& result = phased.headline;
    const sim::ReportExtras extras{phased.phases, phased.average_step_time_s, launch};
    const auto report = [&] {
        nlohmann::json j = sim::report_json(result, config, cal, extras);
        if (traced) j["from_trace"] = trace_json(*traced);
        return j;
    };
    const auto json = [&] { return report().dump(2); };
    if (!result.metrics.fits) {
        // JSON consumers (sweeps, scripts) still get the report, with "fits": false.
        if (o.report.json()) o.report.print({.json = json});
        throw DoesNotFitError(does_not_fit_message(result, config, cal));
    }
    o.report.print({.text =
                        [&] {
                            std::string out;
                            if (traced) {
                                out += fmt::format("From the profile {}:\n", traced->workload.profile);
                                for (const std::string& note : traced->notes) out += fmt::format("  - {}\n", note);
                                out += fmt::format(
                                    "  Each op is priced at its measured time; collectives, copies and memory "
                                    "come from the hardware ({}).\n\n",
                                    cal.name);
                            }
                            return out + summary_text(result, config, cal, extras);
                        },
                    .json = json});
    if (!o.trace.empty()) {
        traces::write_chrome_trace(sim::make_timeline(result, config, cal), o.trace);
        o.report.note(
            fmt::format("\n  Trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)", o.trace));
    }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    auto trace = std::make_shared<TraceSource>();
    auto* cmd = app.add_subcommand("simulate", "predict step time, throughput and peak memory of one configuration");
    add_options(*cmd, *opts, false);
    opts->report.add_option(*cmd, {"text", "json"}, "output: text or json");
    auto* from = cmd->add_option("--from-trace", trace->paths,
                                 "build the model from a torch.profiler trace of one training step on one rank, "
                                 "without a distributed wrapper (record_shapes=True; profile_memory=True for "
                                 "activation memory): each op is priced at its measured time, and the strategy, "
                                 "scale and hardware options predict the rest. Replaces --model; --micro-batch then "
                                 "says how many samples the profiled step held");
    cmd->add_option("--trace-step", trace->step,
                    "with --from-trace: the ProfilerStep#N to read (default: the median "
                    "step by duration)")
        ->needs(from);
    cmd->add_option("--trace-rank", trace->rank,
                    "with --from-trace: which rank's file to read, as an index (default 0)")
        ->needs(from);
    cmd->add_option("--unprofiled-step-ms", trace->unprofiled_step_ms,
                    "with --from-trace: the same step's time without the profiler (e.g. from your training log); "
                    "the profiler's own cost per recorded op is then taken off every op")
        ->check(CLI::PositiveNumber)
        ->needs(from);
    from->excludes(cmd->get_option("--model"));
    cmd->footer(
        "Examples:\n  dtsim simulate --model gpt2-xl --hardware h100-sxm --nodes 2 --gpus-per-node 8 \\\n"
        "      --strategy ddp --micro-batch 4 --seq-len 1024 --precision bf16-mixed --set bucket_cap_mb=25 \\\n"
        "      --trace ddp.json\n"
        "  dtsim simulate --from-trace profile.pt.trace.json.gz --hardware torch-cpu.json --gpus-per-node 2 \\\n"
        "      --strategy ddp --set bucket_cap_mb=25 --optimizer sgd   # a one-rank CPU profile, predicted on two");
    cmd->callback([opts, trace] { run_simulate(*opts, *trace); });
}

void add_demo_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    // The main job on built-in defaults: GPT-2 XL with DDP on two H100 nodes.
    opts->model = "gpt2-xl";
    opts->nodes = 2;
    opts->micro_batch = 4;  // 8 does not fit an 80 GB H100 under DDP (torch peaks at 55 GiB with 4)
    opts->seq_len = 1024;
    opts->precision = "bf16-mixed";  // what H100 users train with
    auto* cmd = app.add_subcommand("demo",
                                   "simulate GPT-2 XL (bf16-mixed) with DDP on 2 nodes x 8 H100 (every option of "
                                   "`simulate` can override the defaults)");
    add_options(*cmd, *opts, false);
    opts->report.add_option(*cmd, {"text", "json"}, "output: text or json");
    cmd->callback([opts] { run_simulate(*opts, {}); });
}

}  // namespace dtsim::cli
