#include "dtsim/profiler/measure.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dtsim::profiler {

Measurement summarize(std::vector<double> samples_us) {
    DTSIM_ASSERT(!samples_us.empty(), "a measurement needs at least one sample");
    std::sort(samples_us.begin(), samples_us.end());
    auto quantile = [&](double q) {
        const double pos = q * static_cast<double>(samples_us.size() - 1);
        const auto lo = static_cast<std::size_t>(std::floor(pos));
        const auto hi = std::min(lo + 1, samples_us.size() - 1);
        return samples_us[lo] + (pos - static_cast<double>(lo)) * (samples_us[hi] - samples_us[lo]);
    };
    Measurement m;
    m.samples = static_cast<int>(samples_us.size());
    m.median_us = quantile(0.5);
    double sum = 0;
    for (double s : samples_us) sum += s;
    m.mean_us = sum / static_cast<double>(samples_us.size());
    m.min_us = samples_us.front();
    m.max_us = samples_us.back();
    m.spread = m.median_us > 0 ? (quantile(0.9) - quantile(0.1)) / m.median_us : 0;
    return m;
}

std::string describe(const RepeatPolicy& p) {
    return fmt::format(
        "each figure the mean of {}-{} samples taken over at least {:g} s after {} warm-up run{}{} (the "
        "overlap factors: ratios of medians)",
        p.min_samples, p.max_samples, p.budget_s, p.warmup, p.warmup == 1 ? "" : "s",
        p.min_sample_us > 0
            ? fmt::format(", each sample repeating the work for at least {:g} ms", p.min_sample_us / 1e3)
            : std::string());
}

Measurement measure(const RepeatPolicy& policy, const std::function<double()>& run) {
    return measure(policy, run, [] {
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
    });
}

Measurement measure(const RepeatPolicy& policy, const std::function<double()>& run,
                    const std::function<double()>& now_us) {
    for (int i = 0; i < policy.warmup; ++i) run();
    std::vector<double> samples;
    const double start = now_us();
    // One sample: calls of `run` for at least min_sample_us of wall time, their
    // results averaged (run may report a per-call time of its own inner loop).
    auto sample = [&] {
        const double begin = now_us();
        double total = 0;
        int calls = 0;
        do {
            total += run();
            ++calls;
        } while (now_us() - begin < policy.min_sample_us);
        return total / calls;
    };
    const int max_samples = std::max(1, policy.max_samples);
    while (static_cast<int>(samples.size()) < max_samples) {
        samples.push_back(sample());
        const double elapsed_s = (now_us() - start) / 1e6;
        if (static_cast<int>(samples.size()) >= policy.min_samples && elapsed_s >= policy.budget_s) break;
    }
    return summarize(std::move(samples));
}

}  // namespace dtsim::profiler
