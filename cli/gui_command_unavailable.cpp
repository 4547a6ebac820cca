// `dtsim gui` in a build without Qt 6: says how to get it.
#include "commands.hpp"
#include "dtsim/common/error.hpp"

namespace dtsim::cli {

void add_gui_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("gui", "open traces and a live what-if in a window (needs Qt 6; not in this build)");
    cmd->allow_extras();
    cmd->callback([] {
        throw ConfigError(
            "this dtsim was built without Qt 6, so it has no GUI: install it (apt-get install qt6-base-dev, or "
            "scripts/install-deps.sh as root) and rebuild (./dtsim does both)");
    });
}

}  // namespace dtsim::cli
