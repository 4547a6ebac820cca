#include "dtsim/sim/lightning_names.hpp"

namespace dtsim::sim {
namespace {

// strategy-semantics.md §7: start methods of Lightning's launchers.
constexpr const char* kPopen =
    "the main process re-runs the script once per extra rank (subprocess.Popen); each rank pays a full "
    "interpreter start, imports and model construction, in parallel";
constexpr const char* kSpawn =
    "mp.start_processes pickles the trainer into fresh interpreters (objects must be picklable); rank 0 "
    "saves a checkpoint the parent reloads at the end";
constexpr const char* kFork =
    "forked children share memory copy-on-write, no pickling or re-import (cheapest; fails if CUDA was "
    "initialised in the parent)";

std::vector<LightningStrategy> make_names() {
    std::vector<LightningStrategy> v;
    for (const auto& [name, launch] : {std::pair{"ddp", kPopen}, std::pair{"ddp_spawn", kSpawn},
                                       std::pair{"ddp_fork", kFork}, std::pair{"ddp_notebook", kFork}}) {
        std::string n = name;
        if (n != "ddp") v.push_back({n, "ddp", {}, launch});
        v.push_back({n + "_find_unused_parameters_true", "ddp", {{"find_unused_parameters", "true"}}, launch});
        v.push_back({n + "_find_unused_parameters_false", "ddp", {{"find_unused_parameters", "false"}}, launch});
    }
    // FSDPStrategy: no auto_wrap_policy unless given (one unit, the root), and
    // the report says Lightning built it (docs/notes/library-memory-rules.md §2b).
    const std::vector<std::pair<std::string, std::string>> lightning_fsdp = {{"frontend", "lightning"}};
    v.push_back({"lightning:fsdp", "fsdp", lightning_fsdp, kPopen});
    auto offload = lightning_fsdp;
    offload.emplace_back("cpu_offload", "true");
    v.push_back({"fsdp_cpu_offload", "fsdp", offload, kPopen});
    v.push_back({"lightning:ddp", "ddp", {}, kPopen});
    // DeepSpeedStrategy's own defaults, which differ from DeepSpeed's: overlap_comm
    // on, 2e8-element buckets, sub_group_size 1e12 (lightning strategies/deepspeed.py).
    const std::vector<std::pair<std::string, std::string>> lightning_zero = {
        {"overlap_comm", "true"},
        {"reduce_bucket_size", "2e8"},
        {"allgather_bucket_size", "2e8"},
        {"sub_group_size", "1e12"},
    };
    auto zero = [&](const std::string& name, std::vector<std::pair<std::string, std::string>> extra) {
        auto knobs = lightning_zero;
        knobs.insert(knobs.end(), extra.begin(), extra.end());
        v.push_back({name, "deepspeed", std::move(knobs), kPopen});
    };
    zero("deepspeed_stage_1", {{"stage", "1"}});
    zero("deepspeed_stage_1_offload", {{"stage", "1"}, {"offload_optimizer", "cpu"}});
    zero("deepspeed_stage_2", {{"stage", "2"}});
    zero("deepspeed_stage_2_offload", {{"stage", "2"}, {"offload_optimizer", "cpu"}});
    zero("deepspeed_stage_3", {{"stage", "3"}});
    zero("deepspeed_stage_3_offload", {{"stage", "3"}, {"offload_optimizer", "cpu"}, {"offload_param", "cpu"}});
    zero("deepspeed_stage_3_offload_nvme", {{"stage", "3"}, {"offload_optimizer", "nvme"}, {"offload_param", "nvme"}});
    return v;
}

}  // namespace

const std::vector<LightningStrategy>& lightning_strategies() {
    static const std::vector<LightningStrategy> names = make_names();
    return names;
}

std::optional<std::string> resolve_lightning_name(Config& config) {
    // "ddp", "fsdp" and "deepspeed" are dtsim strategies already; they launch like Lightning's defaults.
    for (const auto& l : lightning_strategies()) {
        if (l.name != config.strategy) continue;
        config.strategy = l.strategy;
        auto knobs = l.knobs;
        knobs.insert(knobs.end(), config.knobs.begin(), config.knobs.end());
        config.knobs = std::move(knobs);
        return l.launch;
    }
    return std::nullopt;
}

}  // namespace dtsim::sim
