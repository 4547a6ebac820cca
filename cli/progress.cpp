#include "progress.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>

namespace dtsim::cli {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(STDERR_FILENO) != 0) {}

ProgressBar::~ProgressBar() {
    if (enabled_ && tty_ && last_percent_ >= 0) std::fputc('\n', stderr);
}

void ProgressBar::update(std::string_view what, double fraction) {
    if (!enabled_) return;
    const int percent = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100.0);
    if (tty_) {
        if (percent == last_percent_ && what == last_phase_) return;
        constexpr int width = 30;
        const int filled = percent * width / 100;
        fmt::print(stderr, "\r[{}{}] {:3d}%  {:<48.48}", std::string(static_cast<std::size_t>(filled), '#'),
                   std::string(static_cast<std::size_t>(width - filled), '.'), percent, what);
        std::fflush(stderr);
    } else if (what != last_phase_) {
        // Logs get one line per phase, not a redrawn bar.
        fmt::print(stderr, "dtsim: {:3d}% {}\n", percent, what);
    }
    last_percent_ = percent;
    last_phase_ = std::string(what);
}

void ProgressBar::finish(std::string_view message) {
    if (!enabled_) return;
    if (tty_ && last_percent_ >= 0) std::fputc('\n', stderr);
    last_percent_ = -1;
    if (!message.empty()) fmt::print(stderr, "dtsim: {}\n", message);
}

}  // namespace dtsim::cli
