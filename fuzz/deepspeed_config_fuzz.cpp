// Fuzzes the DeepSpeed config reader (sim/deepspeed_config.cpp). A config it
// accepts must also give knobs the ZeRO strategy accepts and a Config that
// validates, or fail with a one-line dtsim::Error.
#include "dtsim/sim/deepspeed_config.hpp"
#include "dtsim/sim/knobs.hpp"
#include "dtsim/sim/strategy.hpp"
#include "fuzz_main.hpp"
#include "read_knobs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    dtsim::fuzz::expect_only_user_errors([&] {
        dtsim::sim::Config config;
        config.model = "gpt2";
        config.topology = {.nodes = 2, .gpus_per_node = 8};
        dtsim::sim::apply_deepspeed_config_text(dtsim::fuzz::text_of(data, size), "ds_config.json", config);
        dtsim::fuzz::read_every_knob(config);
    });
    return 0;
}
