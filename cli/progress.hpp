// A progress bar on the terminal (stderr) for long work; plain lines when
// stderr is not a terminal, nothing on ranks other than 0.
#pragma once

#include <string>
#include <string_view>

namespace dtsim::cli {

class ProgressBar {
public:
    explicit ProgressBar(bool enabled);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // `fraction` of the whole job is done; `what` is being measured now.
    void update(std::string_view what, double fraction);
    void finish(std::string_view message);

private:
    bool enabled_;
    bool tty_;
    std::string last_phase_;
    int last_percent_ = -1;
};

}  // namespace dtsim::cli
