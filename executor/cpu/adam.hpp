// torch.optim.Adam's step on real tensors (betas 0.9 and 0.999, eps 1e-8, no
// weight decay), in the passes the plan's optimizer task says torch runs:
// fused, one loop per tensor; foreach, each of the seven ops over every
// tensor, with the sqrt temporary held for all of them; or the for-loop, the
// seven ops tensor by tensor (sim::OptimizerImpl). Shared by the DDP and the
// sharded trainers, so their time and memory are what the plan prices.
#pragma once

#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::executor::cpu {

struct AdamTensor {
    std::span<float> param;
    std::span<const float> grad;
    std::span<float> exp_avg, exp_avg_sq;
};

// One step; `step` counts from 1 (bias corrections).
void adam_step(std::span<const AdamTensor> tensors, std::int64_t step, double lr, sim::OptimizerImpl impl);

}  // namespace dtsim::executor::cpu
