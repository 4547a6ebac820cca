// ResNet (torchvision.models.resnet50 and its Bottleneck siblings), ImageNet
// classification, module-granular like the transformers. A sample is one
// image (3 x image_size x image_size), so the workload's seq_len is 1.
//
// Layers in forward order: conv1 (7x7, stride 2, pad 3), bn1 (+ ReLU), maxpool
// (3x3, stride 2, pad 1); then per Bottleneck block layer<s>.<j> (`block` =
// the running block index, 0..15 for resnet50): conv1 (1x1), bn1 (+ ReLU),
// conv2 (3x3, pad 1, carries the stage stride: torchvision v1.5), bn2
// (+ ReLU), conv3 (1x1, expansion 4), bn3, on the first block of each stage
// downsample.0 (1x1 conv, stage stride) and downsample.1 (BatchNorm), then
// "add" (residual add + ReLU); then avgpool (adaptive, to 1x1), fc, loss
// (cross-entropy over the logits). Stem and head layers have block -1.
//
// Parameters: torchvision's names, shapes and model.parameters() order
// (conv1.weight, bn1.weight, bn1.bias, layer1.0.conv1.weight, ...,
// layer1.0.bn3.bias, layer1.0.downsample.0.weight, layer1.0.downsample.1.weight,
// ..., fc.weight [classes, 2048], fc.bias). Convs have no bias; conv weights
// are [C_out, C_in, kh, kw]. Buffers: each BatchNorm2d registers running_mean
// and running_var (fp32, C each) and num_batches_tracked (int64): its layer's
// buffer_bytes is 2*C*4 + 8, what DDP's broadcast_buffers sends.
//
// Ops. A conv is an implicit GEMM: m = b*H_out*W_out, n = C_out,
// k = C_in*kh*kw; its backward is gemm_backward (dgrad, wgrad), with no dgrad
// for the very first conv (the image needs no gradient). fc is the GEMM
// m = b, n = classes, k = 2048. The rest are elementwise ops in the activation
// dtype (dt bytes per element), backward by elementwise_backward (same bytes
// and flops); N is the op's input elements (b*C*H*W):
//   BatchNorm (training)  3*N*dt: one read of x for the batch statistics, one
//                         read of x and one write of y to normalise (the O(C)
//                         statistics and affine traffic is not charged)
//   ReLU                  2*N*dt: read, write (in place in torchvision)
//   residual add          3*N*dt: two reads, one write
//   maxpool               N*dt read + N_out*dt written + 8*N_out int64 indices
//   avgpool               N*dt read + b*C*dt written
// with flops per element from flops_per_element (maxpool per output element).
//
// Saved for backward (bytes), each tensor once, as PyTorch stores it: each
// BatchNorm its input (N*dt, the conv output) plus its fp32 save_mean and
// save_invstd (2*4*C); each ReLU its output (N*dt): torchvision's ReLUs are in
// place, so the BN output they overwrite is not kept separately; a conv its
// input only when no other op saves that tensor (the stem conv's image and
// the first block's maxpool output, which the downsample branch shares); the
// other convs and maxpool read ReLU outputs already saved, so maxpool adds
// only its int64 indices (8*N_out); the residual add and avgpool nothing
// (their backward needs only shapes); fc its input (b*2048*dt); the loss its
// log-softmax output (b*classes*dt).
#include "builders.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <utility>

namespace dtsim::models {
namespace {

// Activations of one image batch in NCHW: b x c x hw x hw.
struct Shape {
    std::int64_t c = 0;
    std::int64_t hw = 0;
};

std::int64_t out_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
    return (in + 2 * pad - kernel) / stride + 1;
}

class ResNetBuilder {
public:
    ResNetBuilder(Workload& w, std::int64_t b, DType dtype) : w_(w), b_(b), dtype_(dtype), dt_(dtype_bytes(dtype)) {}

    std::int64_t elements(Shape s) const { return b_ * s.c * s.hw * s.hw; }

    // A bias-free Conv2d layer `name`, returns its output shape.
    // `saves_input`: false when the input tensor is already saved by another op
    // (a ReLU output, or an input shared with the downsample branch).
    Shape conv(const std::string& name, int block, Shape in, std::int64_t c_out, std::int64_t kernel,
               std::int64_t stride, std::int64_t pad, bool saves_input, bool with_input_grad = true) {
        const Shape out{c_out, out_size(in.hw, kernel, stride, pad)};
        LayerBuilder lb(name, block, dtype_);
        lb.param(name + ".weight", {c_out, in.c, kernel, kernel}, index_++);
        lb.gemm("conv", b_ * out.hw * out.hw, c_out, in.c * kernel * kernel, 1, with_input_grad);
        if (saves_input) lb.save(elements(in) * dt_);
        w_.layers.push_back(std::move(lb).finish());
        return out;
    }

    // A BatchNorm2d layer `name`, optionally followed by an in-place ReLU.
    void batch_norm(const std::string& name, int block, Shape in, bool relu) {
        namespace fpe = flops_per_element;
        const std::int64_t n = elements(in);
        LayerBuilder lb(name, block, dtype_);
        lb.param(name + ".weight", {in.c}, index_++);
        lb.param(name + ".bias", {in.c}, index_++);
        lb.elementwise("bn", 3 * n * dt_, fpe::batch_norm * static_cast<double>(n));
        lb.save(n * dt_ + 2 * 4 * in.c);  // input; save_mean, save_invstd (fp32)
        if (relu) {
            lb.elementwise("relu", 2 * n * dt_, fpe::relu * static_cast<double>(n));
            lb.save(n * dt_);
        }
        Layer layer = std::move(lb).finish();
        layer.buffer_bytes = 2 * in.c * 4 + 8;  // running_mean, running_var (fp32); num_batches_tracked (int64)
        w_.layers.push_back(std::move(layer));
    }

    Workload& w_;
    std::int64_t b_;
    DType dtype_;
    std::int64_t dt_;
    int index_ = 0;  // next model.parameters() position
};

}  // namespace

Workload build_resnet(const std::string& name, const ResNetConfig& c, std::int64_t micro_batch,
                      DType activation_dtype) {
    DTSIM_ASSERT(c.blocks.size() == 4 && c.image_size >= 32 && c.classes >= 1, "malformed ResNet config " + name);
    Workload w = empty_workload(name, micro_batch, 1, activation_dtype, AttentionImpl::flash);
    w.block_class = "torchvision.models.resnet.Bottleneck";
    ResNetBuilder rb(w, micro_batch, activation_dtype);
    const std::int64_t b = micro_batch;
    const std::int64_t dt = dtype_bytes(activation_dtype);
    const DType dtype = activation_dtype;
    namespace fpe = flops_per_element;
    constexpr std::int64_t expansion = 4;

    // Stem.
    Shape x = rb.conv("conv1", -1, {3, c.image_size}, 64, 7, 2, 3, /*saves_input=*/true,
                      /*with_input_grad=*/false);
    rb.batch_norm("bn1", -1, x, /*relu=*/true);
    {
        const Shape out{x.c, out_size(x.hw, 3, 2, 1)};
        const std::int64_t n_in = rb.elements(x);
        const std::int64_t n_out = rb.elements(out);
        LayerBuilder lb("maxpool", -1, dtype);
        lb.elementwise("maxpool", (n_in + n_out) * dt + 8 * n_out, fpe::max_pool * static_cast<double>(n_out));
        lb.save(8 * n_out);  // argmax indices (int64); its input is bn1's saved ReLU output
        w.layers.push_back(std::move(lb).finish());
        x = out;
    }

    // Bottleneck stages layer1..layer4.
    int block = 0;
    for (std::size_t stage = 0; stage < c.blocks.size(); ++stage) {
        const std::int64_t planes = std::int64_t{64} << stage;
        const std::int64_t stride = stage == 0 ? 1 : 2;
        for (std::int64_t j = 0; j < c.blocks[stage]; ++j, ++block) {
            const std::string p = fmt::format("layer{}.{}.", stage + 1, j);
            const std::int64_t s = j == 0 ? stride : 1;
            const Shape in = x;
            // Only the first block's input (the maxpool output) is not already saved as a ReLU output.
            Shape y = rb.conv(p + "conv1", block, in, planes, 1, 1, 0, /*saves_input=*/block == 0);
            rb.batch_norm(p + "bn1", block, y, true);
            y = rb.conv(p + "conv2", block, y, planes, 3, s, 1, false);
            rb.batch_norm(p + "bn2", block, y, true);
            y = rb.conv(p + "conv3", block, y, planes * expansion, 1, 1, 0, false);
            rb.batch_norm(p + "bn3", block, y, false);
            if (j == 0) {  // in.c != planes * expansion or stride != 1 on every first block
                const Shape ds = rb.conv(p + "downsample.0", block, in, planes * expansion, 1, s, 0, false);
                rb.batch_norm(p + "downsample.1", block, ds, false);
            }
            {
                const std::int64_t n = rb.elements(y);
                LayerBuilder lb(p + "add", block, dtype);  // out += identity; relu(out)
                lb.elementwise("residual", 3 * n * dt, fpe::add * static_cast<double>(n));
                lb.elementwise("relu", 2 * n * dt, fpe::relu * static_cast<double>(n));
                lb.save(n * dt);  // the ReLU output
                w.layers.push_back(std::move(lb).finish());
            }
            x = y;
        }
    }

    // Head.
    {
        const std::int64_t n_in = rb.elements(x);
        LayerBuilder lb("avgpool", -1, dtype);
        lb.elementwise("avgpool", (n_in + b * x.c) * dt, fpe::avg_pool * static_cast<double>(n_in));
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("fc", -1, dtype);
        lb.param("fc.weight", {c.classes, x.c}, rb.index_++);
        lb.param("fc.bias", {c.classes}, rb.index_++);
        lb.linear("fc", b, c.classes, x.c);
        lb.save(b * x.c * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    {
        LayerBuilder lb("loss", -1, dtype);
        add_loss(lb, "cross_entropy", b * c.classes, fpe::cross_entropy);
        lb.save(b * c.classes * dt);
        w.layers.push_back(std::move(lb).finish());
    }
    return w;
}

}  // namespace dtsim::models
