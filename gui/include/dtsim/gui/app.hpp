// The GUI's entry point for `dtsim gui`: a main window with a tab per view
// (timeline, what-if, compare, sweep), shown on screen or rendered to a PNG.
#pragma once

#include "dtsim/advisor/sweep.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"
#include "dtsim/sim/timeline.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::gui {

// A predicted and a measured step of one configuration (`dtsim validate --gui`).
struct ComparePair {
    std::string name;  // the tab's name, e.g. the strategy
    sim::Timeline predicted, measured;
    int measured_step = 0;  // the measured step shown first (0-based; validate skips the warm-up)
};

struct GuiOptions {
    std::vector<std::string> files;         // traces to open (read with traces::read_traces)
    std::optional<sim::Config> config;      // a configuration to simulate and open in the what-if
    calib::Calibration calibration;         // prices `config`
    std::string view;                       // timeline, whatif, compare, sweep or empty (the first there is)
    std::string screenshot;                 // render to this PNG and exit instead of showing a window
    int width_px = 1600, height_px = 900;
    // The time window to show, in ms from the first event (empty: all of it).
    std::optional<std::pair<double, double>> window_ms;
    std::string search;  // highlight spans whose names contain this
    std::string select;  // select (and centre) the first span whose name contains this, as Enter in the search would
    bool dark = false;
    // A sweep for the sweep view: run for `config` (--axis) or read from a
    // `dtsim sweep --format json` file. Its rows are simulated again for their
    // timelines when they carry their configurations.
    std::vector<advisor::SweepResult> sweep;
    bool sweep_has_configs = false;
    std::optional<std::size_t> sweep_recommended;  // the row `dtsim advise --format json` picked
    std::string sweep_title;
    // Predicted against measured, a compare tab each (the first is --view compare).
    std::vector<ComparePair> compares;
    // What-if changes applied after opening ("micro_batch=16"), as if made in the panel.
    std::vector<std::pair<std::string, std::string>> what_if_changes;
};

// Throws ConfigError where a window cannot open: no `screenshot` to render
// to and no display (DISPLAY, WAYLAND_DISPLAY or QT_QPA_PLATFORM). run_gui
// checks it; `validate --gui` checks it before measuring anything.
void check_can_open(const std::string& screenshot);

// Runs the application (or renders the screenshot); returns the exit code.
// Throws dtsim::Error for what the user can fix (unreadable trace, unknown view).
int run_gui(const GuiOptions& options);

}  // namespace dtsim::gui
