// measure(): repeats, the mean beside the median, and long samples made of
// several calls (RepeatPolicy::min_sample_us).
#include "dtsim/profiler/measure.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

using namespace dtsim::profiler;

TEST_CASE("summarize keeps the mean beside the median: a stall moves the mean only") {
    const Measurement m = summarize({1.0, 2.0, 2.0, 3.0, 12.0});
    CHECK(m.median_us == Approx(2.0));
    CHECK(m.mean_us == Approx(4.0));
    CHECK(m.min_us == Approx(1.0));
    CHECK(m.max_us == Approx(12.0));
    CHECK(m.samples == 5);
}

TEST_CASE("measure without min_sample_us takes one call per sample") {
    RepeatPolicy p;
    p.warmup = 1;
    p.min_samples = 4;
    p.max_samples = 4;
    p.budget_s = 0;
    int calls = 0;
    const Measurement m = measure(p, [&] { return static_cast<double>(++calls); });
    CHECK(calls == 5);  // 1 warm-up + 4 samples
    CHECK(m.samples == 4);
    CHECK(m.mean_us == Approx((2.0 + 3 + 4 + 5) / 4));
}

TEST_CASE("measure with min_sample_us averages calls over at least that much wall time") {
    RepeatPolicy p;
    p.warmup = 0;
    p.min_samples = 3;
    p.max_samples = 3;
    p.budget_s = 0;
    p.min_sample_us = 5000;
    int calls = 0;
    std::vector<double> reported;
    const auto start = std::chrono::steady_clock::now();
    const Measurement m = measure(p, [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        reported.push_back(calls % 2 == 0 ? 1000.0 : 3000.0);  // what the call reports, whatever it took
        return reported.back();
    });
    const double elapsed_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    CHECK(m.samples == 3);
    CHECK(elapsed_us >= 3 * 5000);
    CHECK(calls >= 3 * 2);  // each sample needed several 1 ms calls
    CHECK(calls <= 3 * 5);  // and stopped once 5 ms had passed
    // Each sample is the mean of its calls' reports, not the last one: the
    // samples' mean is the mean of all reports, up to the odd last sample.
    double sum = 0;
    for (double r : reported) sum += r;
    CHECK(m.mean_us == Approx(sum / static_cast<double>(reported.size())).epsilon(0.25));
    CHECK(m.min_us > 1000.0);  // no sample is a single call's 1000
    CHECK(m.max_us < 3000.0);  // nor a single call's 3000
}
