// Train mode: the MLP of models/mlp.cpp with real tensors. Linear i computes
// y = x W_i^T + b_i (W_i is [out, in] as torch stores it), ReLU after every
// Linear but the last, MSE loss (mean over the micro-batch's elements) against
// fixed synthetic targets. Each micro-step's loss is divided by grad_accum and
// DDP averages over ranks, so the reduced gradient is the global batch's.
#include "adam.hpp"
#include "cpu_backend.hpp"
#include "mlp_sharding.hpp"

#include "dtsim/common/error.hpp"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace dtsim::executor {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1), a pure function of (seed, stream, index).
float uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    const std::uint64_t h = splitmix(splitmix(seed * 0x100000001b3ULL + stream) ^ index);
    return static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

}  // namespace

MlpShape mlp_shape(const models::Workload& w) {
    const auto fail = [&](const std::string& why) {
        return ConfigError(fmt::format(
            "train mode runs MLP models (mlp-<layers>x<width>) only; model '{}' {}. Use --mode replay.", w.model, why));
    };
    if (w.layers.size() < 2 || w.layers.back().name != "loss" || !w.layers.back().params.empty())
        throw fail("does not end in an MSE loss layer");
    MlpShape s;
    s.layers = static_cast<int>(w.layers.size()) - 1;
    for (int i = 0; i < s.layers; ++i) {
        const auto& l = w.layers[static_cast<std::size_t>(i)];
        if (l.params.size() != 2 || l.params[0].shape.size() != 2 || l.params[1].shape.size() != 1)
            throw fail(fmt::format("has layer '{}' that is not a Linear with bias", l.name));
        const std::int64_t out = l.params[0].shape[0], in = l.params[0].shape[1];
        if (i == 0) s.width = in;
        if (in != s.width || out != s.width || l.params[1].shape[0] != out)
            throw fail(fmt::format("has layer '{}' that is not Linear({}, {})", l.name, s.width, s.width));
        if (l.params[0].index != 2 * i || l.params[1].index != 2 * i + 1)
            throw fail("numbers its parameters unlike layers.<i>.weight, layers.<i>.bias");
    }
    return s;
}

Batch synthetic_batch(std::int64_t rows, std::int64_t width, std::uint64_t seed) {
    Batch b;
    const auto n = static_cast<std::size_t>(rows * width);
    b.inputs.resize(n);
    b.targets.resize(n);
    for (std::size_t i = 0; i < n; ++i) b.inputs[i] = uniform(seed, 1000001, i);
    // A smooth target the MLP can fit: a mix of each input and its neighbour.
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < width; ++j) {
            const float x0 = b.inputs[static_cast<std::size_t>(r * width + j)];
            const float x1 = b.inputs[static_cast<std::size_t>(r * width + (j + 1) % width)];
            b.targets[static_cast<std::size_t>(r * width + j)] = 0.5f * std::sin(1.5f * x0 - 0.7f * x1);
        }
    return b;
}

std::vector<std::vector<float>> initial_parameters(const models::Workload& w, std::uint64_t seed) {
    std::vector<std::vector<float>> out;
    for (const auto& l : w.layers)
        for (const auto& p : l.params) {
            if (p.index >= static_cast<int>(out.size())) out.resize(static_cast<std::size_t>(p.index) + 1);
            // torch.nn.Linear: U(-1/sqrt(in_features), 1/sqrt(in_features)) for weight and bias.
            const std::int64_t fan_in = l.params.front().shape.size() == 2 ? l.params.front().shape[1] : 1;
            const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
            auto& v = out[static_cast<std::size_t>(p.index)];
            v.resize(static_cast<std::size_t>(p.numel()));
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] = bound * uniform(seed, static_cast<std::uint64_t>(p.index), i);
        }
    return out;
}

namespace cpu {

MlpTrainer::MlpTrainer(const models::Workload& w, const sim::Config& config, const ExecOptions& options, int rank,
                       int world, std::size_t buckets)
    : shape_(mlp_shape(w)),
      micro_batch_(w.micro_batch),
      world_(world),
      rank_(rank),
      accum_(config.grad_accum),
      adam_(config.optimizer == sim::OptimizerKind::adam),
      lr_(options.learning_rate),
      fresh_gradients_(options.fresh_gradients) {
    batch_ = synthetic_batch(micro_batch_ * world_ * accum_, shape_.width, options.seed);
    params_ = initial_parameters(w, options.seed);
    grads_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) grads_[i].assign(params_[i].size(), 0.0f);
    if (adam_) {
        adam_m_.resize(params_.size());
        for (std::size_t i = 0; i < params_.size(); ++i) adam_m_[i].assign(params_[i].size(), 0.0f);
        adam_v_ = adam_m_;
    }
    const auto act = static_cast<std::size_t>(micro_batch_ * shape_.width);
    acts_.assign(static_cast<std::size_t>(shape_.layers) + 1, std::vector<float>(act, 0.0f));
    grad_out_.assign(act, 0.0f);
    grad_tmp_.assign(act, 0.0f);
    bucket_data_.resize(buckets);
    grad_views_.resize(params_.size());
}

void MlpTrainer::forward(int micro_step, int layer) {
    if (layer == shape_.layers)
        forward_with(micro_step, layer, {}, {});
    else
        forward_with(micro_step, layer, params_[2 * static_cast<std::size_t>(layer)],
                     params_[2 * static_cast<std::size_t>(layer) + 1]);
}

void MlpTrainer::forward_with(int micro_step, int layer, std::span<const float> weight, std::span<const float> bias) {
    const std::int64_t b = micro_batch_, W = shape_.width;
    const auto n = static_cast<std::size_t>(b * W);
    if (layer == 0) {
        const auto row = static_cast<std::size_t>((static_cast<std::int64_t>(micro_step) * world_ + rank_) * b * W);
        std::copy_n(batch_.inputs.begin() + static_cast<std::ptrdiff_t>(row), n, acts_[0].begin());
    }
    if (layer == shape_.layers) {  // the loss
        const auto row = static_cast<std::size_t>((static_cast<std::int64_t>(micro_step) * world_ + rank_) * b * W);
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const double d = double(acts_.back()[i]) - double(batch_.targets[row + i]);
            sum += d * d;
        }
        loss_ += sum / static_cast<double>(n) / accum_;
        return;
    }
    const auto li = static_cast<std::size_t>(layer);
    DTSIM_ASSERT(weight.size() == params_[2 * li].size() && bias.size() == params_[2 * li + 1].size(),
                 fmt::format("layer {} computes with its whole parameters", layer));
    auto& y = acts_[li + 1];
    for (std::int64_t r = 0; r < b; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * W);
    const auto bi = static_cast<blasint>(b), wi = static_cast<blasint>(W);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi, wi, wi, 1.0f, acts_[li].data(), wi, weight.data(), wi,
                1.0f, y.data(), wi);
    if (layer + 1 < shape_.layers)
        for (auto& v : y) v = std::max(v, 0.0f);
}

void MlpTrainer::backward(int micro_step, int layer) {
    backward_into(micro_step, layer,
                  layer == shape_.layers ? std::span<const float>() : params_[2 * static_cast<std::size_t>(layer)],
                  grads_);
}

// Accumulates the layer's parameter gradients into `grads` (by parameter
// index); `weight`: the layer's weight, as it computed with it.
void MlpTrainer::backward_into(int micro_step, int layer, std::span<const float> weight, std::vector<Gradient>& grads) {
    const std::int64_t b = micro_batch_, W = shape_.width;
    const auto n = static_cast<std::size_t>(b * W);
    if (layer == shape_.layers) {  // d(loss / accum) / d(prediction)
        const auto row = static_cast<std::size_t>((static_cast<std::int64_t>(micro_step) * world_ + rank_) * b * W);
        const float scale = 2.0f / static_cast<float>(n) / static_cast<float>(accum_);
        for (std::size_t i = 0; i < n; ++i) grad_out_[i] = scale * (acts_.back()[i] - batch_.targets[row + i]);
        return;
    }
    const auto li = static_cast<std::size_t>(layer);
    // Through the ReLU: its output is this layer's saved output.
    if (layer + 1 < shape_.layers)
        for (std::size_t i = 0; i < n; ++i)
            if (acts_[li + 1][i] <= 0.0f) grad_out_[i] = 0.0f;
    auto& dw = grads[2 * li];
    auto& db = grads[2 * li + 1];
    // A freed gradient (fresh_gradients) comes back as the GEMM's output, which
    // AccumulateGrad keeps as the first gradient: from the allocator, with
    // glibc's defaults new pages whose first touch is the GEMM's write.
    const bool fresh = dw.empty();
    if (fresh) dw.resize(params_[2 * li].size());
    if (db.empty()) db.assign(params_[2 * li + 1].size(), 0.0f);
    const auto bi = static_cast<blasint>(b), wi = static_cast<blasint>(W);
    // dW[out, in] (+)= dY^T[out, b] X[b, in]; db += column sums of dY.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, wi, wi, bi, 1.0f, grad_out_.data(), wi, acts_[li].data(), wi,
                fresh ? 0.0f : 1.0f, dw.data(), wi);
    for (std::int64_t r = 0; r < b; ++r)
        for (std::int64_t j = 0; j < W; ++j)
            db[static_cast<std::size_t>(j)] += grad_out_[static_cast<std::size_t>(r * W + j)];
    if (layer == 0) return;  // the input needs no gradient
    DTSIM_ASSERT(weight.size() == params_[2 * li].size(),
                 fmt::format("layer {} computes with its whole weight", layer));
    // dX[b, in] = dY[b, out] W[out, in]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi, wi, wi, 1.0f, grad_out_.data(), wi, weight.data(), wi,
                0.0f, grad_tmp_.data(), wi);
    std::swap(grad_out_, grad_tmp_);
}

void MlpTrainer::reduce_bucket(const sim::BucketInfo& bucket, runtime::Communicator& comm, bool keep,
                               runtime::Completion c) {
    auto& flat = bucket_data_[static_cast<std::size_t>(bucket.index)];
    std::size_t elements = 0;
    for (int p : bucket.params) elements += grads_[static_cast<std::size_t>(p)].size();
    if (flat.size() != elements) flat.resize(elements);  // the bucket's buffer, kept across steps as torch's
    // Reducer::mark_variable_ready_dense copies each gradient into the bucket
    // divided by the world size (mul_out), in one pass.
    const float inv = 1.0f / static_cast<float>(world_);
    float* into = flat.data();
    for (int p : bucket.params) {
        const auto& g = grads_[static_cast<std::size_t>(p)];
        into = std::transform(g.begin(), g.end(), into, [inv](float v) { return v * inv; });
    }
    comm.allreduce_sum_async(
        flat.data(), static_cast<std::int64_t>(elements),
        {std::move(c.started), [this, &bucket, keep, done = std::move(c.done)](std::exception_ptr e) {
             if (!e && !keep) view_buckets(bucket);
             if (done) done(e);
         }});
}

// Reducer::mark_variable_ready_dense under gradient_as_bucket_view: each
// gradient is a view of its bucket (`grad = bucket_view`), so the reduced
// values are read in place and finalize_backward copies nothing back.
void MlpTrainer::view_buckets(const sim::BucketInfo& bucket) {
    const auto& flat = bucket_data_[static_cast<std::size_t>(bucket.index)];
    std::size_t offset = 0;
    for (int p : bucket.params) {
        const std::size_t n = params_[static_cast<std::size_t>(p)].size();
        DTSIM_ASSERT(offset + n <= flat.size(), "bucket holds its gradients");
        grad_views_[static_cast<std::size_t>(p)] = std::span<const float>(flat).subspan(offset, n);
        offset += n;
    }
}

// finalize_backward without bucket views: each gradient gets its reduced slice of the bucket.
void MlpTrainer::copy_buckets_back(const std::vector<sim::BucketInfo>& buckets) {
    for (const auto& bucket : buckets) {
        view_buckets(bucket);
        for (int p : bucket.params) {
            auto& g = grads_[static_cast<std::size_t>(p)];
            const auto slice = std::exchange(grad_views_[static_cast<std::size_t>(p)], {});
            DTSIM_ASSERT(g.size() == slice.size(), "bucket holds its gradients");
            std::copy(slice.begin(), slice.end(), g.begin());
        }
    }
}

void MlpTrainer::optimizer_step(sim::OptimizerImpl impl) {
    if (!adam_) {
        const auto lr = static_cast<float>(lr_);
        for (std::size_t p = 0; p < params_.size(); ++p) {
            const std::span<const float> g = gradient(p);
            for (std::size_t i = 0; i < params_[p].size(); ++i) params_[p][i] -= lr * g[i];
        }
    } else {
        std::vector<AdamTensor> tensors;
        tensors.reserve(params_.size());
        for (std::size_t p = 0; p < params_.size(); ++p)
            tensors.push_back({params_[p], gradient(p), adam_m_[p], adam_v_[p]});
        adam_step(tensors, ++adam_t_, lr_, impl);
    }
    // zero_grad(set_to_none=True): the next step starts from zero gradients,
    // in memory it keeps, or (fresh_gradients) in memory it hands back, as torch.
    for (auto& v : grad_views_) v = {};
    for (auto& g : grads_) {
        if (fresh_gradients_)
            Gradient().swap(g);
        else
            std::fill(g.begin(), g.end(), 0.0f);
    }
}

double MlpTrainer::take_loss() {
    const double l = loss_;
    loss_ = 0;
    return l;
}

}  // namespace cpu
}  // namespace dtsim::executor
