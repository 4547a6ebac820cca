// --model path/to/config.json: the HuggingFace configs committed under
// models/hf_configs/ (see its README; also the built-in llama3-8b, ...) and
// tests/data/hf/gpt2 build workloads with the published parameter counts;
// bad files name the file and the field.
#include "dtsim/common/error.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/models/workload.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::models;

namespace {

std::string hf(const std::string& name) {
    return std::string(DTSIM_SOURCE_DIR) + "/models/hf_configs/" + name + ".json";
}
const std::string gpt2_dir = std::string(DTSIM_SOURCE_DIR) + "/tests/data/hf/gpt2";

Workload build(const std::string& model, std::int64_t seq = 16) {
    return build_workload(WorkloadRequest{model, 1, seq, DType::bf16, AttentionImpl::flash});
}

}  // namespace

// Published counts (the Hub's safetensors totals; tests/data/hf/README.md).
TEST_CASE("HuggingFace config.json models have the published parameter counts") {
    struct Expected {
        const char* dir;
        std::int64_t params;
    };
    for (const Expected& e : std::vector<Expected>{{"llama3-8b", 8'030'261'248},
                                                   {"llama3-70b", 70'553'706'496},
                                                   {"mistral-7b", 7'241'732'096},
                                                   {"qwen2-7b", 7'615'616'512},
                                                   {"mixtral-8x7b", 46'702'792'704},
                                                   {"gemma2-9b", 9'241'705'984},
                                                   {"phi3-mini", 3'821'079'552}}) {
        INFO(e.dir);
        CHECK(build(hf(e.dir)).param_count() == e.params);  // the file
        CHECK(build(e.dir).param_count() == e.params);      // the built-in name, from the same file
    }
    // A directory holding a config.json; the built-in gpt2 and the one read from its config are the same model.
    CHECK(build(gpt2_dir).param_count() == 124'439'808);
    CHECK(build(gpt2_dir + "/config.json").param_count() == build("gpt2").param_count());
}

// Gemma, Gemma-2, Phi-3, GPT-NeoX and Falcon: tests/data/hf/README.md gives
// each count's source. Falcon's is transformers' num_parameters(), lm_head
// tied to the embeddings; the Hub's totals count the copy its checkpoints store.
TEST_CASE("HuggingFace gemma, gemma2, phi3, gpt_neox and falcon configs have the published parameter counts") {
    struct Expected {
        const char* dir;
        std::int64_t params;
    };
    for (const Expected& e : std::vector<Expected>{{"gemma-2b", 2'506'172'416},
                                                   {"gemma-7b", 8'537'680'896},
                                                   {"gemma-2-2b", 2'614'341'888},
                                                   {"gemma-2-9b-it", 9'241'705'984},
                                                   {"Phi-3-medium-4k-instruct", 13'960'238'080},
                                                   {"pythia-160m", 162'322'944},
                                                   {"gpt-neox-20b", 20'554'567'680},
                                                   {"falcon-7b-instruct", 6'921'720'704},
                                                   {"falcon-40b", 41'303'293'952}}) {
        INFO(e.dir);
        const Workload w = build(std::string(DTSIM_SOURCE_DIR) + "/tests/data/hf/" + e.dir);
        CHECK(w.param_count() == e.params);
        // model.parameters() order: every index once.
        std::vector<int> idx;
        for (const auto& l : w.layers)
            for (const auto& p : l.params) idx.push_back(p.index);
        std::sort(idx.begin(), idx.end());
        for (std::size_t i = 0; i < idx.size(); ++i) REQUIRE(idx[i] == static_cast<int>(i));
        // Forward: about 2 FLOPs per parameter per token (16 tokens), embeddings aside.
        CHECK(w.forward_flops() > 2.0 * static_cast<double>(e.params) * 16 * 0.5);
        CHECK(w.forward_flops() < 2.0 * static_cast<double>(e.params) * 16 * 1.2);
    }
}

TEST_CASE("HuggingFace configs: GQA, head_dim, Qwen2's q/k/v biases, tied embeddings, indices in order") {
    const Workload llama3 = build(hf("llama3-8b"));
    const auto param = [](const Workload& w, const std::string& name) -> std::vector<std::int64_t> {
        for (const auto& l : w.layers)
            for (const auto& p : l.params)
                if (p.name == name) return p.shape;
        return {};
    };
    CHECK(param(llama3, "layers.0.self_attn.k_proj.weight") == std::vector<std::int64_t>{1024, 4096});  // 8 KV heads
    CHECK(param(llama3, "lm_head.weight") == std::vector<std::int64_t>{128256, 4096});
    CHECK(llama3.seq_len == 16);
    CHECK(build(hf("llama3-8b"), 0).seq_len == 8192);  // max_position_embeddings
    const Workload qwen = build(hf("qwen2-7b"));
    CHECK(param(qwen, "layers.3.self_attn.q_proj.bias") == std::vector<std::int64_t>{3584});
    CHECK(param(qwen, "layers.3.self_attn.v_proj.bias") == std::vector<std::int64_t>{512});
    CHECK(param(qwen, "layers.3.self_attn.o_proj.bias").empty());
    for (const Workload* w : {&llama3, &qwen}) {
        std::vector<int> idx;
        for (const auto& l : w->layers)
            for (const auto& p : l.params) idx.push_back(p.index);
        std::sort(idx.begin(), idx.end());
        for (std::size_t i = 0; i < idx.size(); ++i) REQUIRE(idx[i] == static_cast<int>(i));
    }

    // head_dim other than hidden/heads, and tied embeddings, on an edited Llama-3 config.
    test::TempDir dir;
    std::string text = test::read_text(hf("llama3-8b"));
    text.replace(text.find("\"tie_word_embeddings\": false"), 28, "\"tie_word_embeddings\": true, \"head_dim\": 64");
    const std::string edited = dir.file("config.json");
    std::ofstream(edited) << text;
    const Workload tied = build(edited);
    CHECK(param(tied, "lm_head.weight").empty());
    CHECK(param(tied, "layers.0.self_attn.q_proj.weight") == std::vector<std::int64_t>{32 * 64, 4096});
    CHECK(param(tied, "layers.0.self_attn.o_proj.weight") == std::vector<std::int64_t>{4096, 32 * 64});
    // Llama 3.1: rope_scaling (llama3 type) and a 128k context change no parameter.
    std::string llama31 = test::read_text(hf("llama3-8b"));
    llama31.replace(llama31.find("\"max_position_embeddings\": 8192"), 31,
                    "\"max_position_embeddings\": 131072, \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": "
                    "1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": "
                    "\"llama3\"}");
    const std::string llama31_file = dir.file("llama31.json");
    std::ofstream(llama31_file) << llama31;
    CHECK(build(llama31_file).param_count() == 8'030'261'248);
    CHECK(build(llama31_file, 0).seq_len == 131072);
    const std::int64_t h = 4096, q = 2048, kv = 8 * 64, inter = 14336, vocab = 128256;
    CHECK(tied.param_count() == vocab * h + 32 * (2 * q * h + 2 * kv * h + 3 * h * inter + 2 * h) + h);
}

TEST_CASE("HuggingFace mixtures of experts: every expert resident, top-k of them at work") {
    // Mixtral-8x7B: 8 experts of 3 x 4096 x 14336, top 2.
    const Workload mixtral = build("mixtral-8x7b", 64);
    const Workload mistral = build("mistral-7b", 64);  // the same attention and width, one dense MLP of 14336
    double moe_flops = 0, dense_flops = 0;
    std::int64_t expert_tensors = 0;
    for (const auto& l : mixtral.layers) {
        if (l.name == "layers.0.block_sparse_moe.experts") expert_tensors = static_cast<std::int64_t>(l.params.size());
        if (l.name.find("block_sparse_moe") != std::string::npos)
            for (const auto& op : l.forward) moe_flops += op.kind == OpKind::gemm ? op.flops : 0;
    }
    for (const auto& l : mistral.layers)
        if (l.name.find(".mlp.") != std::string::npos)
            for (const auto& op : l.forward) dense_flops += op.kind == OpKind::gemm ? op.flops : 0;
    CHECK(expert_tensors == 8 * 3);
    // Top 2 of 8: twice a dense MLP's GEMM flops per token, plus the router's 4096 x 8.
    CHECK(moe_flops == Catch::Detail::Approx(2 * dense_flops + 32 * 2.0 * 64 * 8 * 4096));
    // Qwen1.5-MoE-A2.7B (qwen2_moe): 60 experts of 1408, top 4, a shared expert of 5632 and its gate;
    // counted from Qwen2MoeSparseMoeBlock's modules.
    const std::int64_t h = 2048, vocab = 151936;
    const std::int64_t attention = 4 * h * h + 3 * h, moe = 60 * h + 60 * 3 * h * 1408 + 3 * h * 5632 + h;
    CHECK(build(std::string(DTSIM_SOURCE_DIR) + "/tests/data/hf/Qwen1.5-MoE-A2.7B").param_count() ==
          2 * vocab * h + 24 * (attention + moe + 2 * h) + h);
}

TEST_CASE("HuggingFace configs: an unknown model_type or a missing field names the file and the field") {
    test::TempDir dir;
    const auto write = [&](const std::string& text) {
        const std::string path = dir.file("config.json");
        std::ofstream(path) << text;
        return path;
    };
    const std::string bert = write(R"({"model_type": "bert", "hidden_size": 768})");
    CHECK_THROWS_WITH(build(bert), Catch::Contains(bert) && Catch::Contains("model_type") && Catch::Contains("bert"));
    const std::string moe = write(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 2,
        "num_attention_heads": 16, "intermediate_size": 5632, "vocab_size": 1000, "max_position_embeddings": 64,
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 128, "decoder_sparse_step": 2})");
    CHECK_THROWS_WITH(build(moe), Catch::Contains("decoder_sparse_step") && Catch::Contains("not modelled"));
    const std::string missing = write(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2})");
    CHECK_THROWS_WITH(build(missing), Catch::Contains(missing) && Catch::Contains("num_attention_heads"));
    const std::string bad_kv = write(R"({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 2,
        "num_attention_heads": 32, "num_key_value_heads": 5, "intermediate_size": 14336, "vocab_size": 32000,
        "max_position_embeddings": 4096})");
    CHECK_THROWS_WITH(build(bad_kv), Catch::Contains("num_key_value_heads") && Catch::Contains("divisor"));
    CHECK_THROWS_WITH(build(dir.file("nowhere")), Catch::Contains("nowhere"));
    CHECK_THROWS_WITH(build(dir.file("nothing.json")), Catch::Contains("nothing.json"));
}
