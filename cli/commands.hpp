// The dtsim subcommands. Each adds itself to the app; main() runs the chosen one.
#pragma once

#include "dtsim/sim/timeline.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dtsim::cli {

void add_simulate_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_hardware_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_execute_command(CLI::App& app);
void add_validate_command(CLI::App& app);
void add_sweep_command(CLI::App&);
void add_advise_command(CLI::App&);
void add_scale_command(CLI::App&);
void add_import_command(CLI::App&);
void add_gui_command(CLI::App&);  // gui_command.cpp, or gui_command_unavailable.cpp without Qt

// `validate --gui`: a compare tab per configuration, predicted above measured.
struct ValidationForGui {
    std::string name;  // the strategy
    sim::Timeline predicted, measured;
};
// Throws ConfigError, before any work, where the GUI cannot open: no Qt in
// this build, or no display and no `screenshot` file to render to.
void check_gui_can_open(const std::string& screenshot);
// Opens the window (or renders it to `screenshot` and returns).
void show_validation_gui(std::vector<ValidationForGui> validations, const std::string& screenshot);

}  // namespace dtsim::cli
