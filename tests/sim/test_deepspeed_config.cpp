// Reading DeepSpeed config JSON (formats.md §4) into the "deepspeed" strategy.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/deepspeed_config.hpp"
#include "dtsim/sim/simulate.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
    const std::string path = dir.file(name);
    std::ofstream(path) << text;
    return path;
}

Config base() {
    Config c;
    c.model = "gpt2";
    c.topology = {1, 8};
    c.micro_batch = 3;
    c.grad_accum = 5;
    c.seq_len = 128;
    c.precision = Precision::fp16_mixed;
    return c;
}

std::string knob(const Config& c, const std::string& name) {
    std::string value = "(unset)";
    for (const auto& [k, v] : c.knobs)
        if (k == name) value = v;  // the last one wins, as in Knobs
    return value;
}

// The ParseError's field, or "no error".
std::string error_field(const std::string& path, Config c = base()) {
    try {
        apply_deepspeed_config(path, c);
    } catch (const ParseError& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains(path));
        return e.field();
    }
    return "no error";
}

// The HuggingFace Trainer's ZeRO-3 template (transformers docs, "deepspeed"), "auto" everywhere.
const char* kHfZero3 = R"({
  "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "initial_scale_power": 16,
           "hysteresis": 2, "min_loss_scale": 1},
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                "warmup_num_steps": "auto"}},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "cpu", "pin_memory": true},
    "overlap_comm": true,
    "contiguous_gradients": true,
    "sub_group_size": 1e9,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": 1e9,
    "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true
  },
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "steps_per_print": 2000,
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "wall_clock_breakdown": false
})";

}  // namespace

TEST_CASE("a HuggingFace ZeRO-3 template: \"auto\" keeps dtsim's values, the rest become knobs") {
    test::TempDir dir;
    Config c = base();
    apply_deepspeed_config(write(dir, "ds_z3.json", kHfZero3), c);
    CHECK(c.strategy == "deepspeed");
    CHECK(c.micro_batch == 3);
    CHECK(c.grad_accum == 5);
    CHECK(c.precision == Precision::fp16_mixed);
    CHECK(knob(c, "stage") == "3");
    CHECK(knob(c, "offload_optimizer") == "cpu");
    CHECK(knob(c, "offload_param") == "cpu");
    CHECK(knob(c, "pin_memory") == "true");
    CHECK(knob(c, "overlap_comm") == "true");
    CHECK(knob(c, "sub_group_size") == "1000000000");
    CHECK(knob(c, "stage3_max_live_parameters") == "1000000000");
    CHECK(knob(c, "stage3_max_reuse_distance") == "1000000000");
    CHECK(knob(c, "reduce_bucket_size") == "(unset)");
    CHECK(knob(c, "stage3_prefetch_bucket_size") == "(unset)");
    // The knobs are valid for the strategy: it simulates.
    SimResult r = simulate(c, calib::load_hardware("a100-sxm"));
    CHECK(r.metrics.h2d_bytes > 0);
    CHECK(r.metrics.host_compute_s > 0);
}

TEST_CASE("explicit numbers set the batch, accumulation and precision, and train_batch_size must agree") {
    test::TempDir dir;
    Config c = base();
    apply_deepspeed_config(write(dir, "z2.json", R"({
        "train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "bf16": {"enabled": true},
        "zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8, "allgather_partitions": true,
                              "round_robin_gradients": false, "overlap_comm": false,
                              "offload_optimizer": {"device": "cpu", "nvme_path": "/local_nvme", "buffer_count": 4}}
    })"),
                           c);
    CHECK(c.micro_batch == 4);
    CHECK(c.grad_accum == 2);
    CHECK(c.precision == Precision::bf16_mixed);
    CHECK(knob(c, "stage") == "2");
    CHECK(knob(c, "reduce_bucket_size") == "200000000");
    CHECK(knob(c, "overlap_comm") == "false");
    CHECK(knob(c, "offload_optimizer") == "cpu");
    CHECK(knob(c, "pin_memory") == "(unset)");

    // 4 x 2 x 8 = 64, so 65 is an error naming the field; the config is left untouched.
    Config before = base();
    const std::string bad = write(dir, "bad_total.json", R"({
        "train_batch_size": 65, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "zero_optimization": {"stage": 2}})");
    CHECK(error_field(bad, before) == "/train_batch_size");
    CHECK(before.strategy == "ddp");
    CHECK(before.knobs.empty());

    // A missing one is derived, as DeepSpeed does.
    Config d = base();
    apply_deepspeed_config(write(dir, "derive.json", R"({
        "train_batch_size": 96, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1}})"),
                           d);
    CHECK(d.grad_accum == 3);
}

TEST_CASE("precision: fp16, explicit fp32, and the deprecated cpu_offload") {
    test::TempDir dir;
    Config c = base();
    c.precision = Precision::bf16_mixed;
    apply_deepspeed_config(write(dir, "fp16.json", R"({"fp16": {"enabled": true}, "zero_optimization": {"stage": 1}})"),
                           c);
    CHECK(c.precision == Precision::fp16_mixed);
    Config f = base();
    apply_deepspeed_config(write(dir, "fp32.json", R"({"fp16": {"enabled": false}, "bf16": {"enabled": false},
        "zero_optimization": {"stage": 2, "cpu_offload": true}})"),
                           f);
    CHECK(f.precision == Precision::fp32);
    CHECK(knob(f, "offload_optimizer") == "cpu");
}

TEST_CASE("malformed DeepSpeed configs: errors name the file and the field") {
    test::TempDir dir;
    CHECK(error_field(write(dir, "a.json", R"({"zero_optimization": {"stage": "three"}})")) ==
          "/zero_optimization/stage");
    CHECK(error_field(write(dir, "b.json", R"({"zero_optimization": {"stage": 5}})")) == "/zero_optimization/stage");
    CHECK(error_field(write(dir, "c.json", R"({"zero_optimization": {"stage": 0}})")) == "/zero_optimization/stage");
    // DeepSpeed's default stage is 0 (no ZeRO): a missing stage is an error, not stage 2.
    CHECK(error_field(write(dir, "c2.json", R"({"zero_optimization": {"reduce_bucket_size": 5e8}})")) ==
          "/zero_optimization/stage");
    {
        Config c = base();
        try {
            apply_deepspeed_config(write(dir, "c3.json", R"({"zero_optimization": {}})"), c);
            FAIL("no error");
        } catch (const ParseError& e) {
            CHECK(e.field() == "/zero_optimization/stage");
            CHECK_THAT(std::string(e.what()), Catch::Contains("stages 1-3") && Catch::Contains("--strategy ddp"));
        }
    }
    CHECK(error_field(write(dir, "d.json", R"({"zero_optimization": {"stage": 2, "reduce_bucket": 5e8}})")) ==
          "/zero_optimization/reduce_bucket");
    CHECK(error_field(write(dir, "e.json", R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": -1}})")) ==
          "/zero_optimization/reduce_bucket_size");
    CHECK(error_field(write(dir, "f.json", R"({"zero_optimization": {"stage": 3, "overlap_comm": "yes"}})")) ==
          "/zero_optimization/overlap_comm");
    CHECK(error_field(
              write(dir, "g.json", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}}})")) ==
          "/zero_optimization/offload_param/device");
    CHECK(error_field(
              write(dir, "h.json", R"({"zero_optimization": {"stage": 3, "offload_param": {"devise": "cpu"}}})")) ==
          "/zero_optimization/offload_param/devise");
    CHECK(error_field(write(dir, "i.json", R"({"train_micro_batch_size_per_gpu": 0,
                                              "zero_optimization": {"stage": 2}})")) ==
          "/train_micro_batch_size_per_gpu");
    CHECK(error_field(write(dir, "j.json", R"({"bf16": {"enabled": true}, "fp16": {"enabled": true},
                                              "zero_optimization": {"stage": 2}})")) == "/fp16");
    CHECK(error_field(write(dir, "k.json", R"({"train_batch_size": 16})")) == "/zero_optimization");
    CHECK(error_field(write(dir, "l.json", R"({"zero_optimization": {"stage": 3, "zero_quantized_weights": true}})")) ==
          "/zero_optimization/zero_quantized_weights");
    CHECK(error_field(write(dir, "m.json", R"({"zero_optimization": {"stage": 2,)")) == "");  // not JSON
    CHECK(error_field(dir.file("missing.json")) == "");
    // Known DeepSpeed keys dtsim does not model are accepted.
    CHECK(error_field(write(dir, "ok.json", R"({"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 1e9,
        "round_robin_gradients": true, "zero_quantized_weights": false, "prefetch_bucket_size": 1e7}})")) ==
          "no error");
}

TEST_CASE("knobs given after the file override it, and contradictions surface when lowering") {
    test::TempDir dir;
    Config c = base();
    apply_deepspeed_config(
        write(dir, "z2p.json", R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})"), c);
    CHECK_THROWS_WITH(simulate(c, calib::load_hardware("a100-sxm")), Catch::Contains("offload_param"));
    c.knobs.emplace_back("stage", "3");
    CHECK_NOTHROW(simulate(c, calib::load_hardware("a100-sxm")));
}

TEST_CASE("stage3_max_reuse_distance (either spelling) becomes the knob") {
    test::TempDir dir;
    Config c = base();
    apply_deepspeed_config(
        write(dir, "r.json", R"({"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 2e8}})"), c);
    CHECK(knob(c, "stage3_max_reuse_distance") == "200000000");
    Config d = base();
    apply_deepspeed_config(write(dir, "r2.json", R"({"zero_optimization": {"stage": 3, "max_reuse_distance": 0}})"), d);
    CHECK(knob(d, "stage3_max_reuse_distance") == "0");
    CHECK(error_field(write(dir, "r3.json", R"({"zero_optimization": {"stage": 3, "max_reuse_distance": -5}})")) ==
          "/zero_optimization/max_reuse_distance");
}

// DeepSpeed 0.19.8's DeepSpeedZeroConfig, every key (tests/data/deepspeed;
// tests/python/emitted_lightning.py has DeepSpeed itself parse the same file).
TEST_CASE(
    "every zero_optimization key DeepSpeed accepts is accepted, and those that change nothing come back as notes") {
    const std::string every = std::string(DTSIM_SOURCE_DIR) + "/tests/data/deepspeed/zero3_every_key.json";
    Config c = base();
    const std::vector<std::string> notes = apply_deepspeed_config(every, c);
    CHECK(knob(c, "stage") == "3");
    CHECK(knob(c, "offload_optimizer") == "cpu");
    CHECK(knob(c, "offload_param") == "cpu");
    CHECK(knob(c, "pin_memory") == "true");
    REQUIRE(notes.size() == 2);
    CHECK_THAT(notes[0], Catch::Contains(every) && Catch::Contains("round_robin_gradients") &&
                             Catch::Contains("leaf_module") && Catch::Contains("change nothing"));
    CHECK_THAT(notes[1], Catch::Contains("cpu_offload_use_pin_memory") && Catch::Contains("ignores"));
    CHECK_NOTHROW(simulate(c, calib::load_hardware("h100-sxm")));

    // A key that changes stage 3's fetches, set, is accepted with a note that it is not modelled.
    test::TempDir dir;
    Config s = base();
    const auto seq = apply_deepspeed_config(
        write(dir, "seq.json", R"({"zero_optimization": {"stage": 3, "stage3_allgather_sequential": true}})"), s);
    REQUIRE(seq.size() == 1);
    CHECK_THAT(seq[0], Catch::Contains("stage3_allgather_sequential") && Catch::Contains("not modelled"));
    // Nothing to say about a file of modelled keys only.
    Config m = base();
    CHECK(apply_deepspeed_config(write(dir, "m.json", R"({"zero_optimization": {"stage": 2}})"), m).empty());
}

TEST_CASE("what DeepSpeed refuses is refused, in DeepSpeed's words") {
    test::TempDir dir;
    const auto message = [&](const std::string& name, const std::string& text) {
        Config c = base();
        try {
            apply_deepspeed_config(write(dir, name, text), c);
        } catch (const ParseError& e) {
            return e.field() + " " + e.what();
        }
        return std::string("no error");
    };
    CHECK_THAT(message("a.json", R"({"zero_optimization": {"stage": 2, "bogus_key": 1}})"),
               Catch::StartsWith("/zero_optimization/bogus_key") && Catch::Contains("Extra inputs are not permitted"));
    CHECK_THAT(message("b.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"buffer_size": 1}}})"),
               Catch::StartsWith("/zero_optimization/offload_optimizer/buffer_size") &&
                   Catch::Contains("Extra inputs are not permitted") && Catch::Contains("cpuadam_cores_perc"));
    CHECK_THAT(message("c.json", R"({"zero_optimization": {"stage": 3, "mics_shard_size": 8}})"),
               Catch::Contains("MiCS ZeRO-3 sharding has been removed"));
    CHECK_THAT(message("d.json", R"({"zero_optimization": {"stage": 2, "cpu_offload": true,
                                                           "offload_optimizer": {"device": "cpu"}}})"),
               Catch::Contains("Cannot provide deprecated parameter 'cpu_offload'"));
    CHECK_THAT(message("e.json", R"({"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1,
                                                           "max_live_parameters": 2}})"),
               Catch::StartsWith("/zero_optimization/max_live_parameters") && Catch::Contains("Extra inputs"));
    CHECK_THAT(message("f.json", R"({"zero_optimization": {"stage": 3, "compute_grad_norm": false}})"),
               Catch::Contains("only with ZeRO Stage 1 or 2"));
    CHECK(message("g.json", R"({"zero_optimization": {"stage": 2, "compute_grad_norm": false}})") == "no error");
    CHECK_THAT(message("h.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"ratio": 0.5}}})"),
               Catch::StartsWith("/zero_optimization/offload_optimizer/ratio") && Catch::Contains("not modelled"));
    CHECK_THAT(message("i.json", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"ratio": 1.5}}})"),
               Catch::StartsWith("/zero_optimization/offload_optimizer/ratio"));
    CHECK_THAT(message("j.json", R"({"zero_optimization": {"stage": 3, "zenflow": {"topk_ratio": 0.1}}})"),
               Catch::StartsWith("/zero_optimization/zenflow") && Catch::Contains("not modelled"));
}
