// `dtsim gui` in a build without Qt 6: says how to get it.
#include "commands.hpp"
#include "dtsim/common/error.hpp"

namespace dtsim::cli {
namespace {

[[noreturn]] void no_gui() {
    throw ConfigError(
        "this dtsim was built without Qt 6, so it has no GUI: install it (apt-get install qt6-base-dev, or "
        "scripts/install-deps.sh as root) and rebuild (./dtsim does both)");
}

}  // namespace

void check_gui_can_open(const std::string&) {
    no_gui();
}
void show_validation_gui(std::vector<ValidationForGui>, const std::string&) {
    no_gui();
}

void add_gui_command(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("gui", "open traces, a live what-if or a sweep in a window (needs Qt 6; not in this build)");
    cmd->allow_extras();
    cmd->callback([] { no_gui(); });
}

}  // namespace dtsim::cli
