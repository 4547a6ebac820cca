#include "dtsim/sim/torch_optimizer.hpp"

#include "dtsim/common/error.hpp"

namespace dtsim::sim {

std::vector<KnobSpec> torch_optimizer_knobs() {
    return {
        {.name = "foreach",
         .type = KnobType::boolean,
         .default_value = "true",
         .description =
             "torch.optim's foreach step (its default on CUDA): each op over every tensor at once, 72 B per Adam "
             "parameter and one parameter-size temporary; false: the for-loop (its default on CPU), op by op per "
             "tensor"},
        {.name = "fused",
         .type = KnobType::boolean,
         .default_value = "false",
         .description = "torch.optim's fused=True: one kernel per chunk, 28 B per Adam parameter, no temporary"},
    };
}

OptimizerImpl torch_optimizer_impl(const Knobs& knobs) {
    if (knobs.boolean("fused")) {
        // torch/optim/optimizer.py: "`fused` and `foreach` cannot be `True` together."
        if (knobs.is_set("foreach") && knobs.boolean("foreach"))
            throw ConfigError(
                "--set fused=true and foreach=true: torch.optim refuses both (`fused` and `foreach` "
                "cannot be `True` together); give one");
        return OptimizerImpl::fused;
    }
    return knobs.boolean("foreach") ? OptimizerImpl::foreach : OptimizerImpl::for_loop;
}

}  // namespace dtsim::sim
