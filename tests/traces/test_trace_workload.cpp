// workload_from_trace on a real torch.profiler trace (tests/data/torch/
// transformer_1rank: nn.TransformerEncoder, 2 layers, d_model 256, no DDP,
// record_shapes and profile_memory on), with every expected figure computed
// here from the model's definition or from the trace's own spans, and on
// hand-written traces: tests/data/traces/training_step_cpu.json, whose
// figures are worked out by hand below, and small ones for the errors.
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/traces/trace_reader.hpp"
#include "dtsim/traces/trace_workload.hpp"

#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

using namespace dtsim;
using namespace dtsim::traces;

namespace {

std::string torch_trace(const std::string& c) {
    return std::string(DTSIM_SOURCE_DIR) + "/tests/data/torch/" + c + "/";
}

// The transformer's parameters as nn.TransformerEncoderLayer(d, heads, ff)
// defines them: in_proj (3d x d + 3d), out_proj (d x d + d), linear1
// (ff x d + ff), linear2 (d x ff + d), norm1 and norm2 (d + d each).
std::int64_t encoder_layer_params(std::int64_t d, std::int64_t ff) {
    return 3 * d * d + 3 * d + d * d + d + ff * d + ff + d * ff + d + 4 * d;
}

std::string write(const test::TempDir& dir, const std::string& name, const std::string& text) {
    const std::string path = dir.file(name);
    std::ofstream(path) << text;
    return path;
}

}  // namespace

// training_step_cpu.json, by hand (us): ProfilerStep#1 [0, 1000); zero_grad at
// 10; forward A linear [4,8]x[16,8]^T at 20, B relu at 130, C linear
// [4,16]x[2,16]^T at 160, D mse_loss at 230; backward nodes at 300 (D), 320
// (C), AccumulateGrad [2] at 370 and [2,16] at 380, 400 (B), 430 (A),
// AccumulateGrad [16] at 520 and [16,8] at 530; Optimizer.step at 600; the
// fwdbwd flows join each forward op to its node. [memory] CPU: 1000 at 5,
// 1512 at 125, 1768 at 140, 1800 at 225, 1804 at 235.
TEST_CASE("from a hand-written training step: every figure as worked out by hand") {
    const std::string file = std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/training_step_cpu.json";
    const TraceWorkload t = workload_from_trace(read_trace(file), file);
    const models::Workload& w = t.workload;
    CHECK(t.step == 1);
    CHECK(t.step_ns == 1'000'000);
    CHECK(t.forward_ns == 300'000);   // step start to the first node
    CHECK(t.backward_ns == 300'000);  // 300 to the optimizer at 600
    CHECK(t.optimizer_ns == 400'000); // 600 to the step's end
    // Layers start at A and C, the ops owning parameters; B and D join them.
    REQUIRE(w.layers.size() == 2);
    const auto& l0 = w.layers[0];
    const auto& l1 = w.layers[1];
    REQUIRE(l0.forward.size() == 2);
    REQUIRE(l1.forward.size() == 2);
    // A: 20 to 130, plus the 20 before it (step start, zero_grad); B: 130 to 160;
    // C: 160 to 230; D: 230 to the first node at 300.
    CHECK(l0.forward[0].measured_ns == 130'000);
    CHECK(l0.forward[1].measured_ns == 30'000);
    CHECK(l1.forward[0].measured_ns == 70'000);
    CHECK(l1.forward[1].measured_ns == 70'000);
    CHECK(l0.forward[0].flops == 2.0 * 4 * 16 * 8);
    CHECK(l1.forward[0].flops == 2.0 * 4 * 2 * 16);
    // Weight then bias, as the ops take them.
    REQUIRE(l0.params.size() == 2);
    REQUIRE(l1.params.size() == 2);
    CHECK(l0.params[0].shape == std::vector<std::int64_t>{16, 8});
    CHECK(l0.params[1].shape == std::vector<std::int64_t>{16});
    CHECK(l1.params[0].shape == std::vector<std::int64_t>{2, 16});
    CHECK(l1.params[1].shape == std::vector<std::int64_t>{2});
    CHECK(l0.params[0].index == 0);
    CHECK(l1.params[1].index == 3);
    CHECK(w.param_count() == 16 * 8 + 16 + 2 * 16 + 2);
    // Backward: D's and C's nodes and C's gradients in layer 1; B's and A's in layer 0.
    std::vector<std::int64_t> b1, b0;
    for (const auto& op : l1.backward) b1.push_back(op.measured_ns / 1000);
    for (const auto& op : l0.backward) b0.push_back(op.measured_ns / 1000);
    CHECK(b1 == std::vector<std::int64_t>{20, 50, 10, 20});
    CHECK(b0 == std::vector<std::int64_t>{30, 90, 10, 70});
    CHECK(l1.backward[1].flops == 2 * l1.forward[0].flops);  // C's first node carries its backward flops
    // Saved: layer 0 from A's start (1000 allocated) to B's end at 160 (1768);
    // layer 1 from 160 (1768) to D's end at 300 (1804).
    CHECK(l0.saved_activation_bytes == 768);
    CHECK(l1.saved_activation_bytes == 36);
    CHECK(w.measured_optimizer == "sgd");
    CHECK(w.measured_optimizer_ns_per_element == Catch::Detail::Approx(400'000.0 / 178));

    // The unprofiled step 900 us: 100 us over 24 recorded spans (zero_grad's
    // one, charged to A; the forward units' 6; the nodes' 16; the optimizer's one).
    const TraceWorkload u = workload_from_trace(read_trace(file), file, {.unprofiled_step_ns = 900'000});
    const double per_op = 100'000.0 / 24;
    CHECK(u.profiler_ns_per_op == Catch::Detail::Approx(per_op));
    // A carries zero_grad's span and its own two: 130 us less 3 ops.
    CHECK(u.workload.layers[0].forward[0].measured_ns == std::llround(130'000 - 3 * per_op));
    CHECK(u.optimizer_ns == std::llround(400'000 - per_op));
}

// The same step with [memory] events inside backward: at 325 (C's node) layer
// 1's gradients (34 floats, 136 B) and C's input gradient (64 B) are
// allocated, 2004; at 405 (B's node) ReLU's input gradient (64 B) beside the
// incoming one, 2068; at 425 both and C's saved input are freed, 1876.
TEST_CASE("from a hand-written training step: backward's gradient temporaries, worked out by hand") {
    std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/training_step_cpu.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string events;
    for (const auto& [ts, total] : {std::pair{325, 2004}, {405, 2068}, {425, 1876}})
        events += fmt::format(
            ",{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 1, "
            "\"tid\": 1, \"ts\": {}, \"args\": {{\"Total Reserved\": 0, \"Total Allocated\": {}, \"Bytes\": 0, "
            "\"Device Id\": -1, \"Device Type\": 0}}}}",
            ts, total);
    const auto end = text.rfind(']');
    REQUIRE(end != std::string::npos);
    text.insert(end, events);
    test::TempDir dir;
    const std::string file = write(dir, "step.json", text);
    const TraceWorkload t = workload_from_trace(read_trace(file), file);
    const models::Workload& w = t.workload;
    REQUIRE(w.layers.size() == 2);
    // Backward begins at 300 holding 1804. Layer 1 (nodes 300-385) peaks at
    // 2004: 200 over it. dtsim then adds its gradients (136) and frees its
    // saved 36: layer 0 (nodes 400-535) starts from 1804 + 100 in the model,
    // and the trace peaks at 2068: 164 over that.
    CHECK(w.layers[1].backward_transient_bytes == 200);
    CHECK(w.layers[0].backward_transient_bytes == 164);
    // Unchanged: forward's saved activations.
    CHECK(w.layers[0].saved_activation_bytes == 768);
    CHECK(w.layers[1].saved_activation_bytes == 36);
    // The hand-written trace without backward events holds no temporaries.
    const std::string plain = std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/training_step_cpu.json";
    for (const auto& l : workload_from_trace(read_trace(plain), plain).workload.layers)
        CHECK(l.backward_transient_bytes == 0);
}

TEST_CASE("from a real one-rank torch trace: parameters, layers, ops and times") {
    const std::string file = torch_trace("transformer_1rank");
    const TraceModel m = read_trace(file);
    const TraceWorkload t = workload_from_trace(m, file);
    const models::Workload& w = t.workload;

    // Every parameter, exactly as the model defines them.
    CHECK(w.param_count() == 2 * encoder_layer_params(256, 1024));
    std::size_t tensors = 0;
    for (const auto& l : w.layers) tensors += l.params.size();
    CHECK(tensors == 2 * 12);
    // First use: in_proj's weight then bias, then out_proj's.
    REQUIRE(w.layers.size() >= 2);
    REQUIRE(w.layers[0].params.size() == 2);
    CHECK(w.layers[0].params[0].shape == std::vector<std::int64_t>{768, 256});
    CHECK(w.layers[0].params[1].shape == std::vector<std::int64_t>{768});
    CHECK(w.layers[1].params[0].shape == std::vector<std::int64_t>{256, 256});
    // A layer per parameterised op: in_proj, out_proj, norm1, linear1, linear2, norm2, twice.
    CHECK(w.layers.size() == 12);
    int linears = 0;
    for (const auto& l : w.layers)
        for (const auto& op : l.forward) linears += op.name == "aten::linear";
    CHECK(linears == 8);
    for (int i = 0; i < 8; ++i) CHECK(w.layers[static_cast<std::size_t>(i)].params[0].index >= 0);

    // The median of the profiled steps by duration, from the spans themselves.
    std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // (dur, N)
    for (const Span& s : m.spans) {
        const std::string_view n = m.str(s.name);
        if (n.rfind("ProfilerStep#", 0) == 0) steps.emplace_back(s.dur_ns, std::stoll(std::string(n.substr(13))));
    }
    REQUIRE(steps.size() == 3);
    std::sort(steps.begin(), steps.end());
    CHECK(t.step == steps[1].second);
    CHECK(t.step_ns == steps[1].first);

    // The ops' measured times and the optimizer's add up to the step.
    std::int64_t forward = 0, backward = 0;
    for (const auto& l : w.layers) {
        for (const auto& op : l.forward) forward += op.measured_ns;
        for (const auto& op : l.backward) backward += op.measured_ns;
    }
    CHECK(forward == t.forward_ns);
    CHECK(backward == t.backward_ns);
    CHECK(t.forward_ns + t.backward_ns + t.optimizer_ns == t.step_ns);
    CHECK(t.optimizer_ns > 0);
    CHECK(w.measured_optimizer == "sgd");
    CHECK(w.measured_optimizer_ns_per_element ==
          Catch::Detail::Approx(static_cast<double>(t.optimizer_ns) / static_cast<double>(w.param_count())));
    // Every backward node has a layer: 24 AccumulateGrad among them.
    int accumulate = 0;
    for (const auto& l : w.layers)
        for (const auto& op : l.backward) accumulate += op.name == "torch::autograd::AccumulateGrad";
    CHECK(accumulate == 24);
    // A GEMM's flops from its Input Dims: in_proj is [64, 8, 256] x [768, 256]^T.
    const models::Op& in_proj = *std::find_if(w.layers[0].forward.begin(), w.layers[0].forward.end(),
                                              [](const models::Op& op) { return op.name == "aten::linear"; });
    CHECK(in_proj.flops == 2.0 * 64 * 8 * 768 * 256);
    // profile_memory was on: the forward leaves activations allocated.
    std::int64_t saved = 0;
    for (const auto& l : w.layers) saved += l.saved_activation_bytes;
    CHECK(saved > 0);
    CHECK(w.profile == file);
}

TEST_CASE("from a trace: a prediction on one rank replays the profile, and DDP on two adds its allreduces") {
    const std::string file = torch_trace("transformer_1rank");
    const TraceWorkload t = workload_from_trace(read_trace(file), file);
    auto w = std::make_shared<const models::Workload>(t.workload);
    // Any hardware: the ops are measured; the collectives are the preset's.
    const calib::Calibration cal = calib::load_hardware("h100-sxm");
    sim::Config c;
    c.model = "trace";
    c.strategy = "ddp";
    c.topology.nodes = 1;
    c.topology.gpus_per_node = 1;
    c.micro_batch = 8;
    c.optimizer = sim::OptimizerKind::sgd;
    const sim::SimResult one = sim::simulate(w, c, cal);
    // At least the measured step (DDP's reducer adds its copies), and not far above it.
    CHECK(one.metrics.step_time_s >= static_cast<double>(t.step_ns) / 1e9 * 0.999);
    CHECK(one.metrics.step_time_s <= static_cast<double>(t.step_ns) / 1e9 * 1.25);
    c.topology.gpus_per_node = 2;
    const sim::SimResult two = sim::simulate(w, c, cal);
    CHECK(two.metrics.step_time_s > one.metrics.step_time_s);
    // The same buckets torch built for this model (tests/data/torch/README.md, ddp_transformer):
    // 262,912 and 1,316,608 elements.
    std::vector<std::int64_t> buckets;
    for (const auto& b : two.plan.buckets) buckets.push_back(b.bytes / 4);
    std::sort(buckets.begin(), buckets.end());
    CHECK(buckets == std::vector<std::int64_t>{262'912, 1'316'608});
}

TEST_CASE("from a trace: the step asked for, and errors that name the file and what is missing") {
    const std::string file = torch_trace("transformer_1rank");
    const TraceModel m = read_trace(file);
    CHECK(workload_from_trace(m, file, {.rank = 0, .step = 4, .micro_batch = 1}).step == 4);
    CHECK_THROWS_WITH(workload_from_trace(m, file, {.rank = 0, .step = 9, .micro_batch = 1}),
                      Catch::Contains("no ProfilerStep#9") && Catch::Contains("2, 3, 4") && Catch::Contains(file));
    CHECK_THROWS_WITH(workload_from_trace(m, file, {.rank = 3, .step = -1, .micro_batch = 1}),
                      Catch::Contains("rank index 3"));


    test::TempDir dir;
    // A step with a forward op and no backward pass.
    const std::string no_backward = write(dir, "nobwd.json", R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
      {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50}]})");
    CHECK_THROWS_WITH(workload_from_trace(read_trace(no_backward), no_backward),
                      Catch::Contains("nobwd.json") && Catch::Contains("no backward pass"));
    // No step markers: the whole trace is the step, here one without a backward pass.
    const std::string no_steps = write(dir, "nosteps.json", R"({"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50}]})");
    CHECK_THROWS_WITH(workload_from_trace(read_trace(no_steps), no_steps), Catch::Contains("no backward pass"));
    // Nor any op.
    const std::string no_ops = write(dir, "noops.json", R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 1, "tid": 1, "ts": 10, "dur": 50}]})");
    CHECK_THROWS_WITH(workload_from_trace(read_trace(no_ops), no_ops), Catch::Contains("prof.step()"));
    // A backward pass without parameter gradients.
    const std::string no_params = write(dir, "noparams.json", R"({"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
      {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
      {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1, "tid": 1,
       "ts": 40, "dur": 20}]})");
    CHECK_THROWS_WITH(workload_from_trace(read_trace(no_params), no_params),
                      Catch::Contains("AccumulateGrad") && Catch::Contains("trainable parameters"));
}

TEST_CASE("from a real GPU trace: ops at their kernels' time, the backward from autograd's own thread") {
    // tests/data/torch/README.md: two Llama-2-7B blocks (hidden 4096, MLP 11008,
    // vocab 32000, untied lm_head) in bf16 on an H100, no ProfilerStep.
    const std::string file = torch_trace("h100_llama2_2blocks");
    const TraceModel m = read_trace(file);
    const TraceWorkload t = workload_from_trace(m, file);
    const models::Workload& w = t.workload;
    const std::int64_t h = 4096, inter = 11008, vocab = 32000;
    CHECK(w.param_count() == 2 * vocab * h + 2 * (4 * h * h + 3 * h * inter + 2 * h) + h);
    CHECK(t.param_dtype == DType::bf16);
    CHECK(t.step == -1);  // the whole trace
    CHECK(t.backward_nodes > 0);
    // The units' kernel times telescope from the first forward kernel to the
    // last backward kernel's end: inside the span of all the rank's kernels.
    std::int64_t first = INT64_MAX, last = INT64_MIN, busy = 0;
    for (std::size_t tr = 0; tr < m.tracks.size(); ++tr) {
        if (m.tracks[tr].kind != TrackKind::gpu_stream) continue;
        for (std::int32_t i = m.track_span_begin[tr]; i < m.track_span_begin[tr + 1]; ++i) {
            const Span& s = m.spans[static_cast<std::size_t>(i)];
            if (s.kind != SpanKind::compute && s.kind != SpanKind::memory) continue;
            first = std::min(first, s.start_ns);
            last = std::max(last, s.start_ns + s.dur_ns);
            busy += s.dur_ns;
        }
    }
    CHECK(t.forward_ns + t.backward_ns + t.optimizer_ns == t.step_ns);
    CHECK(t.step_ns <= last - first);
    CHECK(t.step_ns >= busy / 2);  // the GEMMs and attention are in it (one stream, little overlap to double count)
    CHECK(t.forward_ns > 0);
    CHECK(t.backward_ns > t.forward_ns);  // backward: twice the GEMM work
    // The per-op times price a prediction on the H100 preset at about the measured GPU time.
    auto shared = std::make_shared<const models::Workload>(w);
    sim::Config c;
    c.model = "trace";
    c.strategy = "ddp";
    c.precision = sim::Precision::bf16_mixed;
    c.micro_batch = 2;
    const sim::SimResult one = sim::simulate(shared, c, calib::load_hardware("h100-sxm"));
    CHECK(one.metrics.step_time_s >= static_cast<double>(t.step_ns) / 1e9);
}
