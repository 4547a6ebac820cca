// Sweep speed: configurations simulated per second by advisor::run_sweep on one
// core. Target (issue 6): a 10,000-configuration sweep of llama2-7b on 64 GPUs
// (8 nodes x 8 h100-sxm) in under 10 s.
//   build/release/bench/sweep_speed [--repeat N]
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/common/host_memory.hpp"
#include "dtsim/profiler/presets.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> range(long first, long step, std::size_t n) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(std::to_string(first + step * static_cast<long>(i)));
    return out;
}

// 8 configurations per strategy setting (micro_batch x activation_checkpointing):
// ddp 100 x 2, fsdp 3 x 3 x 2 x 2, deepspeed 3 x 169 x 2 = 1,250 settings.
dtsim::advisor::SearchSpace space() {
    using dtsim::advisor::add_axis;
    dtsim::advisor::SearchSpace s;
    add_axis(s, {"strategy", {"ddp", "fsdp", "deepspeed"}});
    add_axis(s, {"micro_batch", {"1", "2", "4", "8"}});
    add_axis(s, {"activation_checkpointing", {"false", "true"}});
    add_axis(s, {"bucket_cap_mb", range(1, 1, 100)});
    add_axis(s, {"gradient_as_bucket_view", {"false", "true"}});
    add_axis(s, {"sharding_strategy", {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD"}});
    add_axis(s, {"backward_prefetch", {"BACKWARD_PRE", "BACKWARD_POST", "NONE"}});
    add_axis(s, {"forward_prefetch", {"false", "true"}});
    add_axis(s, {"limit_all_gathers", {"false", "true"}});
    add_axis(s, {"stage", {"1", "2", "3"}});
    add_axis(s, {"reduce_bucket_size", range(5'000'000, 5'000'000, 169)});
    add_axis(s, {"contiguous_gradients", {"false", "true"}});
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    dtsim::keep_freed_memory();  // as the dtsim command runs
    int repeat = 1;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--repeat") == 0) repeat = std::atoi(argv[i + 1]);
    dtsim::sim::Config base;
    base.model = "llama2-7b";
    base.topology = {8, 8};
    base.seq_len = 4096;
    base.precision = dtsim::sim::Precision::bf16_mixed;
    const auto cal = dtsim::calib::load_hardware("h100-sxm");
    for (int r = 0; r < repeat; ++r) {
        const auto t0 = Clock::now();
        const auto candidates = dtsim::advisor::enumerate(space(), base);
        const auto t1 = Clock::now();
        const auto results = dtsim::advisor::run_sweep(candidates, cal);
        const auto t2 = Clock::now();
        const std::string csv = dtsim::advisor::sweep_csv(results);
        const auto t3 = Clock::now();
        std::size_t simulated = 0;
        for (const auto& x : results) simulated += x.simulated;
        auto s = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
        const double total = s(t0, t3);
        fmt::print(
            "sweep_speed: llama2-7b, 8 x 8 h100-sxm, {} configurations ({} simulated), one core\n"
            "  enumerate {:.3f} s, simulate {:.3f} s, csv {:.3f} s; total {:.3f} s = {:.0f} configurations/s "
            "(target: 10,000 in < 10 s)\n",
            candidates.size(), simulated, s(t0, t1), s(t1, t2), s(t2, t3), total,
            static_cast<double>(candidates.size()) / total);
    }
    return 0;
}
