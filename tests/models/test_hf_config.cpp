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
                                                   {"qwen2-7b", 7'615'616'512}}) {
        INFO(e.dir);
        CHECK(build(hf(e.dir)).param_count() == e.params);  // the file
        CHECK(build(e.dir).param_count() == e.params);      // the built-in name, from the same file
    }
    // A directory holding a config.json; the built-in gpt2 and the one read from its config are the same model.
    CHECK(build(gpt2_dir).param_count() == 124'439'808);
    CHECK(build(gpt2_dir + "/config.json").param_count() == build("gpt2").param_count());
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
    const std::int64_t h = 4096, q = 2048, kv = 8 * 64, inter = 14336, vocab = 128256;
    CHECK(tied.param_count() == vocab * h + 32 * (2 * q * h + 2 * kv * h + 3 * h * inter + 2 * h) + h);
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
    const std::string moe = write(R"({"model_type": "mixtral", "hidden_size": 4096})");
    CHECK_THROWS_WITH(build(moe), Catch::Contains("mixture of experts"));
    const std::string missing = write(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2})");
    CHECK_THROWS_WITH(build(missing), Catch::Contains(missing) && Catch::Contains("num_attention_heads"));
    const std::string bad_kv = write(R"({"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 2,
        "num_attention_heads": 32, "num_key_value_heads": 5, "intermediate_size": 14336, "vocab_size": 32000,
        "max_position_embeddings": 4096})");
    CHECK_THROWS_WITH(build(bad_kv), Catch::Contains("num_key_value_heads") && Catch::Contains("divisor"));
    CHECK_THROWS_WITH(build(dir.file("nowhere")), Catch::Contains("nowhere"));
    CHECK_THROWS_WITH(build(dir.file("nothing.json")), Catch::Contains("nothing.json"));
}
