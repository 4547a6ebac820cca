// `dtsim gui [FILES...]`: the Qt views. Trace files open in the timeline;
// --model ... (the options of `simulate`) opens the live what-if on a
// simulated configuration; --axis / --space (the options of `sweep`), or a
// `dtsim sweep` / `dtsim advise` --format json file, open the sweep view; --screenshot renders
// offscreen and exits.
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/gui/app.hpp"
#include "dtsim/profiler/presets.hpp"
#include "space_options.hpp"

#include <fmt/format.h>

#include <memory>

namespace dtsim::cli {
namespace {

struct GuiCommandOptions {
    SimulateOptions simulate;
    SpaceOptions space;
    std::vector<std::string> files;
    std::string screenshot;
    std::string view;
    std::string size = "1600x900";
    bool dark = false;
    std::vector<std::string> changes;
    std::string window;
    std::string search;
    std::string select;
};

// "60:90" -> {60, 90} (milliseconds after the first event).
std::pair<double, double> parse_window(const std::string& s) {
    const auto colon = s.find(':');
    double from = 0, to = 0;
    try {
        if (colon != std::string::npos) {
            from = std::stod(s.substr(0, colon));
            to = std::stod(s.substr(colon + 1));
        }
    } catch (const std::exception&) {
        from = to = 0;
    }
    if (colon == std::string::npos || !(to > from) || from < 0)
        throw ConfigError(fmt::format("--window {}: expected FROM:TO in milliseconds after the first event, e.g. "
                                      "--window 60:90",
                                      s));
    return {from, to};
}

std::pair<int, int> parse_size(const std::string& s) {
    const auto x = s.find('x');
    int w = 0, h = 0;
    try {
        if (x != std::string::npos) {
            w = std::stoi(s.substr(0, x));
            h = std::stoi(s.substr(x + 1));
        }
    } catch (const std::exception&) {
        w = h = 0;
    }
    if (w < 200 || h < 150 || w > 10000 || h > 10000)
        throw ConfigError(fmt::format("--size {}: expected WIDTHxHEIGHT in pixels, e.g. --size 1600x900", s));
    return {w, h};
}

void run_gui_command(const GuiCommandOptions& o) {
    gui::GuiOptions g;
    g.files = o.files;
    g.screenshot = o.screenshot;
    g.view = o.view;
    g.dark = o.dark;
    std::tie(g.width_px, g.height_px) = parse_size(o.size);
    if (!o.window.empty()) g.window_ms = parse_window(o.window);
    g.search = o.search;
    g.select = o.select;
    if (!o.simulate.model.empty()) {
        g.config = make_config(o.simulate);
        g.calibration = load_hardware(o.simulate);
    }
    // Sweep files go to the sweep view, the rest to the timeline.
    std::vector<std::string> sweep_files;
    std::erase_if(g.files, [&](const std::string& f) {
        if (!advisor::looks_like_sweep_json(f)) return false;
        sweep_files.push_back(f);
        return true;
    });
    if (sweep_files.size() + (o.space.given() ? 1 : 0) > 1)
        throw ConfigError("one sweep at a time: give one sweep JSON file or --axis / --space, not both or several");
    if (o.space.given()) {
        if (!g.config)
            throw ConfigError("--axis / --space sweep a configuration: give it with --model ... (as for dtsim sweep)");
        g.sweep = run_with_progress(advisor::enumerate(space_from_options(o.space), *g.config), g.calibration);
        g.sweep_has_configs = true;
        g.sweep_title =
            fmt::format("{} on {} x {} GPUs ({}): {} configurations", g.config->model, g.config->topology.nodes,
                        g.config->topology.gpus_per_node, g.calibration.name, g.sweep.size());
    } else if (!sweep_files.empty()) {
        const std::string& f = sweep_files.front();
        g.sweep = advisor::read_sweep_json(f, g.config ? &*g.config : nullptr, &g.sweep_recommended);
        g.sweep_has_configs = g.config.has_value();
        g.sweep_title = g.config ? fmt::format("{}: {} configurations of {} on {}", f, g.sweep.size(), g.config->model,
                                               g.calibration.name)
                                 : fmt::format("{}: {} configurations", f, g.sweep.size());
        // The base configuration is the sweep's; it opens no what-if of its own.
        g.config.reset();
    }
    if (g.files.empty() && !g.config && g.sweep.empty())
        throw ConfigError(
            "nothing to show: give trace files (dtsim gui trace.json) or a configuration to simulate "
            "(dtsim gui --model gpt2-xl --strategy ddp --nodes 2) or a sweep (dtsim gui --model gpt2 --axis "
            "strategy=ddp,fsdp --axis micro_batch=1,2,4, or a `dtsim sweep --format json` file)");
    for (const auto& kv : o.changes) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos || eq == 0)
            throw ConfigError(fmt::format("--what-if-change {}: expected key=value, e.g. micro_batch=16", kv));
        g.what_if_changes.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    if (const int code = gui::run_gui(g); code != 0) throw Error(fmt::format("the GUI exited with code {}", code));
}

}  // namespace

void check_gui_can_open(const std::string& screenshot) { gui::check_can_open(screenshot); }

void show_validation_gui(std::vector<ValidationForGui> validations, const std::string& screenshot) {
    gui::GuiOptions g;
    // The first measured step is the warm-up, which validate's figures leave out too.
    for (auto& v : validations) g.compares.push_back({v.name, std::move(v.predicted), std::move(v.measured), 1});
    g.screenshot = screenshot;
    g.view = "compare";
    if (const int code = gui::run_gui(g); code != 0) throw Error(fmt::format("the GUI exited with code {}", code));
}

void add_gui_command(CLI::App& app) {
    auto opts = std::make_shared<GuiCommandOptions>();
    auto* cmd = app.add_subcommand(
        "gui",
        "open traces (predicted, measured, imported), a live what-if of a configuration, or a sweep, in a window");
    cmd->add_option("files", opts->files,
                    "trace files or directories (dtsim's simulate/execute --trace, torch.profiler / Kineto JSON), "
                    "or one `dtsim sweep --format json` or `dtsim advise --format json` file");
    add_options(*cmd, opts->simulate, false);
    cmd->add_option("--screenshot", opts->screenshot, "render the window offscreen to this PNG and exit");
    add_space_options(*cmd, opts->space);
    cmd->add_option("--view", opts->view, "the tab to show: timeline, whatif, compare or sweep")
        ->check(CLI::IsMember({"timeline", "whatif", "compare", "sweep"}));
    cmd->add_option("--size", opts->size, "window size WIDTHxHEIGHT in pixels")->capture_default_str();
    cmd->add_flag("--dark", opts->dark, "dark theme");
    cmd->add_option("--window", opts->window, "show FROM:TO milliseconds after the first event (default: all)");
    cmd->add_option("--search", opts->search, "highlight spans whose names contain this text");
    cmd->add_option("--select", opts->select,
                    "select the first span (in time) whose name contains this text: centred, its details shown and "
                    "arrows drawn from what it waits for");
    cmd->add_option("--what-if-change", opts->changes,
                    "change a what-if control after opening, as if by hand: micro_batch=16, strategy=fsdp, "
                    "bucket_cap_mb=50 (repeatable; for scripted screenshots)");
    cmd->footer(
        "Examples:\n"
        "  dtsim gui ddp.json                                  # a trace from simulate/execute --trace\n"
        "  dtsim gui --model gpt2-xl --strategy ddp --nodes 2 --micro-batch 4 --precision bf16-mixed\n"
        "  dtsim gui predicted.json measured.json --view compare\n"
        "  dtsim gui --model gpt2 --nodes 2 --axis strategy=ddp,fsdp --axis micro_batch=1,2,4   # the sweep view\n"
        "  dtsim gui sweep.json --model gpt2 --nodes 2   # a `dtsim sweep --format json` file, rows' timelines too\n"
        "  dtsim gui ddp.json --screenshot timeline.png --size 1600x900\n"
        "Keys: wheel zoom, drag pan, F fit, W/S zoom, A/D pan, / search, N / Shift+N next / previous match,\n"
        "click a span to see its details and what it waits for, click a rank header to collapse it.");
    cmd->callback([opts] { run_gui_command(*opts); });
}

}  // namespace dtsim::cli
