// Op-level selective activation checkpointing (Config::ac_op), against the
// policy torchtitan applies (`_apply_op_sac`): inside each checkpointed block
// the outputs of SDPA and of aten.mm calls 1, 3, 5, ... are saved and every
// other op is recomputed. A Linear with a bias runs aten.addmm, which is not
// on the list. The expected op names below are that rule applied by hand to
// each model's block (HF's module order), not read back from the code.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/selective_ac.hpp"
#include "dtsim/sim/simulate.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

using namespace dtsim;
using namespace dtsim::sim;

namespace {

Config config(const std::string& model) {
    Config c;
    c.model = model;
    c.topology = {1, 8};
    c.micro_batch = 2;
    c.seq_len = 2048;
    c.precision = Precision::bf16_mixed;
    c.strategy = "fsdp";
    return c;
}

// The GEMMs of block 0's forward (batch 1, not attention), split by what op-level SAC does with them.
struct Split {
    std::vector<std::string> saved, recomputed;
    bool sdpa_saved = true;
    int sdpa_ops = 0;
};

Split block0(const SimResult& r) {
    Split s;
    for (std::size_t l = 0; l < r.workload->layers.size(); ++l) {
        const auto& layer = r.workload->layers[l];
        if (layer.block != 0) continue;
        REQUIRE(l < r.plan.recompute_saved.size());
        const auto& mask = r.plan.recompute_saved[l];
        REQUIRE(mask.size() == layer.forward.size());
        for (std::size_t k = 0; k < layer.forward.size(); ++k) {
            const auto& op = layer.forward[k];
            if (op.name.rfind("flash.", 0) == 0) {
                ++s.sdpa_ops;
                s.sdpa_saved = s.sdpa_saved && mask[k] != 0;
            } else if (op.kind == models::OpKind::gemm && op.batch == 1) {
                (mask[k] != 0 ? s.saved : s.recomputed).push_back(op.name);
            } else {
                CHECK(mask[k] == 0);  // elementwise ops are always recomputed
            }
        }
    }
    return s;
}

std::int64_t activations_at_forward(const SimResult& r) {
    std::int64_t bytes = 0;
    for (const Task& t : r.plan.tasks)
        if (t.phase == Phase::forward)
            for (const auto& d : r.plan.memory_of(t))
                if (d.category == MemCategory::activations) bytes += d.bytes;
    return bytes;
}

}  // namespace

TEST_CASE("op-level selective AC saves SDPA and aten.mm calls 1 3 5 ... of each block (torchtitan's policy)") {
    const auto cal = calib::load_hardware("h100-sxm");
    SECTION("Llama 2: no Linear has a bias, so all seven projections are aten.mm") {
        Config c = config("llama2-7b");
        c.activation_checkpointing = true;
        c.ac_op = true;
        const Split s = block0(simulate(c, cal));
        CHECK(s.saved == std::vector<std::string>{"q_proj", "v_proj", "gate_proj", "down_proj"});
        CHECK(s.recomputed == std::vector<std::string>{"k_proj", "o_proj", "up_proj"});
        CHECK(s.sdpa_ops > 0);
        CHECK(s.sdpa_saved);
    }
    SECTION("Qwen2: q, k and v have biases (aten.addmm), so the mm count starts at o_proj") {
        Config c = config("qwen2-7b");
        c.activation_checkpointing = true;
        c.ac_op = true;
        const Split s = block0(simulate(c, cal));
        CHECK(s.saved == std::vector<std::string>{"o_proj", "up_proj"});
        CHECK(s.recomputed == std::vector<std::string>{"q_proj", "k_proj", "v_proj", "gate_proj", "down_proj"});
        CHECK(s.sdpa_saved);
    }
    SECTION("GPT-2: every Conv1D adds its bias (aten.addmm), so only SDPA is saved") {
        Config c = config("gpt2-medium");
        c.seq_len = 1024;
        c.activation_checkpointing = true;
        c.ac_op = true;
        const Split s = block0(simulate(c, cal));
        CHECK(s.saved.empty());
        CHECK(s.recomputed.size() == 4);
        CHECK(s.sdpa_saved);
    }
}

TEST_CASE("op-level selective AC recomputes only the unsaved ops and keeps the saved outputs through forward") {
    const auto cal = calib::load_hardware("h100-sxm");
    Config c = config("llama2-7b");
    const SimResult plain = simulate(c, cal);
    c.activation_checkpointing = true;
    const SimResult full = simulate(c, cal);
    c.ac_op = true;
    const SimResult op = simulate(c, cal);

    // Each recompute task costs its layer's forward ops, less the saved ones under op-level SAC,
    // priced one by one here.
    const CostModel model(cal);
    std::int64_t full_recompute = 0, op_recompute = 0;
    for (const SimResult* r : {&full, &op}) {
        for (std::size_t i = 0; i < r->plan.tasks.size(); ++i) {
            const Task& t = r->plan.tasks[i];
            if (t.phase != Phase::recompute) continue;
            const auto& layer = r->workload->layers[static_cast<std::size_t>(t.layer)];
            double expected = 0;
            for (std::size_t k = 0; k < layer.forward.size(); ++k) {
                const bool saved = r == &op && op.plan.recompute_saved[static_cast<std::size_t>(t.layer)][k] != 0;
                if (!saved) expected += model.op_ns(layer.forward[k]);
            }
            CHECK(std::abs(static_cast<double>(r->duration_ns[i]) - expected) <= 1.0);
            (r == &op ? op_recompute : full_recompute) += r->duration_ns[i];
        }
    }
    CHECK(op_recompute > 0);
    CHECK(op_recompute < full_recompute);

    // Through forward, a block keeps its input and the saved ops' outputs: q, v, gate and down
    // projections (tokens x width, bf16) and SDPA's output and fp32 log-sum-exp.
    const std::int64_t T = c.micro_batch * c.seq_len, h = 4096, inter = 11008, heads = 32, dt = 2;
    const std::int64_t per_block = (T * h + T * h + T * inter + T * h) * dt + (T * h * dt + 4 * heads * T);
    CHECK(activations_at_forward(op) - activations_at_forward(full) == 32 * per_block);

    // Between no checkpointing and full checkpointing, in time and in memory.
    CHECK(op.metrics.step_time_s > plain.metrics.step_time_s);
    CHECK(op.metrics.step_time_s < full.metrics.step_time_s);
    CHECK(op.metrics.peak_memory_bytes > full.metrics.peak_memory_bytes);
    CHECK(op.metrics.peak_memory_bytes < plain.metrics.peak_memory_bytes);
    // Every block layer's activations are released by its backward: nothing is left at the end.
    CHECK(op.schedule.memory.back().total_bytes == plain.schedule.memory.back().total_bytes);
}

TEST_CASE("op-level selective AC needs activation checkpointing and excludes AC by block frequency") {
    Config c = config("llama2-7b");
    c.ac_op = true;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--activation-checkpointing"));
    c.activation_checkpointing = true;
    c.ac_freq = 2;
    CHECK_THROWS_WITH(c.validate(), Catch::Contains("--ac-freq 2"));
    c.ac_freq = 1;
    CHECK_NOTHROW(c.validate());
}
