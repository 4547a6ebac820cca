// mlp-<layers>x<width>: `layers` Linear(width, width) with bias, ReLU after
// every Linear but the last, then an MSE loss. Input is micro_batch x width.
//
// Parameters are named as an nn.Module holding `self.layers = nn.ModuleList(...)`
// would name them: layers.<i>.weight [width, width], layers.<i>.bias [width].
// One Layer per Linear (its ReLU folded in), then a "loss" layer.
//
// Saved activations: each Linear saves its input (b*W), each ReLU its output
// (b*W), the MSE loss its prediction and target (2*b*W); all in the
// activation dtype.
#include "builders.hpp"

#include <fmt/format.h>

namespace dtsim::models {

Workload build_mlp(const std::string& name, std::int64_t layers, std::int64_t width, std::int64_t micro_batch,
                   DType activation_dtype) {
    Workload w = empty_workload(name, micro_batch, 1, activation_dtype, AttentionImpl::flash);

    const std::int64_t b = micro_batch;
    const std::int64_t dt = dtype_bytes(activation_dtype);
    int index = 0;
    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string prefix = fmt::format("layers.{}", i);
        LayerBuilder lb(prefix, -1, activation_dtype);
        lb.param(prefix + ".weight", {width, width}, index++);
        lb.param(prefix + ".bias", {width}, index++);
        // The first Linear takes the raw input, which needs no gradient.
        lb.linear("linear", b, width, width, /*with_input_grad=*/i != 0);
        lb.save(b * width * dt);
        if (i + 1 < layers) {
            lb.elementwise("relu", 2 * b * width * dt, flops_per_element::relu * static_cast<double>(b * width));
            lb.save(b * width * dt);
        }
        w.layers.push_back(std::move(lb).finish());
    }

    LayerBuilder loss("loss", -1, activation_dtype);
    add_loss(loss, "mse", b * width, flops_per_element::mse);
    loss.save(2 * b * width * dt);
    w.layers.push_back(std::move(loss).finish());
    return w;
}

}  // namespace dtsim::models
