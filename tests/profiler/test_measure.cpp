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

namespace {

// Exactly three samples, each repeating its call for at least 5 ms, no warm-up.
RepeatPolicy three_5ms_samples() {
    RepeatPolicy p;
    p.warmup = 0;
    p.min_samples = 3;
    p.max_samples = 3;
    p.budget_s = 0;
    p.min_sample_us = 5000;
    return p;
}

}  // namespace

TEST_CASE("measure with min_sample_us averages calls over at least that much time") {
    // A clock of the test's own: each call takes exactly 1 ms, so every 5 ms
    // sample is 5 calls whatever the machine's load.
    const RepeatPolicy p = three_5ms_samples();
    double clock_us = 0;
    int calls = 0;
    const Measurement m = measure(
        p,
        [&] {
            ++calls;
            clock_us += 1000;
            return calls % 2 == 0 ? 1000.0 : 3000.0;  // what the call reports, whatever it took
        },
        [&] { return clock_us; });
    CHECK(m.samples == 3);
    CHECK(calls == 3 * 5);
    // Each sample is the mean of its calls' reports, not the last one:
    // 3000 1000 3000 1000 3000, then 1000 3000 1000 3000 1000, then as the first.
    CHECK(m.min_us == Approx((1000.0 + 3000 + 1000 + 3000 + 1000) / 5));
    CHECK(m.max_us == Approx((3000.0 + 1000 + 3000 + 1000 + 3000) / 5));
    CHECK(m.median_us == Approx(2200.0));
}

TEST_CASE("measure with min_sample_us on the wall clock runs each sample at least that long") {
    const RepeatPolicy p = three_5ms_samples();
    int calls = 0;
    const auto start = std::chrono::steady_clock::now();
    const Measurement m = measure(p, [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return 1.0;
    });
    const double elapsed_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    CHECK(m.samples == 3);
    CHECK(elapsed_us >= 3 * 5000);
    // A call sleeps at least 1 ms, so a sample stops by its fifth call; a
    // loaded machine can only make it stop sooner.
    CHECK(calls >= 3);
    CHECK(calls <= 3 * 5);
}
