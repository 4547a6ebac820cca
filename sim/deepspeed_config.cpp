// DeepSpeed config files (formats.md §4): the zero_optimization section
// becomes the "deepspeed" strategy's knobs (sim/strategies/zero.cpp), the
// batch, accumulation and precision fields the Config. "auto" (HuggingFace /
// Accelerate templates) keeps dtsim's value. Every key DeepSpeed 0.19.8
// accepts in zero_optimization is accepted; those that change nothing
// modelled come back as notes, and a key DeepSpeed does not have gets
// DeepSpeed's own error. Every error names the file and the JSON field.
#include "dtsim/sim/deepspeed_config.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/sim/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string_view>

namespace dtsim::sim {
namespace {

bool is_auto(const Json& v) {
    return v.is_string() && v.get<std::string>() == "auto";
}

// A member that is present, not null and not "auto".
std::optional<JsonView> given(const JsonView& obj, const std::string& key) {
    if (!obj.has(key)) return std::nullopt;
    JsonView v = obj.at(key);
    if (v.value().is_null() || is_auto(v.value())) return std::nullopt;
    return v;
}

std::string number_text(double x) {
    if (x == std::floor(x) && std::fabs(x) < 9e18) return fmt::format("{}", static_cast<std::int64_t>(x));
    return fmt::format("{}", x);
}

// The range a knob of the ZeRO strategy accepts (sim/strategies/zero.cpp), so
// that a file's value is refused here, naming its field, rather than later as
// if it had been given with --set.
Bounds knob_bounds(const std::string& knob) {
    Bounds b{.why_max = "larger sizes overflow the plan's 64-bit byte counts"};
    for (const auto& spec : strategies().find("deepspeed").value.knobs)
        if (spec.name == knob && spec.type == KnobType::number) {
            b.min = spec.min_value;
            b.min_exclusive = spec.min_exclusive;
            b.max = spec.max_value;
        }
    return b;
}

// A number within the range of the knob it sets (5e8 and 500000000 alike), or
// nothing for "auto".
std::optional<double> count(const JsonView& obj, const std::string& key, const std::string& knob) {
    auto v = given(obj, key);
    if (!v) return std::nullopt;
    if (!v->value().is_number())
        obj.fail(key, fmt::format("expected a number or \"auto\", found {}", json_excerpt(v->value())));
    return obj.number_within(key, knob_bounds(knob));
}

// A positive integer up to `max` (why_max says why), or nothing for "auto".
std::optional<std::int64_t> positive_integer(const JsonView& obj, const std::string& key, std::int64_t max,
                                             std::string_view why_max) {
    auto v = given(obj, key);
    if (!v) return std::nullopt;
    if (!v->value().is_number())
        obj.fail(key, fmt::format("expected a positive integer or \"auto\", found {}", json_excerpt(v->value())));
    const Bounds b{.min = 1, .max = static_cast<double>(max), .why_max = why_max};
    const double x = obj.number(key);
    if (x != std::floor(x))
        obj.fail(key, fmt::format("expected {}, found {}", describe_bounds(b, "an integer"), json_excerpt(v->value())));
    if (std::string why = check_bounds(x, b, "an integer"); !why.empty()) obj.fail(key, why);
    return static_cast<std::int64_t>(x);
}

std::optional<bool> flag(const JsonView& obj, const std::string& key) {
    auto v = given(obj, key);
    if (!v) return std::nullopt;
    if (!v->value().is_boolean())
        obj.fail(key, fmt::format("expected true, false or \"auto\", found {}", json_excerpt(v->value())));
    return v->value().get<bool>();
}

// The stage-3 keys DeepSpeed accepts with or without their "stage3_" alias.
struct Alias {
    const char* knob;   // dtsim knob = DeepSpeed's alias
    const char* field;  // DeepSpeed's field name
};
constexpr std::array<Alias, 4> kStage3Numbers = {{
    {"stage3_prefetch_bucket_size", "prefetch_bucket_size"},
    {"stage3_param_persistence_threshold", "param_persistence_threshold"},
    {"stage3_max_live_parameters", "max_live_parameters"},
    {"stage3_max_reuse_distance", "max_reuse_distance"},
}};

// zero_optimization keys of DeepSpeed 0.19.8 (zero/config.py
// DeepSpeedZeroConfig, formats.md §4) that change nothing dtsim models: the
// reader accepts them and says so in a note.
constexpr std::array<std::string_view, 19> kIgnoredZeroKeys = {
    "allgather_partitions",
    "round_robin_gradients",
    "stage3_model_persistence_threshold",
    "model_persistence_threshold",
    "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "load_from_fp32_weights",
    "elastic_checkpoint",
    "ignore_unused_parameters",
    "legacy_stage1",
    "memory_efficient_linear",
    "pipeline_loading_checkpoint",
    "override_module_apply",
    "log_trace_cache_warnings",
    "parameter_alignment",
    "enable_sanity_checks",
    "save_muon_momentum_buffer_in_memory",
    "compute_grad_norm",  // checked below
};

// Keys that change how stage 3 fetches parameters, which dtsim prices as
// DeepSpeed's defaults do: accepted with a note that says so.
constexpr std::array<std::string_view, 7> kUnmodelledZeroKeys = {
    "leaf_module",
    "module_granularity_threshold",
    "stage3_module_granularity_threshold",
    "use_all_reduce_for_fetch_params",
    "stage3_use_all_reduce_for_fetch_params",
    "allgather_sequential",
    "stage3_allgather_sequential",
};

// Checked where they are read: ZeRO++ (refused unless off) and the deprecated pin flag.
constexpr std::array<std::string_view, 6> kCheckedZeroKeys = {"zero_hpz_partition_size",
                                                              "zero_quantized_weights",
                                                              "zero_quantized_nontrainable_weights",
                                                              "zero_quantized_gradients",
                                                              "zenflow",
                                                              "cpu_offload_use_pin_memory"};

constexpr std::array<std::string_view, 13> kModelledZeroKeys = {
    "stage",
    "overlap_comm",
    "contiguous_gradients",
    "reduce_scatter",
    "reduce_bucket_size",
    "allgather_bucket_size",
    "use_multi_rank_bucket_allreduce",
    "sub_group_size",
    "offload_optimizer",
    "offload_param",
    "cpu_offload",
    "cpu_offload_param",
    "stage3_prefetch_bucket_size",
};

// DeepSpeed's own words for a key it does not have (pydantic's
// extra_forbidden, as DeepSpeed 0.19.8 prints it).
constexpr const char* kDeepSpeedExtraForbidden =
    "Extra inputs are not permitted [type=extra_forbidden] (DeepSpeed 0.19.8's error for a key "
    "DeepSpeedZeroConfig does not have)";

bool in(const auto& list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
}

bool known_zero_key(const std::string& key) {
    if (in(kIgnoredZeroKeys, key) || in(kUnmodelledZeroKeys, key) || in(kCheckedZeroKeys, key) ||
        in(kModelledZeroKeys, key))
        return true;
    for (const auto& a : kStage3Numbers)
        if (key == a.knob || key == a.field) return true;
    return false;
}

// offload_optimizer / offload_param (offload_config.py): device and
// pin_memory are modelled; the other fields are DeepSpeed's and accepted.
void read_offload(const JsonView& zero, const std::string& key, const std::string& knob, bool optimizer, Config& config,
                  bool& pin) {
    if (!zero.has(key) || zero.at(key).value().is_null()) return;
    const JsonView o = zero.at(key);
    if (!o.value().is_object()) zero.fail(key, fmt::format("expected an object, found {}", json_excerpt(o.value())));
    // offload_config.py: DeepSpeedZeroOffloadParamConfig and ...OptimizerConfig.
    static constexpr std::array<std::string_view, 6> param_fields = {"device",       "nvme_path",   "pin_memory",
                                                                     "buffer_count", "buffer_size", "max_in_cpu"};
    static constexpr std::array<std::string_view, 10> optimizer_fields = {
        "device",         "nvme_path", "buffer_count", "pin_memory",    "pipeline_read",
        "pipeline_write", "fast_init", "ratio",        "super_offload", "cpuadam_cores_perc"};
    for (const auto& [name, value] : o.value().items()) {
        (void)value;
        if (optimizer ? !in(optimizer_fields, name) : !in(param_fields, name))
            o.fail(name, fmt::format("{}; {}'s fields are: {}", kDeepSpeedExtraForbidden, key,
                                     optimizer ? fmt::format("{}", fmt::join(optimizer_fields, ", "))
                                               : fmt::format("{}", fmt::join(param_fields, ", "))));
    }
    if (optimizer) {
        if (given(o, "ratio")) {
            const double ratio = o.number_within("ratio", Bounds{.min = 0, .max = 1, .why_max = "a share"});
            if (ratio < 1)
                o.fail("ratio",
                       "partial optimizer offload (ratio < 1; DeepSpeed allows it at stage 3 only) is not "
                       "modelled; remove it or set it to 1");
        }
        if (auto b = flag(o, "super_offload"); b && *b)
            o.fail("super_offload", "SuperOffload is not modelled; remove it or set it to false");
    }
    if (auto d = given(o, "device")) {
        if (!d->value().is_string()) o.fail("device", "expected \"none\", \"cpu\" or \"nvme\"");
        const std::string device = d->value().get<std::string>();
        if (device != "none" && device != "cpu" && device != "nvme")
            o.fail("device", fmt::format("expected \"none\", \"cpu\" or \"nvme\", found \"{}\"", device));
        config.knobs.emplace_back(knob, device);
    }
    if (auto p = flag(o, "pin_memory")) pin = pin || *p;
}

void read_zero(const JsonView& root, Config& config, std::vector<std::string>& notes) {
    if (!root.has("zero_optimization"))
        root.fail("zero_optimization",
                  "missing: without it DeepSpeed runs stage 0 (no ZeRO, plain data parallelism); give "
                  "zero_optimization.stage 1, 2 or 3, or simulate --strategy ddp");
    const JsonView zero = root.at("zero_optimization");
    if (!zero.value().is_object())
        root.fail("zero_optimization", fmt::format("expected an object, found {}", json_excerpt(zero.value())));
    for (const auto& [key, value] : zero.value().items()) {
        (void)value;
        if (key == "mics_shard_size" || key == "mics_hierarchical_params_gather")
            zero.fail(key, fmt::format("MiCS ZeRO-3 sharding has been removed; 'zero_optimization.{}' is no longer "
                                       "supported (DeepSpeed 0.19.8's DeepSpeedConfigError)",
                                       key));
        if (!known_zero_key(key)) zero.fail(key, kDeepSpeedExtraForbidden);
    }
    std::vector<std::string> ignored, unmodelled;
    for (const auto& [key, value] : zero.value().items()) {
        if (value.is_null()) continue;
        // Off (false, 0, empty lists), an unmodelled key changes nothing either.
        const bool off = value == false || value == 0 ||
                         (value.is_object() && std::all_of(value.begin(), value.end(),
                                                           [](const Json& v) { return v.is_array() && v.empty(); }));
        if (in(kIgnoredZeroKeys, key) || (in(kUnmodelledZeroKeys, key) && off)) ignored.push_back(key);
        if (in(kUnmodelledZeroKeys, key) && !off) unmodelled.push_back(key);
    }
    if (!ignored.empty())
        notes.push_back(fmt::format("{}: zero_optimization.{} accepted; {} nothing dtsim models", root.file(),
                                    fmt::join(ignored, ", "), ignored.size() == 1 ? "it changes" : "they change"));
    if (!unmodelled.empty())
        notes.push_back(
            fmt::format("{}: zero_optimization.{} accepted but not modelled: stage 3's parameter fetches "
                        "are priced as with DeepSpeed's defaults",
                        root.file(), fmt::join(unmodelled, ", ")));
    if (zero.has("cpu_offload_use_pin_memory"))
        notes.push_back(
            fmt::format("{}: zero_optimization.cpu_offload_use_pin_memory is deprecated and DeepSpeed "
                        "ignores its value; pin_memory inside offload_optimizer or offload_param decides",
                        root.file()));
    // DeepSpeed's AssertionError for a deprecated key beside the one replacing it.
    for (const auto& [old_key, new_key] :
         {std::pair{"cpu_offload", "offload_optimizer"}, std::pair{"cpu_offload_param", "offload_param"},
          std::pair{"stage3_gather_fp16_weights_on_model_save", "gather_16bit_weights_on_model_save"}})
        if (zero.has(old_key) && zero.has(new_key))
            zero.fail(old_key, fmt::format("Cannot provide deprecated parameter '{}' and replacing parameter '{}' "
                                           "together (DeepSpeed's error)",
                                           old_key, new_key));
    // A field given both by its name and by its stage3_ alias: DeepSpeed
    // reports the second as an extra input.
    for (const auto& a : kStage3Numbers)
        if (zero.has(a.knob) && zero.has(a.field)) zero.fail(a.field, kDeepSpeedExtraForbidden);
    // DeepSpeed's default stage is 0 (no ZeRO): a config without one is not a ZeRO config.
    if (!zero.has("stage") || zero.at("stage").value().is_null())
        zero.fail("stage",
                  "missing: DeepSpeed's default is stage 0 (no ZeRO, plain data parallelism); dtsim simulates "
                  "stages 1-3, so give zero_optimization.stage 1, 2 or 3 (use --strategy ddp for plain data "
                  "parallelism)");
    if (!is_auto(zero.at("stage").value())) {
        const Json& v = zero.at("stage").value();
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 3)
            zero.fail("stage", fmt::format("expected 0, 1, 2 or 3, found {}", json_excerpt(v)));
        if (v.get<std::int64_t>() == 0)
            zero.fail("stage",
                      "stage 0 is DeepSpeed without ZeRO (plain data parallelism): dtsim simulates stages 1-3; use "
                      "--strategy ddp");
        config.knobs.emplace_back("stage", std::to_string(v.get<std::int64_t>()));
    }
    for (const char* key : {"reduce_bucket_size", "allgather_bucket_size", "sub_group_size"})
        if (auto x = count(zero, key, key)) config.knobs.emplace_back(key, number_text(*x));
    for (const auto& a : kStage3Numbers) {
        // DeepSpeed reads either spelling; the stage3_ one is what configs use.
        if (auto x = count(zero, a.field, a.knob)) config.knobs.emplace_back(a.knob, number_text(*x));
        if (auto x = count(zero, a.knob, a.knob)) config.knobs.emplace_back(a.knob, number_text(*x));
    }
    for (const char* key :
         {"overlap_comm", "contiguous_gradients", "reduce_scatter", "use_multi_rank_bucket_allreduce"})
        if (auto b = flag(zero, key)) config.knobs.emplace_back(key, *b ? "true" : "false");

    bool pin = false;
    // Deprecated forms first, so offload_* objects override them.
    if (auto b = flag(zero, "cpu_offload"); b && *b) config.knobs.emplace_back("offload_optimizer", "cpu");
    if (auto b = flag(zero, "cpu_offload_param"); b && *b) config.knobs.emplace_back("offload_param", "cpu");
    (void)flag(zero, "cpu_offload_use_pin_memory");  // type-checked; its value is ignored, as DeepSpeed does
    read_offload(zero, "offload_optimizer", "offload_optimizer", true, config, pin);
    read_offload(zero, "offload_param", "offload_param", false, config, pin);
    if (pin) config.knobs.emplace_back("pin_memory", "true");

    if (auto b = flag(zero, "compute_grad_norm"); b && !*b && zero.has("stage") &&
                                                  zero.at("stage").value().is_number_integer() &&
                                                  zero.at("stage").value().get<std::int64_t>() == 3)
        zero.fail("compute_grad_norm",
                  "compute_grad_norm=false is supported only with ZeRO Stage 1 or 2 (DeepSpeed's "
                  "error)");
    if (zero.has("zenflow") && !zero.at("zenflow").value().is_null())
        zero.fail("zenflow", "ZenFlow (stall-free offloading) is not modelled; remove it or set it to null");

    // ZeRO++ changes the communication volume, which dtsim does not model.
    if (auto h = positive_integer(zero, "zero_hpz_partition_size", Config::kMaxWorldSize,
                                  "more GPUs than any cluster built");
        h && *h > 1)
        zero.fail("zero_hpz_partition_size",
                  "ZeRO++ hierarchical partitioning (hpZ) is not modelled; remove it or "
                  "set it to 1");
    for (const char* key :
         {"zero_quantized_weights", "zero_quantized_gradients", "zero_quantized_nontrainable_weights"})
        if (auto b = flag(zero, key); b && *b)
            zero.fail(key, "ZeRO++ quantized communication is not modelled; remove it or set it to false");
}

void read_precision(const JsonView& root, Config& config) {
    // "bfloat16" is DeepSpeed's older spelling of "bf16".
    std::optional<bool> bf16, fp16;
    bool any_auto = false;
    auto enabled = [&](const char* section) -> std::optional<bool> {
        if (!root.has(section)) return std::nullopt;
        const JsonView s = root.at(section);
        if (!s.value().is_object()) root.fail(section, fmt::format("expected an object, found {}", json_excerpt(s.value())));
        if (s.has("enabled") && is_auto(s.at("enabled").value())) any_auto = true;
        // A section without "enabled" is disabled (DeepSpeed's default).
        if (!s.has("enabled")) return false;
        return flag(s, "enabled");
    };
    for (const char* name : {"bf16", "bfloat16"})
        if (auto b = enabled(name)) bf16 = bf16.value_or(false) || *b;
    fp16 = enabled("fp16");
    if (bf16.value_or(false) && fp16.value_or(false))
        root.fail("fp16", "fp16.enabled and bf16.enabled are both true; DeepSpeed allows one of them");
    if (bf16.value_or(false))
        config.precision = Precision::bf16_mixed;
    else if (fp16.value_or(false))
        config.precision = Precision::fp16_mixed;
    else if ((bf16 || fp16) && !any_auto)
        config.precision = Precision::fp32;  // explicitly disabled: DeepSpeed trains in fp32
}

// train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps
// x data-parallel world (formats.md §4); DeepSpeed derives a missing one.
void read_batch(const JsonView& root, Config& config) {
    // The bounds keep micro x accumulation x world within 64 bits.
    const auto micro = positive_integer(root, "train_micro_batch_size_per_gpu", Config::kMaxMicroBatch,
                                        "a larger micro-batch fits in no device's memory");
    const auto accum = positive_integer(root, "gradient_accumulation_steps", Config::kMaxGradAccum,
                                        "more micro-steps than any training step runs");
    const auto total = positive_integer(root, "train_batch_size",
                                        Config::kMaxMicroBatch * Config::kMaxGradAccum * Config::kMaxWorldSize,
                                        "the largest micro-batch x accumulation x world size");
    if (micro) config.micro_batch = *micro;
    if (accum) config.grad_accum = static_cast<int>(*accum);
    if (!total) return;
    // The world size is the Config's topology, set before this is called.
    // In 64 bits: validate() has not yet bounded the topology.
    const std::int64_t world = std::int64_t{config.topology.nodes} * config.topology.gpus_per_node;
    if (world < 1 || world > Config::kMaxWorldSize) return;  // validate() reports the topology
    if (micro && accum) {
        if (*total != *micro * *accum * world)
            root.fail("train_batch_size",
                      fmt::format("{} != train_micro_batch_size_per_gpu {} x gradient_accumulation_steps {} x {} GPUs "
                                  "= {}",
                                  *total, *micro, *accum, world, *micro * *accum * world));
    } else if (micro) {
        if (*total % (*micro * world) != 0)
            root.fail("train_batch_size", fmt::format("{} is not divisible by train_micro_batch_size_per_gpu {} x {} "
                                                      "GPUs",
                                                      *total, *micro, world));
        if (*total / (*micro * world) > Config::kMaxGradAccum)
            root.fail("train_batch_size", fmt::format("{} / (train_micro_batch_size_per_gpu {} x {} GPUs) is more than "
                                                      "{} accumulation steps, more than any training step runs",
                                                      *total, *micro, world, Config::kMaxGradAccum));
        config.grad_accum = static_cast<int>(*total / (*micro * world));
    } else if (accum) {
        if (*total % (*accum * world) != 0)
            root.fail("train_batch_size", fmt::format("{} is not divisible by gradient_accumulation_steps {} x {} GPUs",
                                                      *total, *accum, world));
        if (*total / (*accum * world) > Config::kMaxMicroBatch)
            root.fail("train_batch_size", fmt::format("{} / (gradient_accumulation_steps {} x {} GPUs) is a micro-batch "
                                                      "above {}, which fits in no device's memory",
                                                      *total, *accum, world, Config::kMaxMicroBatch));
        config.micro_batch = *total / (*accum * world);
    } else if (!root.has("train_micro_batch_size_per_gpu") && !root.has("gradient_accumulation_steps")) {
        // Only the total: DeepSpeed takes gradient_accumulation_steps = 1.
        if (*total % world != 0)
            root.fail("train_batch_size", fmt::format("{} is not divisible by {} GPUs", *total, world));
        if (*total / world > Config::kMaxMicroBatch)
            root.fail("train_batch_size", fmt::format("{} / {} GPUs is a micro-batch above {}, which fits in no "
                                                      "device's memory",
                                                      *total, world, Config::kMaxMicroBatch));
        config.micro_batch = *total / world;
        config.grad_accum = 1;
    }
}

}  // namespace

std::vector<std::string> apply_deepspeed_config(const std::string& path, Config& config) {
    return apply_deepspeed_config_text(read_config_file(path), path, config);
}

std::vector<std::string> apply_deepspeed_config_text(const std::string& text, const std::string& path, Config& config) {
    const Json json = parse_json_text(text, path, "a DeepSpeed config (a JSON object)");
    const JsonView root(json, path);
    if (!json.is_object()) root.fail("", fmt::format("expected a JSON object, found {}", json.type_name()));
    Config out = config;  // nothing changes unless the whole file is valid
    out.strategy = "deepspeed";
    std::vector<std::string> notes;
    read_zero(root, out, notes);
    read_precision(root, out);
    read_batch(root, out);
    config = std::move(out);
    return notes;
}

}  // namespace dtsim::sim
