// `dtsim simulate` and `dtsim demo`: one configuration, its summary or JSON,
// and optionally its Chrome trace.
#include "commands.hpp"
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

struct SimulateOptions {
    std::string model;
    std::string hardware = "h100-sxm";
    int nodes = 1;
    int gpus_per_node = 8;
    std::string strategy = "ddp";
    std::int64_t micro_batch = 1;
    std::int64_t seq_len = 0;
    int grad_accum = 1;
    std::string precision = "fp32";
    std::string optimizer = "adam";
    std::string attention = "flash";
    bool activation_checkpointing = false;
    bool sync_batchnorm = false;
    std::vector<std::string> set;
    std::string trace;
    std::string format = "text";
};

std::string names_list(const std::vector<std::string>& names) {
    return fmt::format("{}", fmt::join(names, ", "));
}

void add_options(CLI::App& cmd, SimulateOptions& o, bool model_required) {
    auto* model =
        cmd.add_option("--model,-m", o.model, "model: " + names_list(models::model_names()) + " (see `dtsim models`)");
    if (model_required) model->required();
    cmd.add_option("--hardware", o.hardware, "hardware preset (see `dtsim hardware`) or a calibration JSON file")
        ->capture_default_str();
    cmd.add_option("--nodes", o.nodes, "number of nodes")->capture_default_str();
    cmd.add_option("--gpus-per-node", o.gpus_per_node, "GPUs (ranks) per node")->capture_default_str();
    cmd.add_option("--strategy,-s", o.strategy,
                   "strategy: " + names_list(sim::strategies().names()) +
                       ", a Lightning name (ddp_spawn, fsdp_cpu_offload, deepspeed_stage_3_offload, ...) or a "
                       "DeepSpeed config file (ds.json)")
        ->capture_default_str();
    cmd.add_option("--micro-batch,-b", o.micro_batch, "samples per GPU per micro-step")->capture_default_str();
    cmd.add_option("--seq-len", o.seq_len, "tokens per sample (default: the model's context length)");
    cmd.add_option("--grad-accum", o.grad_accum, "micro-steps per optimizer step (DDP no_sync on all but the last)")
        ->capture_default_str();
    cmd.add_option("--precision", o.precision, "fp32, fp16-mixed or bf16-mixed (torch.autocast)")
        ->capture_default_str();
    cmd.add_option("--optimizer", o.optimizer, "adam or sgd")->capture_default_str();
    cmd.add_option("--attention", o.attention, "attention kernel: flash (SDPA, HF default) or eager")
        ->capture_default_str();
    cmd.add_flag("--activation-checkpointing,--ckpt", o.activation_checkpointing,
                 "recompute each transformer block's forward in backward (torch.utils.checkpoint per block)");
    cmd.add_flag("--sync-batchnorm", o.sync_batchnorm,
                 "BatchNorm layers synchronise statistics across ranks (SyncBatchNorm; resnet50)");
    cmd.add_option("--set", o.set,
                   "strategy knob by its torch name, e.g. --set bucket_cap_mb=50 (repeatable; "
                   "`--set help=1` lists the strategy's knobs)");
    cmd.add_option("--trace", o.trace, "write a Chrome trace (Perfetto, chrome://tracing) to this file");
    cmd.add_option("--format", o.format, "output: text or json")
        ->check(CLI::IsMember({"text", "json"}))
        ->capture_default_str();
}

std::string knob_help(const std::string& strategy) {
    sim::Config c;
    c.strategy = strategy;
    sim::resolve_lightning_name(c);
    const auto& s = sim::strategies().find(c.strategy);
    std::string out = fmt::format("Knobs of strategy '{}' ({}):\n", s.name, s.description);
    for (const auto& k : s.value.knobs)
        out += fmt::format("  {:<26} default {:<6} {}\n", k.name, k.default_value, k.description);
    return out;
}

// The strategy name: a dtsim strategy, a Lightning name, or a DeepSpeed config file.
void check_strategy_name(const std::string& name) {
    if (name.ends_with(".json") || sim::strategies().find_or_null(name)) return;
    std::vector<std::string> valid = sim::strategies().names();
    for (const auto& l : sim::lightning_strategies()) valid.push_back(l.name);
    throw ConfigError(unknown_name_message("strategy", name, valid) + " (or a DeepSpeed config: --strategy ds.json)");
}

sim::Config make_config(const SimulateOptions& o, std::string* launch = nullptr) {
    sim::Config c;
    c.model = o.model;
    c.strategy = o.strategy;
    c.topology = {o.nodes, o.gpus_per_node};
    c.micro_batch = o.micro_batch;
    c.seq_len = o.seq_len;
    c.grad_accum = o.grad_accum;
    c.precision = sim::precision_from_string(o.precision);
    c.optimizer = sim::optimizer_from_string(o.optimizer);
    c.attention = models::attention_from_string(o.attention);
    c.activation_checkpointing = o.activation_checkpointing;
    c.sync_batchnorm = o.sync_batchnorm;
    // A DeepSpeed config file stands for the ZeRO strategy with its knobs.
    if (o.strategy.ends_with(".json")) apply_deepspeed_config(o.strategy, c);
    for (const auto& kv : o.set) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ConfigError(fmt::format("--set {}: expected key=value, e.g. --set bucket_cap_mb=25", kv));
        c.knobs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    if (auto how = sim::resolve_lightning_name(c); how && launch) *launch = *how;
    check_strategy_name(c.strategy);
    c.validate();
    return c;
}

void run_simulate(const SimulateOptions& o) {
    for (const auto& kv : o.set)
        if (kv.rfind("help=", 0) == 0 || kv == "help") {
            fmt::print("{}", knob_help(o.strategy));
            return;
        }
    std::string launch;
    const sim::Config config = make_config(o, &launch);
    const calib::Calibration cal = calib::load_hardware(o.hardware);
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
