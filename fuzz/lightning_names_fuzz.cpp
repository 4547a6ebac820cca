// Fuzzes Lightning strategy-name resolution (sim/lightning_names.cpp): the
// first line is the name as a user writes it, the other lines `--set` knobs.
// A resolved name must be a registered strategy whose knobs it accepts.
#include "dtsim/common/registry.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/lightning_names.hpp"
#include "dtsim/sim/strategy.hpp"
#include "fuzz_main.hpp"

#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    dtsim::fuzz::expect_only_user_errors([&] {
        std::istringstream in(dtsim::fuzz::text_of(data, size));
        dtsim::sim::Config config;
        std::getline(in, config.strategy);
        for (std::string line; std::getline(in, line);) {
            const auto eq = line.find('=');
            if (eq == std::string::npos || eq == 0) continue;
            config.knobs.emplace_back(line.substr(0, eq), line.substr(eq + 1));
        }
        const std::string written = config.strategy;
        const auto launch = dtsim::sim::resolve_lightning_name(config);
        const auto* entry = dtsim::sim::strategies().find_or_null(config.strategy);
        if (launch && !entry) __builtin_trap();  // a Lightning name must map onto a registered strategy
        if (!launch && config.strategy != written) __builtin_trap();
        if (!entry) return;
        const dtsim::sim::Knobs knobs(config.strategy, entry->value.knobs, config.knobs);
        (void)knobs;
    });
    return 0;
}
