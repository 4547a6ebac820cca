// Fuzzes the sweep spec (advisor/search_space.cpp): `sweep --space file.json`
// when the input starts with '{', else one `--axis key=v1,v2` per line. A
// space that parses is enumerated over a 2 x 8 GPU base configuration.
#include "dtsim/advisor/search_space.hpp"
#include "fuzz_main.hpp"

#include <sstream>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    dtsim::fuzz::expect_only_user_errors([&] {
        const std::string text = dtsim::fuzz::text_of(data, size);
        dtsim::advisor::SearchSpace space;
        if (!text.empty() && text.front() == '{') {
            space = dtsim::advisor::parse_space_json(text, "space.json");
        } else {
            std::vector<std::string> specs;
            std::istringstream in(text);
            for (std::string line; std::getline(in, line);) specs.push_back(line);
            space = dtsim::advisor::parse_axes(specs);
        }
        dtsim::sim::Config base;
        base.model = "gpt2";
        base.topology = {.nodes = 2, .gpus_per_node = 8};
        // Enumerating is linear in the space's size, which parse bounds at a
        // million; keep each fuzz input fast.
        std::size_t total = 1;
        for (const auto& axis : space.axes) total *= axis.values.size();
        if (total > 4096) return;
        const auto candidates = dtsim::advisor::enumerate(space, base);
        for (const auto& c : candidates) (void)c.label();
    });
    return 0;
}
