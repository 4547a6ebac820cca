#include "dtsim/advisor/emit.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/sim/fsdp_wrap.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::advisor {
namespace {

// The config with a Lightning name resolved to the simulator strategy and its knobs.
sim::Config resolved(const sim::Config& config) {
    sim::Config c = config;
    sim::resolve_lightning_name(c);
    return c;
}

// The comment that says what `Block` stands for: the model's own block class where dtsim knows it.
std::string block_comment(const sim::Config& c) {
    const std::string cls = sim::build_workload(c).block_class;
    return cls.empty() ? "# Block: your model's transformer block class\n"
                       : fmt::format("# Block: your model's block class ({}: {})\n", c.model, cls);
}

sim::Knobs knobs_of(const sim::Config& c) {
    const auto& strategy = sim::strategies().find(c.strategy);
    return sim::Knobs(strategy.name, strategy.value.knobs, c.knobs);
}

bool integral(double x) {
    return x == std::floor(x) && std::fabs(x) < 9e15;
}

// 5e8 -> "500000000", 0.5 -> "0.5".
std::string number(double x) {
    if (integral(x)) return fmt::format("{}", static_cast<std::int64_t>(x));
    return fmt::format("{}", x);
}

Json json_number(double x) {
    if (integral(x)) return Json(static_cast<std::int64_t>(x));
    return Json(x);
}

std::string py_bool(bool b) {
    return b ? "True" : "False";
}

std::string joined(const std::vector<std::string>& args, const std::string& indent) {
    std::string out;
    for (const auto& a : args) out += indent + a + ",\n";
    return out;
}

// A call with one argument a line: name(\n    a,\n    b,\n)
std::string call(const std::string& name, const std::vector<std::string>& args) {
    if (args.empty()) return name + "()";
    return name + "(\n" + joined(args, "    ") + ")";
}

bool overlap_comm(const sim::Knobs& k) {
    const std::string& v = k.text("overlap_comm");
    return v == "auto" ? k.number("stage") == 3 : v == "true";
}

std::string torch_dtype(const std::string& d) {
    if (d == "bf16") return "torch.bfloat16";
    if (d == "fp16") return "torch.float16";
    return "torch.float32";
}

// FSDP's MixedPrecision dtypes: "auto" is the --precision's 16-bit type (fp32 without).
std::pair<std::string, std::string> fsdp_dtypes(const sim::Config& c, const sim::Knobs& k) {
    const std::string automatic(to_string(sim::compute_dtype(c.precision)));
    std::string param = k.text("param_dtype") == "auto" ? automatic : k.text("param_dtype");
    std::string reduce = k.text("reduce_dtype") == "auto" ? param : k.text("reduce_dtype");
    return {param, reduce};
}

std::string checkpoint_note(const sim::Config& c) {
    if (c.ac_op)
        return "# op-level selective activation checkpointing (torchtitan's selective_ac_option=\"op\"): "
               "checkpoint_wrapper(block, context_fn=...) around each transformer block, the context from "
               "torch.utils.checkpoint.create_selective_checkpoint_contexts(policy), where the policy returns "
               "CheckpointPolicy.MUST_SAVE for SDPA's flash / efficient kernels and for aten.mm calls 1, 3, 5, ... "
               "of the block, and PREFER_RECOMPUTE for everything else\n";
    if (c.ac_freq <= 1) return "# activation checkpointing: torch.utils.checkpoint around each transformer block\n";
    return fmt::format(
        "# selective activation checkpointing: torch.utils.checkpoint around every {}th transformer "
        "block only (blocks {}, {}, ...; torchtitan's ac_freq={})\n",
        c.ac_freq, c.ac_freq, 2 * c.ac_freq, c.ac_freq);
}

std::string wrap_policy(const sim::Knobs& k) {
    const std::string policy = sim::fsdp_wrap_policy(k);
    if (policy == "none") return "None";  // one unit, the root
    if (policy == "size")
        return fmt::format("functools.partial(size_based_auto_wrap_policy, min_num_params={})",
                           number(k.number("min_num_params")));
    return "functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})";
}

// DDP's own constructor arguments.
std::vector<std::string> ddp_args(const sim::Knobs& k) {
    return {
        fmt::format("bucket_cap_mb={}", number(k.number("bucket_cap_mb"))),
        fmt::format("gradient_as_bucket_view={}", py_bool(k.boolean("gradient_as_bucket_view"))),
        fmt::format("static_graph={}", py_bool(k.boolean("static_graph"))),
        fmt::format("find_unused_parameters={}", py_bool(k.boolean("find_unused_parameters"))),
        fmt::format("broadcast_buffers={}", py_bool(k.boolean("broadcast_buffers"))),
    };
}

// The hook's imports, state and hook function (the wrapper applied), for
// register_comm_hook and DDPStrategy(ddp_comm_state=, ddp_comm_hook=).
struct Hook {
    std::string imports;
    std::string setup;  // lines creating `state`
    std::string state = "None";
    std::string function;  // empty: the default allreduce
    std::string wrapper;   // Lightning's ddp_comm_wrapper
    std::string after;     // lines after the model is wrapped (model averaging)
};

Hook hook_of(const sim::Knobs& k) {
    Hook h;
    const std::string& name = k.text("comm_hook");
    if (name == "fp16_compress" || name == "bf16_compress") {
        h.imports = "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n";
        h.function = fmt::format("default_hooks.{}_hook", name);
    } else if (name == "powerSGD" || name == "batched_powerSGD") {
        h.imports =
            "from torch.distributed.algorithms.ddp_comm_hooks import default_hooks\n"
            "from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD\n";
        h.setup = call("state = powerSGD.PowerSGDState",
                       {"process_group=None",
                        fmt::format("matrix_approximation_rank={}", number(k.number("matrix_approximation_rank"))),
                        fmt::format("start_powerSGD_iter={}", number(k.number("start_powerSGD_iter"))),
                        fmt::format("min_compression_rate={}", number(k.number("min_compression_rate"))),
                        fmt::format("use_error_feedback={}", py_bool(k.boolean("use_error_feedback"))),
                        fmt::format("warm_start={}", py_bool(k.boolean("warm_start"))),
                        fmt::format("orthogonalization_epsilon={}", number(k.number("orthogonalization_epsilon")))}) +
                  "\n";
        h.state = "state";
        h.function = fmt::format("powerSGD.{}_hook", name);
        if (k.text("comm_wrapper") != "none")
            h.wrapper = "default_hooks." + k.text("comm_wrapper") + "_compress_wrapper";
    } else if (name == "post_localSGD") {
        h.imports =
            "import torch.distributed as dist\n"
            "from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import PostLocalSGDState, "
            "post_localSGD_hook\n"
            "from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager\n";
        h.setup = "subgroup, _ = dist.new_subgroups()  # one subgroup per node\n" +
                  call("state = PostLocalSGDState",
                       {"process_group=None", "subgroup=subgroup",
                        fmt::format("start_localSGD_iter={}", number(k.number("start_localSGD_iter"))),
                        fmt::format("post_local_gradient_allreduce={}",
                                    py_bool(k.boolean("post_local_gradient_allreduce")))}) +
                  "\n";
        h.state = "state";
        h.function = "post_localSGD_hook";
        h.after = fmt::format(
            "averager = PeriodicModelAverager(period={}, warmup_steps={})\n"
            "# after each optimizer.step(): averager.average_parameters(model.parameters())\n",
            number(k.number("model_averaging_period")), number(k.number("warmup_steps")));
    }
    return h;
}

std::string first_bucket_note(const sim::Knobs& k) {
    if (!k.is_set("first_bucket_mb") || k.text("first_bucket_mb") == "auto") return "";
    return fmt::format("# first_bucket_mb={}: no DDP argument; torch.distributed._DEFAULT_FIRST_BUCKET_BYTES = {}\n",
                       number(k.number("first_bucket_mb")),
                       number(std::round(k.number("first_bucket_mb") * 1024 * 1024)));
}

std::string training_notes(const sim::Config& c) {
    std::string out = fmt::format("# micro-batch {} per GPU (DataLoader batch_size), {} GPUs", c.micro_batch,
                                  c.topology.world_size());
    if (c.grad_accum > 1) out += fmt::format(", {} accumulation steps", c.grad_accum);
    out += "\n";
    return out;
}

}  // namespace

std::string emitted_strategy(const sim::Config& config) {
    return resolved(config).strategy;
}

std::string emit_deepspeed_json(const sim::Config& config) {
    const sim::Config c = resolved(config);
    if (c.strategy != "deepspeed")
        throw ConfigError(fmt::format(
            "a DeepSpeed config exists only for the deepspeed strategy, not '{}' (use --emit lightning or torch)",
            config.strategy));
    const sim::Knobs k = knobs_of(c);
    Json j = Json::object();
    j["train_micro_batch_size_per_gpu"] = c.micro_batch;
    j["gradient_accumulation_steps"] = c.grad_accum;
    j["train_batch_size"] = c.micro_batch * c.grad_accum * c.topology.world_size();
    // DeepSpeed converts the model itself and keeps fp32 master weights under
    // either 16-bit precision: Lightning's bf16-true and bf16-mixed emit the same.
    j["bf16"] = {{"enabled", sim::compute_dtype(c.precision) == DType::bf16}};
    j["fp16"] = {{"enabled", sim::compute_dtype(c.precision) == DType::fp16}};
    Json zero = Json::object();
    const bool pin = k.boolean("pin_memory");
    for (const auto& [name, value] : k.values()) {
        // The knobs the config sets (DeepSpeed's defaults are dtsim's), and always the stage.
        if (!k.applies(name) || name == "pin_memory" || (name != "stage" && !k.is_set(name))) continue;
        if (name == "stage") {
            zero["stage"] = static_cast<int>(k.number("stage"));
        } else if (name == "overlap_comm") {
            zero[name] = overlap_comm(k);
        } else if (name == "offload_optimizer" || name == "offload_param") {
            if (value == "none") continue;
            zero[name] = {{"device", value}, {"pin_memory", pin}};
        } else if (value == "true" || value == "false") {
            zero[name] = value == "true";
        } else {
            zero[name] = json_number(k.number(name));
        }
    }
    // pin_memory without an offload has no effect and no DeepSpeed key (0.19.8
    // ignores the deprecated cpu_offload_use_pin_memory's value): not written.
    j["zero_optimization"] = std::move(zero);
    return j.dump(2) + "\n";
}

std::string emit_lightning(const sim::Config& config) {
    const sim::Config c = resolved(config);
    const sim::Knobs k = knobs_of(c);
    std::string imports = "from lightning.pytorch import Trainer\n";
    std::string setup;
    std::string strategy;
    if (c.strategy == "ddp") {
        imports += "from lightning.pytorch.strategies import DDPStrategy\n";
        const Hook h = hook_of(k);
        imports += h.imports;
        setup = h.setup + first_bucket_note(k);
        std::vector<std::string> args = ddp_args(k);
        if (!h.function.empty()) {
            args.push_back("ddp_comm_state=" + h.state);
            args.push_back("ddp_comm_hook=" + h.function);
            if (!h.wrapper.empty()) args.push_back("ddp_comm_wrapper=" + h.wrapper);
            if (k.text("comm_hook") == "post_localSGD")
                args.push_back(fmt::format("model_averaging_period={}", number(k.number("model_averaging_period"))));
        }
        strategy = call("strategy = DDPStrategy", args);
    } else if (c.strategy == "fsdp") {
        imports +=
            "import functools\n"
            "import torch\n"
            "from lightning.pytorch.strategies import FSDPStrategy\n"
            "from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision\n"
            "from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy, transformer_auto_wrap_policy\n";
        setup = block_comment(c);
        const auto [param, reduce] = fsdp_dtypes(c, k);
        std::vector<std::string> args = {
            fmt::format("sharding_strategy=\"{}\"", k.text("sharding_strategy")),
            k.text("backward_prefetch") == "NONE" ? "backward_prefetch=None"
                                                  : "backward_prefetch=BackwardPrefetch." + k.text("backward_prefetch"),
            fmt::format("forward_prefetch={}", py_bool(k.boolean("forward_prefetch"))),
            fmt::format("limit_all_gathers={}", py_bool(k.boolean("limit_all_gathers"))),
            fmt::format("cpu_offload={}", py_bool(k.boolean("cpu_offload"))),
            fmt::format("mixed_precision=MixedPrecision(param_dtype={}, reduce_dtype={})", torch_dtype(param),
                        torch_dtype(reduce)),
            "auto_wrap_policy=" + wrap_policy(k),
        };
        if (c.activation_checkpointing && c.ac_freq <= 1 && !c.ac_op)
            args.push_back("activation_checkpointing_policy={Block}");
        strategy = call("strategy = FSDPStrategy", args);
    } else if (c.strategy == "deepspeed") {
        imports += "from lightning.pytorch.strategies import DeepSpeedStrategy\n";
        const std::string opt = k.text("offload_optimizer");
        const std::string par = k.text("offload_param");
        std::vector<std::string> args = {
            fmt::format("stage={}", number(k.number("stage"))),
            fmt::format("offload_optimizer={}", py_bool(opt != "none")),
        };
        if (opt != "none") args.push_back(fmt::format("offload_optimizer_device=\"{}\"", opt));
        if (k.applies("offload_param")) {
            args.push_back(fmt::format("offload_parameters={}", py_bool(par != "none")));
            if (par != "none") args.push_back(fmt::format("offload_params_device=\"{}\"", par));
        }
        args.push_back(fmt::format("pin_memory={}", py_bool(k.boolean("pin_memory"))));
        args.push_back(fmt::format("overlap_comm={}", py_bool(overlap_comm(k))));
        args.push_back(fmt::format("contiguous_gradients={}", py_bool(k.boolean("contiguous_gradients"))));
        args.push_back(fmt::format("reduce_scatter={}", py_bool(k.boolean("reduce_scatter"))));
        for (const char* n : {"reduce_bucket_size", "allgather_bucket_size", "sub_group_size"})
            args.push_back(fmt::format("{}={}", n, number(k.number(n))));
        if (c.activation_checkpointing) args.push_back("partition_activations=False");
        // Knobs with no DeepSpeedStrategy argument: the JSON config carries them.
        for (const auto& [name, value] : k.values())
            if (k.is_set(name) && k.applies(name) &&
                (name.rfind("stage3_", 0) == 0 || name == "use_multi_rank_bucket_allreduce"))
                setup += fmt::format(
                    "# {}={}: no DeepSpeedStrategy argument; pass config=\"ds_config.json\" (--emit deepspeed) "
                    "instead\n",
                    name, value);
        strategy = call("strategy = DeepSpeedStrategy", args);
    } else if (c.strategy == "fsdp2") {
        throw ConfigError(
            "no Lightning emitter for strategy 'fsdp2': Lightning runs fully_shard through ModelParallelStrategy, "
            "whose configure_model() applies it; --emit torch writes those fully_shard calls");
    } else {
        throw ConfigError(fmt::format("no Lightning emitter for strategy '{}'", c.strategy));
    }
    std::vector<std::string> trainer = {
        "accelerator=\"gpu\"",
        fmt::format("devices={}", c.topology.gpus_per_node),
        fmt::format("num_nodes={}", c.topology.nodes),
        "strategy=strategy",
        fmt::format("precision=\"{}\"", sim::lightning_name(c.precision)),
        fmt::format("accumulate_grad_batches={}", c.grad_accum),
    };
    if (c.sync_batchnorm) trainer.push_back("sync_batchnorm=True");
    std::string notes = training_notes(c);
    if (c.activation_checkpointing && (c.strategy != "fsdp" || c.ac_freq > 1 || c.ac_op)) notes += checkpoint_note(c);
    return imports + "\n" + setup + strategy + "\n" + notes + call("trainer = Trainer", trainer) + "\n";
}

std::string emit_torch(const sim::Config& config) {
    const sim::Config c = resolved(config);
    const sim::Knobs k = knobs_of(c);
    std::string out;
    std::string notes = training_notes(c);
    if (c.precision == sim::Precision::bf16_mixed)
        notes += "# precision: torch.autocast(\"cuda\", dtype=torch.bfloat16) around forward\n";
    else if (c.precision == sim::Precision::fp16_mixed)
        notes += "# precision: torch.autocast(\"cuda\", dtype=torch.float16) with torch.amp.GradScaler\n";
    else if (!sim::autocast(c.precision) && c.precision != sim::Precision::fp32)
        notes += fmt::format(
            "# precision: model.to({}) before wrapping; no autocast, no GradScaler, optimizer state in {}\n",
            torch_dtype(std::string(to_string(sim::compute_dtype(c.precision)))),
            to_string(sim::compute_dtype(c.precision)));
    if (c.activation_checkpointing) notes += checkpoint_note(c);
    if (c.strategy == "ddp") {
        const Hook h = hook_of(k);
        out += "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n" + h.imports + "\n";
        out += first_bucket_note(k);
        if (c.grad_accum > 1) notes += "# accumulate with `with model.no_sync():` on all but the last micro-step\n";
        auto args = ddp_args(k);
        args.insert(args.begin(), {"model", "device_ids=[torch.cuda.current_device()]"});
        out += call("model = DDP", args) + "\n";
        if (!h.function.empty()) {
            const std::string fn = h.wrapper.empty() ? h.function : h.wrapper + "(" + h.function + ")";
            out += h.setup + fmt::format("model.register_comm_hook({}, {})\n", h.state, fn);
        }
        out += h.after;
    } else if (c.strategy == "fsdp") {
        out +=
            "import functools\n"
            "import torch\n"
            "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
            "from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy\n"
            "from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy, transformer_auto_wrap_policy\n\n" +
            block_comment(c);
        const auto [param, reduce] = fsdp_dtypes(c, k);
        const std::string mp = param == "fp32" && reduce == "fp32"
                                   ? "mixed_precision=None"
                                   : fmt::format("mixed_precision=MixedPrecision(param_dtype={}, reduce_dtype={})",
                                                 torch_dtype(param), torch_dtype(reduce));
        out += call("model = FSDP",
                    {"model", "device_id=torch.cuda.current_device()",
                     "sharding_strategy=ShardingStrategy." + k.text("sharding_strategy"),
                     k.text("backward_prefetch") == "NONE"
                         ? "backward_prefetch=None"
                         : "backward_prefetch=BackwardPrefetch." + k.text("backward_prefetch"),
                     fmt::format("forward_prefetch={}", py_bool(k.boolean("forward_prefetch"))),
                     fmt::format("limit_all_gathers={}", py_bool(k.boolean("limit_all_gathers"))),
                     fmt::format("cpu_offload=CPUOffload(offload_params={})", py_bool(k.boolean("cpu_offload"))), mp,
                     "auto_wrap_policy=" + wrap_policy(k)}) +
               "\n";
        if (c.grad_accum > 1)
            notes += k.boolean("no_sync") ? "# accumulate with `with model.no_sync():` on all but the last micro-step\n"
                                          : "# accumulate without no_sync(): reduce-scatter every micro-step\n";
    } else if (c.strategy == "fsdp2") {
        const bool hsdp = k.boolean("hsdp");
        out += "import torch\nfrom torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard\n";
        if (hsdp) out += "from torch.distributed.device_mesh import init_device_mesh\n";
        out += "\n" + block_comment(c);
        const auto [param, reduce] = fsdp_dtypes(c, k);
        out += fmt::format("mp_policy = MixedPrecisionPolicy(param_dtype={}, reduce_dtype={})\n", torch_dtype(param),
                           torch_dtype(reduce));
        // auto: the argument left out (None), so the root keeps its parameters after forward.
        const std::string reshard = k.text("reshard_after_forward");
        std::string args = "mp_policy=mp_policy";
        if (reshard != "auto") args += fmt::format(", reshard_after_forward={}", py_bool(reshard == "true"));
        if (hsdp) {
            out +=
                fmt::format("mesh = init_device_mesh(\"cuda\", ({}, {}), mesh_dim_names=(\"replicate\", \"shard\"))\n",
                            c.topology.nodes, c.topology.gpus_per_node);
            args = "mesh=mesh, " + args;
        }
        const std::string units = k.text("units");
        if (units == "blocks")
            out += fmt::format(
                "for block in [m for m in model.modules() if isinstance(m, Block)]:\n"
                "    fully_shard(block, {})\n",
                args);
        else if (units == "size")
            out += fmt::format(
                "# each run of consecutive layers holding {} parameters, as dtsim wrapped them:\n"
                "# for module in <those modules>:\n"
                "#     fully_shard(module, {})\n",
                number(k.number("min_num_params")), args);
        out += fmt::format("fully_shard(model, {})\n", args);
        if (c.grad_accum > 1)
            notes += k.boolean("requires_gradient_sync")
                         ? "# accumulate by calling backward per micro-step: each one reduce-scatters\n"
                         : "# accumulate with model.set_requires_gradient_sync(False) on all but the last "
                           "micro-step\n";
    } else if (c.strategy == "deepspeed") {
        out +=
            "import deepspeed\n\n"
            "# ds_config.json: dtsim advise --emit deepspeed\n"
            "model_engine, optimizer, _, _ = deepspeed.initialize(\n"
            "    model=model,\n"
            "    model_parameters=model.parameters(),\n"
            "    config=\"ds_config.json\",\n"
            ")\n";
    } else {
        throw ConfigError(fmt::format("no torch emitter for strategy '{}'", c.strategy));
    }
    return out + notes;
}

// The configuration's NCCL variables, set before the process group starts
// (NCCL reads them when it creates the communicator).
std::string env_header(const sim::Config& c) {
    if (c.env.empty()) return {};
    std::string out =
        "import os\n\n# NCCL reads these when the process group starts (or export them in the launch script)\n";
    for (const auto& [name, value] : c.env) out += fmt::format("os.environ[\"{}\"] = \"{}\"\n", name, value);
    return out + "\n";
}

std::string emit(std::string_view format, const sim::Config& config) {
    if (format == "deepspeed") return emit_deepspeed_json(config);
    if (format == "lightning") return env_header(config) + emit_lightning(config);
    if (format == "torch") return env_header(config) + emit_torch(config);
    throw ConfigError(fmt::format("--emit {}: expected deepspeed, lightning or torch", format));
}

}  // namespace dtsim::advisor
