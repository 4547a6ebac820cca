// For targets whose input ends as a Config: validate it, then read every knob
// the strategy declares through its typed getter, as the strategy would, so
// that a value the parser accepted but a getter cannot read is a crash
// (InternalError), not a silent pass.
#pragma once

#include "dtsim/sim/config.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/strategy.hpp"

namespace dtsim::fuzz {

inline void read_every_knob(const sim::Config& config) {
    config.validate();
    const auto& strategy = sim::strategies().find(config.strategy).value;
    const sim::Knobs knobs(config.strategy, strategy.knobs, config.knobs);
    for (const auto& spec : strategy.knobs) {
        if (!knobs.applies(spec.name)) continue;
        if (spec.type == sim::KnobType::number && knobs.text(spec.name) != "auto") (void)knobs.number(spec.name);
        if (spec.type == sim::KnobType::boolean) (void)knobs.boolean(spec.name);
    }
}

}  // namespace dtsim::fuzz
