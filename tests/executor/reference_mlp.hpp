// A plain reference for train mode: the MLP of models/mlp.cpp trained by one
// process on the whole global batch with straightforward loops (double
// accumulation), sharing only the executor's initial parameters and batch.
#pragma once

#include "dtsim/executor/execute.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

namespace dtsim::test {

struct ReferenceRun {
    std::vector<std::vector<float>> params;
    std::vector<double> loss;  // per step, before the update
};

inline ReferenceRun reference_train(const models::Workload& w, std::int64_t rows, int steps, double lr, bool adam,
                                    std::uint64_t seed) {
    const auto shape = executor::mlp_shape(w);
    const std::size_t L = static_cast<std::size_t>(shape.layers);
    const std::size_t W = static_cast<std::size_t>(shape.width);
    const std::size_t R = static_cast<std::size_t>(rows);
    const auto batch = executor::synthetic_batch(rows, shape.width, seed);
    ReferenceRun run;
    run.params = executor::initial_parameters(w, seed);
    auto& p = run.params;
    std::vector<std::vector<double>> m(p.size()), v(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
        m[i].assign(p[i].size(), 0.0);
        v[i].assign(p[i].size(), 0.0);
    }
    for (int step = 1; step <= steps; ++step) {
        // Forward: acts[l] is the input of Linear l, acts[L] the prediction.
        std::vector<std::vector<double>> acts(L + 1, std::vector<double>(R * W, 0.0));
        for (std::size_t i = 0; i < R * W; ++i) acts[0][i] = batch.inputs[i];
        for (std::size_t l = 0; l < L; ++l)
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t o = 0; o < W; ++o) {
                    double z = p[2 * l + 1][o];
                    for (std::size_t in = 0; in < W; ++in) z += acts[l][r * W + in] * p[2 * l][o * W + in];
                    acts[l + 1][r * W + o] = (l + 1 < L && z < 0) ? 0.0 : z;
                }
        double loss = 0;
        std::vector<double> dy(R * W);
        for (std::size_t i = 0; i < R * W; ++i) {
            const double d = acts[L][i] - batch.targets[i];
            loss += d * d;
            dy[i] = 2.0 * d / static_cast<double>(R * W);
        }
        run.loss.push_back(loss / static_cast<double>(R * W));
        // Backward.
        std::vector<std::vector<double>> grads(p.size());
        for (std::size_t l = L; l-- > 0;) {
            if (l + 1 < L)
                for (std::size_t i = 0; i < R * W; ++i)
                    if (acts[l + 1][i] <= 0) dy[i] = 0;
            auto& gw = grads[2 * l];
            auto& gb = grads[2 * l + 1];
            gw.assign(W * W, 0.0);
            gb.assign(W, 0.0);
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t o = 0; o < W; ++o) {
                    gb[o] += dy[r * W + o];
                    for (std::size_t in = 0; in < W; ++in) gw[o * W + in] += dy[r * W + o] * acts[l][r * W + in];
                }
            std::vector<double> dx(R * W, 0.0);
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t in = 0; in < W; ++in)
                    for (std::size_t o = 0; o < W; ++o) dx[r * W + in] += dy[r * W + o] * p[2 * l][o * W + in];
            dy = dx;
        }
        // Optimizer (torch.optim.SGD / Adam defaults).
        for (std::size_t i = 0; i < p.size(); ++i)
            for (std::size_t j = 0; j < p[i].size(); ++j) {
                const double g = grads[i][j];
                if (!adam) {
                    p[i][j] = static_cast<float>(p[i][j] - lr * g);
                    continue;
                }
                m[i][j] = 0.9 * m[i][j] + 0.1 * g;
                v[i][j] = 0.999 * v[i][j] + 0.001 * g * g;
                const double mh = m[i][j] / (1 - std::pow(0.9, step));
                const double vh = v[i][j] / (1 - std::pow(0.999, step));
                p[i][j] = static_cast<float>(p[i][j] - lr * mh / (std::sqrt(vh) + 1e-8));
            }
    }
    return run;
}

// Largest |a - b| over a tensor, relative to the tensor's largest |b|.
// How far trained parameters may be from the reference (max-norm, relative).
// The executor and the reference sum the same products in different orders
// (OpenBLAS's GEMM kernels, chosen per CPU, against the reference's loops), so
// gradients differ in their last bits. SGD passes that on unchanged: 1e-5.
// Adam divides each gradient by its running RMS, so an element whose gradient
// is near zero moves by up to lr per step whatever its bits; measured 1.7e-5
// after 5 steps at lr 1e-3 with OpenBLAS's Zen kernels on an AMD EPYC (it was
// below 1e-5 with the Haswell kernels), so Adam gets 5e-5.
inline double parameter_tolerance(bool adam) {
    return adam ? 5e-5 : 1e-5;
}

inline double max_relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
        diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::abs(double(b[i])));
    }
    return a.size() != b.size() ? 1e30 : diff / std::max(scale, 1e-30);
}

}  // namespace dtsim::test
