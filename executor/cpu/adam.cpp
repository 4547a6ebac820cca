#include "adam.hpp"

#include <cmath>
#include <cstddef>

namespace dtsim::executor::cpu {

namespace {

constexpr float kBeta1 = 0.9f, kBeta2 = 0.999f, kEps = 1e-8f;

// torch/optim/adam.py, _single_tensor_adam and _multi_tensor_adam: each
// function is one of their ops, over one tensor.
void lerp(std::span<float> m, std::span<const float> g) {  // exp_avg.lerp_(grad, 1 - beta1)
    for (std::size_t i = 0; i < m.size(); ++i) m[i] += (1 - kBeta1) * (g[i] - m[i]);
}
void scale(std::span<float> v, float by) {  // exp_avg_sq.mul_(beta2)
    for (float& x : v) x *= by;
}
void divide(std::span<float> x, float by) {  // _foreach_div_ by a scalar
    for (float& e : x) e /= by;
}
void addcmul(std::span<float> v, std::span<const float> g) {  // exp_avg_sq.addcmul_(grad, grad, 1 - beta2)
    for (std::size_t i = 0; i < v.size(); ++i) v[i] += (1 - kBeta2) * g[i] * g[i];
}
void sqrt_into(std::span<float> out, std::span<const float> v) {  // exp_avg_sq.sqrt()
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = std::sqrt(v[i]);
}
void divide_into(std::span<float> out, std::span<const float> in, float by) {  // out-of-place `/`
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i] / by;
}
void add_scalar(std::span<float> x, float by) {  // .add_(eps)
    for (float& e : x) e += by;
}
void addcdiv(std::span<float> p, std::span<const float> m, std::span<const float> denom, float value) {
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += value * m[i] / denom[i];  // param.addcdiv_(...)
}

}  // namespace

void adam_step(std::span<const AdamTensor> tensors, std::int64_t step, double lr, sim::OptimizerImpl impl) {
    const double bias1 = 1.0 - std::pow(0.9, static_cast<double>(step));
    const double bias2 = 1.0 - std::pow(0.999, static_cast<double>(step));
    const auto step_size = static_cast<float>(lr / bias1);
    const auto bias2_sqrt = static_cast<float>(std::sqrt(bias2));
    switch (impl) {
        case sim::OptimizerImpl::fused:
            // One pass per tensor over all four of its buffers.
            for (const AdamTensor& t : tensors)
                for (std::size_t i = 0; i < t.param.size(); ++i) {
                    const float g = t.grad[i];
                    float& m = t.exp_avg[i];
                    float& v = t.exp_avg_sq[i];
                    m += (1 - kBeta1) * (g - m);
                    v = kBeta2 * v + (1 - kBeta2) * g * g;
                    t.param[i] -= step_size * m / (std::sqrt(v) / bias2_sqrt + kEps);
                }
            return;
        case sim::OptimizerImpl::foreach: {
            // Each op over every tensor before the next op; _foreach_sqrt returns
            // a new list: one temporary the size of every parameter.
            std::vector<std::vector<float>> denom(tensors.size());
            for (const AdamTensor& t : tensors) lerp(t.exp_avg, t.grad);
            for (const AdamTensor& t : tensors) scale(t.exp_avg_sq, kBeta2);
            for (const AdamTensor& t : tensors) addcmul(t.exp_avg_sq, t.grad);
            for (std::size_t k = 0; k < tensors.size(); ++k) {
                denom[k].resize(tensors[k].exp_avg_sq.size());
                sqrt_into(denom[k], tensors[k].exp_avg_sq);
            }
            for (auto& d : denom) divide(d, bias2_sqrt);  // bias_correction2_sqrt
            for (auto& d : denom) add_scalar(d, kEps);
            for (std::size_t k = 0; k < tensors.size(); ++k)
                addcdiv(tensors[k].param, tensors[k].exp_avg, denom[k], -step_size);
            return;
        }
        case sim::OptimizerImpl::for_loop: {
            // Tensor by tensor; `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`
            // holds the sqrt and the quotient at once.
            std::vector<float> root, denom;
            for (const AdamTensor& t : tensors) {
                lerp(t.exp_avg, t.grad);
                scale(t.exp_avg_sq, kBeta2);
                addcmul(t.exp_avg_sq, t.grad);
                root.resize(t.exp_avg_sq.size());
                denom.resize(t.exp_avg_sq.size());
                sqrt_into(root, t.exp_avg_sq);
                divide_into(denom, root, bias2_sqrt);
                add_scalar(denom, kEps);
                addcdiv(t.param, t.exp_avg, denom, -step_size);
            }
            return;
        }
    }
}

}  // namespace dtsim::executor::cpu
