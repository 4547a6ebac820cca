// Timing helpers shared by every microbenchmark: warm-up, repeats until a time
// budget; median, mean and spread kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::profiler {

struct Measurement {
    double median_us = 0;
    // What the calibration prices with: a step sums many tasks, so it pays this
    // machine's occasional stalls (preemptions, page faults) at their average
    // rate, which the median leaves out.
    double mean_us = 0;
    double min_us = 0;
    double max_us = 0;
    double spread = 0;  // (p90 - p10) / median
    int samples = 0;
};

struct RepeatPolicy {
    int warmup = 2;
    int min_samples = 5;
    int max_samples = 200;
    double budget_s = 0.2;  // stop once min_samples are taken and this much time has passed
    // A sample repeats the work until it has run this long and keeps the mean
    // of the calls: only long samples take in occasional stalls at their rate
    // and, where ranks share cores, a rank's fair share of time slices
    // (turns of several milliseconds).
    double min_sample_us = 0;
};

// One warm-up and one sample of `policy`'s length: a phase of a benchmark
// that alternates rounds, each round's figures taken close together.
inline RepeatPolicy single_sample(RepeatPolicy policy) {
    policy.warmup = 1;
    policy.min_samples = policy.max_samples = 1;
    policy.budget_s = 0;
    return policy;
}

// The policy in words, as a calibration's provenance records it
// ("sampling"): what each of its figures is the mean of.
std::string describe(const RepeatPolicy& policy);

// Times `run` (which returns its own duration in microseconds, so that MPI
// benchmarks can report the slowest rank) under the policy.
Measurement measure(const RepeatPolicy& policy, const std::function<double()>& run);

// The same, reading the wall clock (microseconds from any origin) through
// `now_us`: tests drive the sample lengths with a clock of their own, so that
// a loaded machine cannot change which calls make up a sample.
Measurement measure(const RepeatPolicy& policy, const std::function<double()>& run,
                    const std::function<double()>& now_us);

// Summarises raw samples in microseconds.
Measurement summarize(std::vector<double> samples_us);

// Microseconds since `start` on the steady clock: what every benchmark times with.
inline double elapsed_us(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// Reports progress of long work: what is being measured and the fraction done.
using ProgressFn = std::function<void(std::string_view what, double fraction)>;

}  // namespace dtsim::profiler
