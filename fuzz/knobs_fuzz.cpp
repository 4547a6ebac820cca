// Fuzzes the `--set key=value` knob parser (sim/knobs.cpp) through the real
// strategies: the first byte picks a strategy, each further line is a
// `--set` argument. Knobs the parser accepts are read back with their typed
// getters and lowered into a Plan for a small MLP on 2 x 2 GPUs, so that a
// value the parser lets through but a strategy cannot take is found too.
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"
#include "fuzz_main.hpp"
#include "read_knobs.hpp"

#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    static const std::vector<std::string> names = dtsim::sim::strategies().names();
    dtsim::fuzz::expect_only_user_errors([&] {
        dtsim::sim::Config config;
        config.model = "mlp-2x64";
        config.topology = {.nodes = 2, .gpus_per_node = 2};
        config.micro_batch = 4;
        config.strategy = names[data[0] % names.size()];
        std::istringstream in(dtsim::fuzz::text_of(data + 1, size - 1));
        for (std::string kv; std::getline(in, kv);) {
            const auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) continue;  // the CLI refuses these before the parser
            config.knobs.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        }
        dtsim::fuzz::read_every_knob(config);
        (void)dtsim::sim::lower(dtsim::sim::build_workload(config), config);
    });
    return 0;
}
