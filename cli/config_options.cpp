#include "config_options.hpp"

#include "dtsim/sim/nccl_model.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/deepspeed_config.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>

#include <set>

namespace dtsim::cli {
namespace {

std::string names_list(const std::vector<std::string>& names) {
    return fmt::format("{}", fmt::join(names, ", "));
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

}  // namespace

void add_options(CLI::App& cmd, SimulateOptions& o, bool model_required, bool with_topology) {
    auto* model =
        cmd.add_option("--model,-m", o.model,
                       "model: " + names_list(models::model_names()) +
                           " (see `dtsim models`), or a HuggingFace config.json or the directory holding one "
                           "(llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, qwen2_moe, gpt2, gpt_neox, falcon)");
    if (model_required) model->required();
    cmd.add_option("--hardware", o.hardware, "hardware preset (see `dtsim hardware`) or a calibration JSON file")
        ->capture_default_str();
    if (with_topology) {
        cmd.add_option("--nodes", o.nodes, "number of nodes")->capture_default_str();
        cmd.add_option("--gpus-per-node", o.gpus_per_node, "GPUs (ranks) per node")->capture_default_str();
    }
    cmd.add_option("--strategy,-s", o.strategy,
                   "strategy: " + names_list(sim::strategies().names()) +
                       ", a Lightning name (ddp_spawn, lightning:fsdp, fsdp_cpu_offload, deepspeed_stage_3_offload, ...), a "
                       "Lightning strategy as written in Python (\"FSDPStrategy(sharding_strategy='SHARD_GRAD_OP', "
                       "cpu_offload=True)\"; DDPStrategy, FSDPStrategy, DeepSpeedStrategy with keyword arguments) or a "
                       "DeepSpeed config file (ds.json)")
        ->capture_default_str();
    cmd.add_option("--gpu-memory", o.gpu_memory_gib,
                   "override the hardware's device memory, in GiB per GPU (e.g. 40 for an A100 40GB)");
    cmd.add_option("--inter-node-gbps", o.inter_node_gbps,
                   "override the network between nodes: bus bandwidth per GPU in GB/s (e.g. 12.5 for 100 Gb/s "
                   "Ethernet per GPU); replaces the hardware's inter-node curves and their measured points, and the "
                   "bandwidth of NCCL's multi-node graphs");
    cmd.add_option("--network", o.network,
                   "the nodes talk over NCCL's socket transport (TCP; no InfiniBand or RoCE) through N NICs of "
                   "GBIT Gb/s each per node: ethernet:1x100, aws:4x100 (ENA) or gcp:1x200 (gVNIC). FLOW: GB/s one "
                   "TCP flow sustains (default 1.25; iperf3 with one stream measures it). Prices --env "
                   "NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD; advise tries them")
        ->type_name("KIND:NxGBIT[:FLOW]");
    cmd.add_option("--micro-batch,-b", o.micro_batch, "samples per GPU per micro-step")->capture_default_str();
    cmd.add_option("--seq-len", o.seq_len, "tokens per sample (default: the model's context length)");
    cmd.add_option("--grad-accum", o.grad_accum, "micro-steps per optimizer step (DDP no_sync on all but the last)")
        ->capture_default_str();
    cmd.add_option("--precision", o.precision,
                   "fp32, fp16-mixed or bf16-mixed (fp32 weights, torch.autocast), or fp16-true or bf16-true "
                   "(the model converted: 16-bit weights, gradients and Adam state). Lightning's names work too: "
                   "32-true, 16-mixed, bf16-mixed, 16-true, bf16-true")
        ->capture_default_str();
    cmd.add_option("--optimizer", o.optimizer,
                   "adam, adamw (torch.optim.AdamW: its weight decay is one more pass over the parameters) or sgd")
        ->capture_default_str();
    cmd.add_option("--attention", o.attention, "attention kernel: flash (SDPA, HF default) or eager")
        ->capture_default_str();
    cmd.add_flag("--activation-checkpointing,--ckpt", o.activation_checkpointing,
                 "recompute each transformer block's forward in backward (torch.utils.checkpoint per block)");
    cmd.add_option("--ac-freq", o.ac_freq,
                   "with --activation-checkpointing: only every N-th block (selective AC by layer, torchtitan's "
                   "ac_freq; 2 = blocks 2, 4, ...)")
        ->capture_default_str();
    cmd.add_flag("--ac-op", o.ac_op,
                 "with --activation-checkpointing: op-level selective AC in each block (torchtitan's "
                 "selective_ac_option=op): keep the outputs of SDPA and of every other bias-free matmul, "
                 "recompute the rest");
    cmd.add_flag("--sync-batchnorm", o.sync_batchnorm,
                 "BatchNorm layers synchronise statistics across ranks (SyncBatchNorm; resnet50)");
    cmd.add_option("--set", o.set,
                   "strategy knob by its torch name, e.g. --set bucket_cap_mb=50 (repeatable; "
                   "`--set help=1` lists the strategy's knobs)");
    cmd.add_option("--env", o.env,
                   "an NCCL variable of the run, as NCCL reads it, e.g. --env NCCL_ALGO=ring or --env "
                   "NCCL_MAX_NCHANNELS=8 (repeatable). Models: " +
                       sim::nccl_env_names() + ". Presets of NVIDIA SXM nodes price NCCL's own algorithm choice")
        ->type_name("NAME=VALUE");
    cmd.add_option("--trace", o.trace, "write a Chrome trace (Perfetto, chrome://tracing) to this file");
}

bool print_knob_help_if_asked(const SimulateOptions& o) {
    for (const auto& kv : o.set)
        if (kv.rfind("help=", 0) == 0 || kv == "help") {
            fmt::print("{}", knob_help(o.strategy));
            return true;
        }
    return false;
}

calib::Calibration load_hardware(const SimulateOptions& o) {
    calib::Calibration c = calib::load_hardware(o.hardware);
    std::vector<std::string> changed;
    if (o.gpu_memory_gib) {
        // A GPU's memory: more than 0, less than any device built (the largest have 192 GiB).
        if (!(*o.gpu_memory_gib > 0) || *o.gpu_memory_gib > 65536)
            throw ConfigError(fmt::format("--gpu-memory {}: expected GiB per GPU, more than 0 and at most 65536",
                                          *o.gpu_memory_gib));
        c.device.memory_bytes = static_cast<std::int64_t>(*o.gpu_memory_gib * 1024 * 1024 * 1024);
        changed.push_back(fmt::format("device memory {} GiB (--gpu-memory)", *o.gpu_memory_gib));
    }
    if (o.inter_node_gbps) {
        calib::use_inter_node_bandwidth(c, *o.inter_node_gbps, o.hardware);
        changed.push_back(fmt::format("inter-node bus bandwidth {} GB/s per GPU (--inter-node-gbps)",
                                      *o.inter_node_gbps));
    }
    if (!o.network.empty()) {
        if (o.inter_node_gbps)
            throw ConfigError("--network and --inter-node-gbps both set the network between nodes; give one");
        const calib::NcclSocketNet net = calib::parse_socket_network(o.network);
        calib::use_socket_network(c, net);
        changed.push_back(calib::describe(net) + " (--network)");
    }
    if (!changed.empty()) {
        // Shown wherever the hardware is named: "h100-sxm (preset, overridden: ...)".
        c.provenance.source += fmt::format(", overridden: {}", fmt::join(changed, "; "));
        c.provenance.notes += fmt::format(" Overridden: {}.", fmt::join(changed, "; "));
    }
    return c;
}

sim::Config make_config(const SimulateOptions& o, std::string* launch) {
    sim::Config c;
    c.model = o.model;
    c.strategy = o.strategy;
    c.topology = {o.nodes, o.gpus_per_node};
    c.micro_batch = o.micro_batch;
    if (o.seq_len) {
        // Given explicitly, 0 is an error like any value < 1, not "the model's default".
        if (*o.seq_len < 1)
            throw ConfigError(fmt::format("--seq-len must be >= 1 (got {}); omit it for the model's context length",
                                          *o.seq_len));
        c.seq_len = *o.seq_len;
    }
    c.grad_accum = o.grad_accum;
    c.precision = sim::precision_from_string(o.precision);
    c.optimizer = sim::optimizer_from_string(o.optimizer);
    c.decoupled_weight_decay = o.optimizer == "adamw";
    c.attention = models::attention_from_string(o.attention);
    c.activation_checkpointing = o.activation_checkpointing;
    c.ac_freq = o.ac_freq;
    c.ac_op = o.ac_op;
    c.sync_batchnorm = o.sync_batchnorm;
    // A DeepSpeed config file stands for the ZeRO strategy with its knobs.
    if (o.strategy.ends_with(".json")) {
        // Once per file and process: a sweep builds many configurations from it.
        static std::set<std::string> told;
        for (const std::string& note : apply_deepspeed_config(o.strategy, c))
            if (told.insert(note).second) fmt::print(stderr, "dtsim: note: {}\n", note);
    }
    for (const auto& kv : o.set) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ConfigError(fmt::format("--set {}: expected key=value, e.g. --set bucket_cap_mb=25", kv));
        c.knobs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    for (const auto& kv : o.env) {
        auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ConfigError(fmt::format("--env {}: expected NAME=VALUE, e.g. --env NCCL_ALGO=ring", kv));
        c.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    if (auto how = sim::resolve_lightning_name(c); how && launch) *launch = *how;
    check_strategy_name(c.strategy);
    c.validate();
    return c;
}

void add_torch_version_option(CLI::App& cmd, std::string& version) {
    cmd.add_option("--torch-version", version,
                   "with --backend gloo: the torch to predict or stand in for, as X.Y (default: 2.8 or later). Its "
                   "gloo sums fp16 (the fp16 compression hook's allreduce) in gloo::float16 before 2.8, about 2x "
                   "slower than c10::Half from 2.8");
}

runtime::HalfSum torch_version_half_sum(const std::string& version, const std::string& backend) {
    if (version.empty()) return runtime::HalfSum::c10;
    if (backend != "gloo")
        throw ConfigError(fmt::format(
            "--torch-version {}: only with --backend gloo (it says how that torch sums fp16 over gloo)", version));
    return runtime::half_sum_of_torch(version, "--torch-version");
}

}  // namespace dtsim::cli
