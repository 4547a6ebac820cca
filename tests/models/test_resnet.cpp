#include "dtsim/common/error.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/models/workload.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::models;
using Catch::Matchers::Contains;

namespace {

Workload resnet50(std::int64_t b, std::int64_t s = 0, DType dt = DType::bf16) {
    return build_workload(WorkloadRequest{"resnet50", b, s, dt, AttentionImpl::flash});
}

const Layer& layer(const Workload& w, const std::string& name) {
    for (const auto& l : w.layers)
        if (l.name == name) return l;
    FAIL("no layer " << name);
    throw;  // unreachable
}

const Parameter& param(const Workload& w, int index) {
    for (const auto& l : w.layers)
        for (const auto& p : l.params)
            if (p.index == index) return p;
    FAIL("no parameter with index " << index);
    throw;  // unreachable
}

std::int64_t saved_bytes(const Workload& w) {
    std::int64_t n = 0;
    for (const auto& l : w.layers) n += l.saved_activation_bytes;
    return n;
}

// BatchNorm2d channel counts of torchvision's resnet50, derived here from the
// architecture (stem 64; per Bottleneck planes, planes, 4*planes; plus a
// downsample BN of 4*planes on the first block of each stage).
std::vector<std::int64_t> resnet50_bn_channels() {
    std::vector<std::int64_t> c = {64};
    const std::int64_t blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
        const std::int64_t planes = 64 << stage;
        for (std::int64_t j = 0; j < blocks[stage]; ++j) {
            c.insert(c.end(), {planes, planes, 4 * planes});
            if (j == 0) c.push_back(4 * planes);
        }
    }
    return c;
}

}  // namespace

// torchvision's published count for resnet50 (external fact, not computed here).
constexpr std::int64_t resnet50_params = 25'557'032;

TEST_CASE("resnet50 has torchvision's parameter count, names, shapes and model.parameters() order") {
    const Workload w = resnet50(1);
    CHECK(w.param_count() == resnet50_params);

    std::vector<int> idx;
    for (const auto& l : w.layers)
        for (const auto& p : l.params) idx.push_back(p.index);
    REQUIRE(idx.size() == 161);                     // len(list(resnet50().parameters())): 53 convs, 53 BNs x 2, fc x 2
    CHECK(std::is_sorted(idx.begin(), idx.end()));  // forward order == definition order here
    for (std::size_t i = 0; i < idx.size(); ++i) REQUIRE(idx[i] == static_cast<int>(i));

    CHECK(param(w, 0).name == "conv1.weight");
    CHECK(param(w, 0).shape == std::vector<std::int64_t>{64, 3, 7, 7});
    CHECK(param(w, 1).name == "bn1.weight");
    CHECK(param(w, 2).name == "bn1.bias");
    CHECK(param(w, 3).name == "layer1.0.conv1.weight");
    CHECK(param(w, 3).shape == std::vector<std::int64_t>{64, 64, 1, 1});
    CHECK(param(w, 4).name == "layer1.0.bn1.weight");
    CHECK(param(w, 6).name == "layer1.0.conv2.weight");
    CHECK(param(w, 6).shape == std::vector<std::int64_t>{64, 64, 3, 3});
    CHECK(param(w, 9).name == "layer1.0.conv3.weight");
    CHECK(param(w, 9).shape == std::vector<std::int64_t>{256, 64, 1, 1});
    CHECK(param(w, 11).name == "layer1.0.bn3.bias");
    CHECK(param(w, 12).name == "layer1.0.downsample.0.weight");
    CHECK(param(w, 12).shape == std::vector<std::int64_t>{256, 64, 1, 1});
    CHECK(param(w, 13).name == "layer1.0.downsample.1.weight");
    CHECK(param(w, 14).name == "layer1.0.downsample.1.bias");
    CHECK(param(w, 15).name == "layer1.1.conv1.weight");
    CHECK(param(w, 15).shape == std::vector<std::int64_t>{64, 256, 1, 1});
    CHECK(param(w, 159).name == "fc.weight");
    CHECK(param(w, 159).shape == std::vector<std::int64_t>{1000, 2048});
    CHECK(param(w, 160).name == "fc.bias");
    CHECK(param(w, 160).shape == std::vector<std::int64_t>{1000});
    // Stride on conv2 (v1.5): layer2.0.conv2 is 3x3 128 -> 128, downsample 1x1 256 -> 512.
    CHECK(layer(w, "layer2.0.conv2").params[0].shape == std::vector<std::int64_t>{128, 128, 3, 3});
    CHECK(layer(w, "layer2.0.downsample.0").params[0].shape == std::vector<std::int64_t>{512, 256, 1, 1});
    CHECK(layer(w, "layer4.2.add").params.empty());
}

TEST_CASE("resnet50 layers: stem and head have block -1, bottlenecks 0..15") {
    const Workload w = resnet50(2);
    CHECK(w.layers[0].name == "conv1");
    CHECK(w.layers[1].name == "bn1");
    CHECK(w.layers[2].name == "maxpool");
    CHECK(w.layers[3].name == "layer1.0.conv1");
    CHECK(w.layers.back().name == "loss");
    CHECK(w.layers[w.layers.size() - 2].name == "fc");
    CHECK(w.layers[w.layers.size() - 3].name == "avgpool");
    std::set<int> blocks;
    for (const auto& l : w.layers) {
        INFO(l.name);
        if (l.name.starts_with("layer"))
            CHECK(l.block >= 0);
        else
            CHECK(l.block == -1);
        blocks.insert(l.block);
    }
    std::set<int> expected = {-1};
    for (int i = 0; i < 16; ++i) expected.insert(i);
    CHECK(blocks == expected);
    CHECK(layer(w, "layer1.2.add").block == 2);
    CHECK(layer(w, "layer2.0.conv1").block == 3);
    CHECK(layer(w, "layer4.2.bn3").block == 15);
    CHECK(w.seq_len == 1);
    CHECK(w.samples() == 2);
}

TEST_CASE("resnet50 buffer bytes: running_mean, running_var (fp32) and num_batches_tracked per BatchNorm") {
    const std::vector<std::int64_t> channels = resnet50_bn_channels();
    REQUIRE(channels.size() == 53);
    std::int64_t expected = 0;
    for (std::int64_t c : channels) expected += 2 * c * 4 + 8;
    const Workload w = resnet50(4);
    CHECK(w.buffer_bytes() == expected);
    CHECK(expected == 212'904);  // 2 * 26,560 BN channels * 4 + 53 * 8

    // Exactly the BN layers carry buffers, each for its own channel count.
    std::vector<std::int64_t> bn_channels;
    for (const auto& l : w.layers) {
        INFO(l.name);
        const bool is_bn =
            l.name.ends_with("downsample.1") || l.name.find(".bn") != std::string::npos || l.name == "bn1";
        if (is_bn) {
            REQUIRE(l.params.size() == 2);
            const std::int64_t c = l.params[0].shape.at(0);
            bn_channels.push_back(c);
            CHECK(l.buffer_bytes == 2 * c * 4 + 8);
        } else {
            CHECK(l.buffer_bytes == 0);
        }
    }
    CHECK(bn_channels == channels);
    CHECK(resnet50(1).buffer_bytes() == w.buffer_bytes());  // independent of the batch
}

TEST_CASE("resnet50 convs are implicit GEMMs, the first conv has no input gradient") {
    const std::int64_t b = 2;
    const Workload w = resnet50(b);
    const Layer& conv1 = layer(w, "conv1");
    REQUIRE(conv1.forward.size() == 1);
    const Op& f = conv1.forward[0];
    CHECK((f.kind == OpKind::gemm && f.m == b * 112 * 112 && f.n == 64 && f.k == 3 * 7 * 7));
    REQUIRE(conv1.backward.size() == 1);  // wgrad only
    CHECK(conv1.backward[0].name == "conv.wgrad");

    const Op& c2 = layer(w, "layer2.0.conv2").forward.at(0);
    CHECK((c2.m == b * 28 * 28 && c2.n == 128 && c2.k == 128 * 9));
    CHECK(layer(w, "layer2.0.conv2").backward.size() == 2);  // dgrad, wgrad
    const Op& ds = layer(w, "layer4.0.downsample.0").forward.at(0);
    CHECK((ds.m == b * 7 * 7 && ds.n == 2048 && ds.k == 1024));
    const Op& fc = layer(w, "fc").forward.at(0);
    CHECK((fc.m == b && fc.n == 1000 && fc.k == 2048));
    CHECK(layer(w, "loss").forward.at(0).kind == OpKind::loss);

    // BN (+ReLU) and the residual add are elementwise, backward in reverse.
    const Layer& bn = layer(w, "layer1.0.bn1");
    REQUIRE(bn.forward.size() == 2);
    CHECK((bn.forward[0].name == "bn" && bn.forward[1].name == "relu"));
    CHECK((bn.backward[0].name == "relu.bwd" && bn.backward[1].name == "bn.bwd"));
    CHECK(bn.forward[0].kind == OpKind::elementwise);
    CHECK(bn.forward[0].dtype == DType::bf16);
    CHECK(layer(w, "layer1.0.bn3").forward.size() == 1);  // no ReLU before the residual add
}

TEST_CASE("resnet50 forward is about 4.1 GMACs (8.2 GFLOPs) per 224x224 image") {
    const Workload w = resnet50(2);
    const double per_image = w.forward_flops() / 2;
    CHECK(per_image >= 7.5e9);
    CHECK(per_image <= 9.0e9);
    // Backward: dgrad + wgrad per GEMM, about twice the forward.
    CHECK(w.backward_flops() > 1.8 * w.forward_flops());
    CHECK(w.backward_flops() < 2.1 * w.forward_flops());
    CHECK(w.recompute_flops() == 0);
}

TEST_CASE("resnet50 saved activations follow the stated rule") {
    const std::int64_t b = 2, dt = 2;  // bf16
    const Workload w = resnet50(b, 0, DType::bf16);
    CHECK(layer(w, "conv1").saved_activation_bytes == b * 3 * 224 * 224 * dt);
    const std::int64_t stem = b * 64 * 112 * 112;
    CHECK(layer(w, "bn1").saved_activation_bytes == 2 * stem * dt + 2 * 4 * 64);  // input + ReLU output + stats
    // maxpool reads bn1's saved ReLU output: only its int64 indices are new.
    CHECK(layer(w, "maxpool").saved_activation_bytes == 8 * (b * 64 * 56 * 56));
    // The maxpool output is saved once, by layer1.0.conv1; the downsample branch shares it.
    CHECK(layer(w, "layer1.0.conv1").saved_activation_bytes == b * 64 * 56 * 56 * dt);
    CHECK(layer(w, "layer1.0.downsample.0").saved_activation_bytes == 0);
    // Convs reading a ReLU output save nothing of their own.
    CHECK(layer(w, "layer1.0.conv2").saved_activation_bytes == 0);
    CHECK(layer(w, "layer2.0.conv1").saved_activation_bytes == 0);
    CHECK(layer(w, "layer1.0.bn3").saved_activation_bytes == b * 256 * 56 * 56 * dt + 2 * 4 * 256);
    CHECK(layer(w, "layer1.0.add").saved_activation_bytes == b * 256 * 56 * 56 * dt);
    CHECK(layer(w, "avgpool").saved_activation_bytes == 0);
    CHECK(layer(w, "fc").saved_activation_bytes == b * 2048 * dt);
    // fp32 doubles the activation tensors; the indices and BN statistics do not change.
    const Workload w32 = resnet50(b, 0, DType::fp32);
    CHECK(layer(w32, "layer1.0.conv1").saved_activation_bytes == 2 * layer(w, "layer1.0.conv1").saved_activation_bytes);
    CHECK(layer(w32, "layer3.1.add").saved_activation_bytes == 2 * layer(w, "layer3.1.add").saved_activation_bytes);
}

TEST_CASE("resnet50 builds for micro-batch 1 and 32, flops and saved bytes scale linearly") {
    const Workload w1 = resnet50(1);
    const Workload w32 = resnet50(32);
    CHECK(w1.micro_batch == 1);
    CHECK(w32.micro_batch == 32);
    CHECK(w32.layers.size() == w1.layers.size());
    CHECK(w32.param_count() == w1.param_count());
    CHECK(w32.forward_flops() == Approx(32 * w1.forward_flops()));
    CHECK(w32.backward_flops() == Approx(32 * w1.backward_flops()));
    CHECK(w32.model_flops() == Approx(32 * w1.model_flops()));
    // Only the BN statistics (per channel, not per sample) break exact linearity.
    std::int64_t stats = 0;
    for (std::int64_t c : resnet50_bn_channels()) stats += 2 * 4 * c;
    CHECK(saved_bytes(w32) - stats == 32 * (saved_bytes(w1) - stats));
}

TEST_CASE("resnet50 is listed with its parameter count, seq_len must be 0 or 1") {
    const auto infos = list_models();
    const auto it = std::find_if(infos.begin(), infos.end(), [](const ModelInfo& m) { return m.name == "resnet50"; });
    REQUIRE(it != infos.end());
    CHECK(it->param_count == resnet50_params);
    CHECK(it->default_seq_len == 1);
    CHECK(it->training_flops_per_token > 3 * 7.5e9);  // per image: forward + backward
    const auto names = model_names();
    CHECK(std::find(names.begin(), names.end(), "resnet50") != names.end());

    CHECK(resnet50(1, 0).seq_len == 1);
    CHECK(resnet50(1, 1).seq_len == 1);
    for (std::int64_t s : {2, 224, -1}) {
        INFO(s);
        CHECK_THROWS_AS(resnet50(1, s), ConfigError);
    }
    CHECK_THROWS_WITH(resnet50(1, 2), Contains("seq_len 2") && Contains("resnet50"));
    CHECK_THROWS_AS(resnet50(0), ConfigError);
}
