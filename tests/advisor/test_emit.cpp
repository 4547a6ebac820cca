// Emitted configurations (issue 6): the DeepSpeed JSON reads back through
// apply_deepspeed_config to the same simulated result; the Lightning and torch
// snippets carry the knobs as constructor arguments.
#include "dtsim/advisor/emit.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/deepspeed_config.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/report.hpp"
#include "dtsim/sim/simulate.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <string>

using namespace dtsim;

namespace {

sim::Config gpt2(const std::string& strategy, std::vector<std::pair<std::string, std::string>> knobs) {
    sim::Config c;
    c.model = "gpt2";
    c.strategy = strategy;
    c.topology = {2, 4};
    c.knobs = std::move(knobs);
    return c;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The report with knob values compared as numbers where both are numbers
// ("2e8" and "200000000" are the same knob value).
void require_same_report(Json a, Json b) {
    const Json ka = a["knobs"], kb = b["knobs"];
    a.erase("knobs");
    b.erase("knobs");
    for (const auto& [key, value] : a.items()) {
        INFO(key);
        CHECK(value.dump() == b[key].dump());
    }
    CHECK(a.size() == b.size());
    REQUIRE(ka.size() == kb.size());
    for (const auto& [name, value] : ka.items()) {
        INFO(name);
        REQUIRE(kb.contains(name));
        const std::string x = value.get<std::string>(), y = kb[name].get<std::string>();
        if (x == "auto" || x == y) continue;
        CHECK(std::stod(x) == std::stod(y));
    }
}

}  // namespace

TEST_CASE("emitted DeepSpeed JSON reads back through --strategy file.json to the same simulated result", "[emit]") {
    const calib::Calibration cal = calib::load_hardware("a100-sxm");
    std::vector<sim::Config> configs = {
        gpt2("deepspeed", {{"stage", "1"}}),
        gpt2("deepspeed", {{"stage", "2"}, {"reduce_bucket_size", "2e8"}, {"overlap_comm", "true"}}),
        gpt2("deepspeed", {{"stage", "3"}, {"stage3_prefetch_bucket_size", "1e7"}, {"sub_group_size", "1e8"}}),
        gpt2("deepspeed",
             {{"stage", "3"}, {"offload_optimizer", "cpu"}, {"offload_param", "cpu"}, {"pin_memory", "true"}}),
        gpt2("deepspeed_stage_2_offload", {}),
        gpt2("deepspeed",
             {{"stage", "2"}, {"offload_optimizer", "cpu"}, {"pin_memory", "true"}, {"contiguous_gradients", "false"}}),
    };
    configs[1].precision = sim::Precision::bf16_mixed;
    configs[1].grad_accum = 4;
    configs[1].micro_batch = 2;
    configs[2].precision = sim::Precision::fp16_mixed;
    configs[4].precision = sim::Precision::bf16_mixed;
    configs[4].grad_accum = 2;
    test::TempDir dir;
    for (std::size_t i = 0; i < configs.size(); ++i) {
        const sim::Config& original = configs[i];
        const std::string json = advisor::emit_deepspeed_json(original);
        INFO(json);
        const std::string path = dir.file("ds_config_" + std::to_string(i) + ".json");
        std::ofstream(path) << json;
        sim::Config back;
        back.model = original.model;
        back.topology = original.topology;
        sim::apply_deepspeed_config(path, back);
        sim::Config expected = original;
        sim::resolve_lightning_name(expected);
        CHECK(back.micro_batch == original.micro_batch);
        CHECK(back.grad_accum == original.grad_accum);
        CHECK(back.precision == original.precision);
        require_same_report(sim::report_json(sim::simulate(expected, cal), expected, cal),
                            sim::report_json(sim::simulate(back, cal), back, cal));
    }
}

TEST_CASE("DeepSpeed JSON carries the batch, precision and zero_optimization fields", "[emit]") {
    sim::Config c = gpt2("deepspeed", {{"stage", "3"},
                                       {"offload_optimizer", "cpu"},
                                       {"pin_memory", "true"},
                                       {"overlap_comm", "auto"},
                                       {"reduce_bucket_size", "2e8"}});
    c.micro_batch = 2;
    c.grad_accum = 3;
    c.precision = sim::Precision::bf16_mixed;
    const Json j = Json::parse(advisor::emit_deepspeed_json(c));
    CHECK(j["train_micro_batch_size_per_gpu"] == 2);
    CHECK(j["gradient_accumulation_steps"] == 3);
    CHECK(j["train_batch_size"] == 2 * 3 * 8);
    CHECK(j["bf16"]["enabled"] == true);
    CHECK(j["fp16"]["enabled"] == false);
    CHECK(j["zero_optimization"]["stage"] == 3);
    CHECK(j["zero_optimization"]["overlap_comm"] == true);  // auto resolved for stage 3
    CHECK(j["zero_optimization"]["reduce_bucket_size"] == 200000000);
    CHECK(j["zero_optimization"]["offload_optimizer"]["device"] == "cpu");
    CHECK(j["zero_optimization"]["offload_optimizer"]["pin_memory"] == true);
    CHECK_FALSE(j["zero_optimization"].contains("offload_param"));
    CHECK_FALSE(j["zero_optimization"].contains("sub_group_size"));  // not set: DeepSpeed's default
}

TEST_CASE("a non-DeepSpeed config asked for DeepSpeed JSON is a ConfigError naming the strategy", "[emit]") {
    CHECK_THROWS_AS(advisor::emit_deepspeed_json(gpt2("fsdp", {})), ConfigError);
    CHECK_THROWS_WITH(advisor::emit_deepspeed_json(gpt2("ddp", {})), Catch::Contains("'ddp'"));
    CHECK_THROWS_AS(advisor::emit("yaml", gpt2("ddp", {})), ConfigError);
}

TEST_CASE("Lightning emitter writes the strategy object and the Trainer", "[emit]") {
    sim::Config ddp = gpt2("ddp", {{"bucket_cap_mb", "50"},
                                   {"comm_hook", "powerSGD"},
                                   {"matrix_approximation_rank", "4"},
                                   {"comm_wrapper", "bf16"}});
    ddp.precision = sim::Precision::bf16_mixed;
    ddp.grad_accum = 4;
    const std::string l = advisor::emit_lightning(ddp);
    INFO(l);
    CHECK(contains(l, "from lightning.pytorch import Trainer"));
    CHECK(contains(l, "DDPStrategy("));
    CHECK(contains(l, "bucket_cap_mb=50,"));
    CHECK(contains(l, "matrix_approximation_rank=4,"));
    CHECK(contains(l, "ddp_comm_hook=powerSGD.powerSGD_hook,"));
    CHECK(contains(l, "ddp_comm_wrapper=default_hooks.bf16_compress_wrapper,"));
    CHECK(contains(l, "devices=4,"));
    CHECK(contains(l, "num_nodes=2,"));
    CHECK(contains(l, "precision=\"bf16-mixed\","));
    CHECK(contains(l, "accumulate_grad_batches=4,"));

    sim::Config fsdp = gpt2("fsdp", {{"sharding_strategy", "SHARD_GRAD_OP"}, {"cpu_offload", "true"}});
    fsdp.precision = sim::Precision::fp16_mixed;
    const std::string f = advisor::emit_lightning(fsdp);
    INFO(f);
    CHECK(contains(f, "FSDPStrategy("));
    CHECK(contains(f, "sharding_strategy=\"SHARD_GRAD_OP\","));
    CHECK(contains(f, "cpu_offload=True,"));
    CHECK(contains(f, "MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float16)"));
    CHECK(contains(f, "precision=\"16-mixed\","));

    const std::string d = advisor::emit_lightning(gpt2("deepspeed_stage_3_offload", {}));
    INFO(d);
    CHECK(contains(d, "DeepSpeedStrategy("));
    CHECK(contains(d, "stage=3,"));
    CHECK(contains(d, "offload_optimizer=True,"));
    CHECK(contains(d, "offload_parameters=True,"));
    CHECK(contains(d, "reduce_bucket_size=200000000,"));
    CHECK(contains(d, "precision=\"32-true\","));
}

TEST_CASE("torch emitter writes the DDP/FSDP call and the hook registration", "[emit]") {
    const std::string p = advisor::emit_torch(
        gpt2("ddp", {{"comm_hook", "powerSGD"}, {"start_powerSGD_iter", "10"}, {"gradient_as_bucket_view", "true"}}));
    INFO(p);
    CHECK(contains(p, "model = DDP("));
    CHECK(contains(p, "bucket_cap_mb=25,"));
    CHECK(contains(p, "gradient_as_bucket_view=True,"));
    CHECK(contains(p, "static_graph=False,"));
    CHECK(contains(p, "find_unused_parameters=False,"));
    CHECK(contains(p, "broadcast_buffers=True,"));
    CHECK(contains(p,
                   "PowerSGDState(\n    process_group=None,\n    matrix_approximation_rank=1,\n"
                   "    start_powerSGD_iter=10,"));
    CHECK(contains(p, "model.register_comm_hook(state, powerSGD.powerSGD_hook)"));

    const std::string h = advisor::emit_torch(gpt2("ddp", {{"comm_hook", "fp16_compress"}}));
    CHECK(contains(h, "model.register_comm_hook(None, default_hooks.fp16_compress_hook)"));
    CHECK_FALSE(contains(advisor::emit_torch(gpt2("ddp", {})), "register_comm_hook"));

    sim::Config fsdp = gpt2("fsdp", {{"backward_prefetch", "BACKWARD_POST"}});
    fsdp.precision = sim::Precision::bf16_mixed;
    const std::string f = advisor::emit_torch(fsdp);
    INFO(f);
    CHECK(contains(f, "model = FSDP("));
    CHECK(contains(f, "sharding_strategy=ShardingStrategy.FULL_SHARD,"));
    CHECK(contains(f, "backward_prefetch=BackwardPrefetch.BACKWARD_POST,"));
    CHECK(contains(f, "cpu_offload=CPUOffload(offload_params=False),"));
    CHECK(contains(f, "MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)"));

    const std::string d = advisor::emit_torch(gpt2("deepspeed", {}));
    CHECK(contains(d, "deepspeed.initialize("));
    CHECK(contains(d, "model=model,"));
    CHECK(contains(d, "config=\"ds_config.json\""));
}

TEST_CASE(
    "emitted configs say how to checkpoint: Lightning's block policy for full AC, torchtitan's op policy for --ac-op",
    "[emit]") {
    sim::Config fsdp = gpt2("fsdp", {});
    fsdp.activation_checkpointing = true;
    const std::string full = advisor::emit_lightning(fsdp);
    INFO(full);
    CHECK(contains(full, "activation_checkpointing_policy={Block}"));
    // What Block stands for, for this model: transformers' GPT2Block.
    CHECK(contains(full, "# Block: your model's block class (gpt2: transformers.models.gpt2.modeling_gpt2.GPT2Block)"));
    CHECK_FALSE(contains(full, "MUST_SAVE"));
    fsdp.ac_op = true;
    for (const std::string& text : {advisor::emit_lightning(fsdp), advisor::emit_torch(fsdp)}) {
        INFO(text);
        // Lightning's policy would checkpoint the whole block: op-level SAC needs the context function instead.
        CHECK_FALSE(contains(text, "activation_checkpointing_policy={Block}"));
        CHECK(contains(text, "create_selective_checkpoint_contexts"));
        CHECK(contains(text, "MUST_SAVE for SDPA's flash / efficient kernels and for aten.mm calls 1, 3, 5"));
    }
}

TEST_CASE("torch emitter writes fully_shard on each Block then the model, and Lightning names its way", "[emit]") {
    sim::Config c = gpt2("fsdp2", {{"reduce_dtype", "fp32"}});
    c.precision = sim::Precision::bf16_mixed;
    const std::string t = advisor::emit_torch(c);
    CHECK(contains(t, "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)"));
    CHECK(contains(t, "isinstance(m, Block)"));
    CHECK(contains(t, "fully_shard(model, mp_policy=mp_policy)\n"));  // auto: the argument left out
    CHECK_FALSE(contains(t, "init_device_mesh"));
    c.knobs = {{"reshard_after_forward", "false"}, {"hsdp", "true"}};
    const std::string h = advisor::emit_torch(c);
    CHECK(contains(h, "init_device_mesh(\"cuda\", (2, 4), mesh_dim_names=(\"replicate\", \"shard\"))"));
    CHECK(contains(h, "fully_shard(model, mesh=mesh, mp_policy=mp_policy, reshard_after_forward=False)"));
    CHECK_THROWS_WITH(advisor::emit_lightning(c), Catch::Contains("ModelParallelStrategy"));
}
