// Lightning's FSDPStrategy(activation_checkpointing_policy={Block}) and
// auto_wrap_policy={Block} name the model's block class
// (lightning/fabric/strategies/fsdp.py: _setup_activation_checkpointing wraps
// every module of those classes in checkpoint_wrapper; the wrap policy becomes
// transformer_auto_wrap_policy). dtsim models both on whole blocks, so naming
// the block class must give exactly --activation-checkpointing and
// auto_wrap_policy=transformer, and any other class a one-line error. The block
// classes below are written out from transformers' and torchvision's module
// names, not read back from the builders.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config config(const std::string& model, const std::string& strategy) {
    Config c;
    c.model = model;
    c.topology = {1, 8};
    c.micro_batch = 1;
    c.seq_len = model.starts_with("resnet") || model.starts_with("mlp") ? 0 : 1024;
    c.precision = Precision::bf16_mixed;
    c.strategy = strategy;
    resolve_lightning_name(c);
    return c;
}

bool mentions(const std::string& what, const std::string& text) {
    return what.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("each model names its block class as transformers and torchvision define it") {
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"gpt2", "transformers.models.gpt2.modeling_gpt2.GPT2Block"},
        {"llama2-7b", "transformers.models.llama.modeling_llama.LlamaDecoderLayer"},
        {"llama3-8b", "transformers.models.llama.modeling_llama.LlamaDecoderLayer"},
        {"mistral-7b", "transformers.models.mistral.modeling_mistral.MistralDecoderLayer"},
        {"qwen2-7b", "transformers.models.qwen2.modeling_qwen2.Qwen2DecoderLayer"},
        {"mixtral-8x7b", "transformers.models.mixtral.modeling_mixtral.MixtralDecoderLayer"},
        {"gemma2-9b", "transformers.models.gemma2.modeling_gemma2.Gemma2DecoderLayer"},
        {"phi3-mini", "transformers.models.phi3.modeling_phi3.Phi3DecoderLayer"},
        {"resnet50", "torchvision.models.resnet.Bottleneck"},
        {"mlp-4x512", ""},
    };
    for (const auto& [model, cls] : expected) {
        INFO(model);
        CHECK(build_workload(config(model, "fsdp")).block_class == cls);
    }
}

TEST_CASE("activation_checkpointing_policy naming the block class is --activation-checkpointing") {
    const auto cal = calib::load_hardware("h100-sxm");
    for (const std::string model : {"llama2-7b", "gpt2"}) {
        INFO(model);
        const std::string block = build_workload(config(model, "fsdp")).block_name();
        Config flag = config(model, "fsdp");
        flag.activation_checkpointing = true;
        const Config policy = config(
            model, "FSDPStrategy(auto_wrap_policy={" + block + "}, activation_checkpointing_policy={" + block + "})");
        CHECK(policy.activation_checkpointing);
        Config none = config(model, "lightning:fsdp");
        none.knobs.emplace_back("auto_wrap_policy", "transformer");
        const SimResult a = simulate(flag, cal), b = simulate(policy, cal), n = simulate(none, cal);
        // The same plan: --activation-checkpointing with torch's frontend and the
        // transformer policy against Lightning's, which differ only in notes.
        CHECK(a.metrics.step_time_s == b.metrics.step_time_s);
        CHECK(a.metrics.peak_memory_bytes == b.metrics.peak_memory_bytes);
        CHECK(a.plan.tasks.size() == b.plan.tasks.size());
        CHECK(b.metrics.peak_memory_bytes < n.metrics.peak_memory_bytes);
        CHECK(b.metrics.step_time_s > n.metrics.step_time_s);
        bool noted = false;
        for (const auto& note : b.plan.notes)
            noted = noted || mentions(note, "checkpoint_wrapper around each " + block);
        CHECK(noted);
        // A dotted name and --set give the same thing.
        Config dotted = config(model, "fsdp");
        dotted.knobs.emplace_back("activation_checkpointing_policy", build_workload(config(model, "fsdp")).block_class);
        resolve_lightning_name(dotted);
        CHECK(simulate(dotted, cal).metrics.step_time_s == a.metrics.step_time_s);
    }
}

TEST_CASE("a policy naming another class, or a model without blocks, is a one-line error") {
    const auto cal = calib::load_hardware("h100-sxm");
    const auto error_of = [&](Config c) -> std::string {
        try {
            simulate(c, cal);
        } catch (const ConfigError& e) {
            return e.what();
        }
        return "";
    };
    Config gpt = config("llama2-7b", "FSDPStrategy(activation_checkpointing_policy={GPT2Block})");
    const std::string wrong = error_of(gpt);
    CHECK(mentions(wrong, "LlamaDecoderLayer"));
    CHECK(mentions(wrong, "GPT2Block is not one"));
    // Two classes, one of them a sub-module: dtsim checkpoints whole blocks only.
    Config two = config("llama2-7b", "FSDPStrategy(activation_checkpointing_policy={LlamaDecoderLayer, LlamaMLP})");
    CHECK(mentions(error_of(two), "LlamaMLP is not one"));
    Config wrap = config("qwen2-7b", "FSDPStrategy(auto_wrap_policy={LlamaDecoderLayer})");
    CHECK(mentions(error_of(wrap),
                   "transformer_layer_cls=LlamaDecoderLayer: expected qwen2-7b's block class "
                   "Qwen2DecoderLayer"));
    Config mlp = config("mlp-4x512", "fsdp");
    mlp.knobs.emplace_back("activation_checkpointing_policy", "Linear");
    resolve_lightning_name(mlp);
    CHECK(mentions(error_of(mlp), "mlp-4x512 has no blocks"));

    Config both = config("llama2-7b", "fsdp");
    both.activation_checkpointing = true;
    both.ac_op = true;
    both.knobs.emplace_back("activation_checkpointing_policy", "LlamaDecoderLayer");
    CHECK_THROWS_WITH(resolve_lightning_name(both), Catch::Contains("give one or the other"));
}

TEST_CASE("class-name knobs take Python names, dotted or comma-separated, and refuse anything else") {
    const auto& fsdp = strategies().find("fsdp");
    const auto value = [&](const std::string& given) {
        return Knobs("fsdp", fsdp.value.knobs, {{"activation_checkpointing_policy", given}})
            .text("activation_checkpointing_policy");
    };
    CHECK(value("transformers.models.llama.modeling_llama.LlamaDecoderLayer") == "LlamaDecoderLayer");
    CHECK(value("GPT2Block, my_pkg.Block2") == "GPT2Block,Block2");
    CHECK(value("None") == "none");
    for (const std::string bad : {"", "1Block", "a..B", "Block.", ".Block", "Block,", "Bl ock", "Block()"}) {
        INFO(bad);
        CHECK_THROWS_WITH(value(bad), Catch::Contains("expected a class name"));
    }
    // Python's set display allows a trailing comma; the deprecated keyword says the same.
    CHECK(config("gpt2", "FSDPStrategy(activation_checkpointing_policy={GPT2Block,})").activation_checkpointing);
    CHECK(config("gpt2", "FSDPStrategy(activation_checkpointing=[GPT2Block])").activation_checkpointing);
    CHECK_THROWS_WITH(config("gpt2",
                             "FSDPStrategy(activation_checkpointing=[GPT2Block], "
                             "activation_checkpointing_policy={GPT2Block})"),
                      Catch::Contains("Lightning refuses both"));
    CHECK_FALSE(config("gpt2", "FSDPStrategy(activation_checkpointing_policy=None)").activation_checkpointing);
}
