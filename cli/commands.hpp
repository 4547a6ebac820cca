// The dtsim subcommands. Each adds itself to the app; main() runs the chosen one.
#pragma once

#include <CLI/CLI.hpp>

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

}  // namespace dtsim::cli
