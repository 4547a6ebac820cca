// Timeline frame time: renders a TimelineView offscreen into a 1600x900 image
// while it fits, zooms around a point and pans, for 10k, 100k and 1M
// generated spans on 16 lanes (2 ranks x 8 streams), and prints the median
// and 99th percentile frame time. Target: a 1M-span trace stays interactive
// (p99 well under 16 ms a frame), which the level of detail (sub-pixel spans
// merged per lane, found by binary search) is for.
//   QT_QPA_PLATFORM=offscreen build/release/bench/gui_frame
#include "dtsim/gui/timeline_index.hpp"
#include "dtsim/gui/timeline_view.hpp"

#include <QApplication>
#include <QImage>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

#include <time.h>
#include <vector>

namespace {

using dtsim::traces::SpanKind;
using dtsim::traces::TraceModel;

// `events` spans spread over 16 lanes: back-to-back kernels of 1-40 us with
// small gaps on compute lanes, longer collectives with longer gaps on comm lanes.
std::shared_ptr<const TraceModel> generate(std::size_t events) {
    auto model = std::make_shared<TraceModel>();
    TraceModel& m = *model;
    m.strings = {"gemm", "compute", "allreduce", "collective", "memcpy", "copy"};
    constexpr int kRanks = 2, kStreams = 8;
    for (int r = 0; r < kRanks; ++r) {
        dtsim::traces::RankInfo info;
        info.rank = r;
        m.ranks.push_back(info);
        for (int s = 0; s < kStreams; ++s) {
            dtsim::traces::Track t;
            t.rank = r;
            t.name = fmt::format("stream {}", s);
            t.sort_index = s;
            m.tracks.push_back(t);
        }
    }
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<std::int64_t> dur(1'000, 40'000), gap(0, 2'000);
    std::vector<std::int64_t> clock(m.tracks.size(), 0);
    m.spans.reserve(events);
    for (std::size_t i = 0; i < events; ++i) {
        const std::size_t track = i % m.tracks.size();
        const int kind = static_cast<int>(track % 3);  // compute, communication, memory
        dtsim::traces::Span s;
        s.track = static_cast<std::int32_t>(track);
        s.name = kind * 2;
        s.category = kind * 2 + 1;
        s.kind = kind == 0 ? SpanKind::compute : kind == 1 ? SpanKind::communication : SpanKind::memory;
        s.start_ns = clock[track] + gap(rng) * (kind == 0 ? 1 : 8);
        s.dur_ns = dur(rng) * (kind == 1 ? 3 : 1);
        clock[track] = s.start_ns + s.dur_ns;
        m.spans.push_back(s);
    }
    return model;
}

// CPU time of this thread: on a shared machine the wall clock also counts
// the time other processes hold the core.
double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    fmt::print(
        "| spans | index build (ms) | frames | median frame, wall (ms) | p99 frame, wall (ms) | median frame, CPU (ms) "
        "| p99 frame, CPU (ms) |\n");
    fmt::print("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (std::size_t events : {std::size_t{10'000}, std::size_t{100'000}, std::size_t{1'000'000}}) {
        const auto model = generate(events);
        const auto t_index = std::chrono::steady_clock::now();
        auto index = std::make_shared<dtsim::gui::TimelineIndex>(model);
        const double index_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_index).count();
        dtsim::gui::TimelineView view;
        view.resize(1600, 900);
        view.set_index(index);
        QImage image(view.size(), QImage::Format_ARGB32_Premultiplied);
        std::vector<double> frame_ms, frame_cpu_ms;
        const auto frame = [&] {
            const auto t0 = std::chrono::steady_clock::now();
            const double cpu0 = thread_cpu_ms();
            view.render(&image);
            frame_cpu_ms.push_back(thread_cpu_ms() - cpu0);
            frame_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        };
        // The sequence a user makes: look at all of it, zoom into a point in
        // steps, pan across, zoom back out; repeated.
        for (int round = 0; round < 3; ++round) {
            view.fit_all();
            frame();
            for (int z = 0; z < 40; ++z) {
                view.zoom_at(1.25, 600);
                frame();
            }
            for (int p = 0; p < 60; ++p) {
                view.pan_px(-40);
                frame();
            }
            for (int z = 0; z < 40; ++z) {
                view.zoom_at(1 / 1.25, 800);
                frame();
            }
        }
        fmt::print("| {} | {:.1f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", events, index_ms, frame_ms.size(),
                   percentile(frame_ms, 0.5), percentile(frame_ms, 0.99), percentile(frame_cpu_ms, 0.5),
                   percentile(frame_cpu_ms, 0.99));
    }
    return 0;
}
