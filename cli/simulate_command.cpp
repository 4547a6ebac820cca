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
#include "summary.hpp"

#include <fmt/format.h>

#include <memory>

namespace dtsim::cli {
namespace {

void run_simulate(const SimulateOptions& o) {
    if (print_knob_help_if_asked(o)) return;
    std::string launch;
    const sim::Config config = make_config(o, &launch);
    const calib::Calibration cal = load_hardware(o);
    auto workload = std::make_shared<const models::Workload>(sim::build_workload(config));
    sim::PhasedResult phased = sim::simulate_phases(workload, config, cal);
    const sim::SimResult& result = phased.headline;
    const sim::ReportExtras extras{phased.phases, phased.average_step_time_s, launch};
    if (!result.metrics.fits) {
        // JSON consumers (sweeps, scripts) still get the report, with "fits": false.
        if (o.format == "json") fmt::print("{}\n", sim::report_json(result, config, cal, extras).dump(2));
        throw DoesNotFitError(does_not_fit_message(result, config, cal));
    }
    if (o.format == "json")
        fmt::print("{}\n", sim::report_json(result, config, cal, extras).dump(2));
    else
        fmt::print("{}", summary_text(result, config, cal, extras));
    if (!o.trace.empty()) {
        traces::write_chrome_trace(sim::make_timeline(result, config, cal.name), o.trace);
        if (o.format == "text")
            fmt::print("\n  Trace written to {} (open it in https://ui.perfetto.dev or chrome://tracing)\n", o.trace);
    }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    auto* cmd = app.add_subcommand("simulate", "predict step time, throughput and peak memory of one configuration");
    add_options(*cmd, *opts, true);
    cmd->footer(
        "Example:\n  dtsim simulate --model gpt2-xl --hardware h100-sxm --nodes 2 --gpus-per-node 8 \\\n"
        "      --strategy ddp --micro-batch 8 --seq-len 1024 --set bucket_cap_mb=25 --trace ddp.json");
    cmd->callback([opts] { run_simulate(*opts); });
}

void add_demo_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    // The main job on built-in defaults: GPT-2 XL with DDP on two H100 nodes.
    opts->model = "gpt2-xl";
    opts->nodes = 2;
    opts->micro_batch = 8;
    opts->seq_len = 1024;
    opts->precision = "bf16-mixed";  // what H100 users train with
    auto* cmd = app.add_subcommand("demo",
                                   "simulate GPT-2 XL (bf16-mixed) with DDP on 2 nodes x 8 H100 (every option of "
                                   "`simulate` can override the defaults)");
    add_options(*cmd, *opts, false);
    cmd->callback([opts] { run_simulate(*opts); });
}

}  // namespace dtsim::cli
