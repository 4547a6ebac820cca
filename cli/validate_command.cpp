// `mpirun -np N dtsim validate`: simulate and execute the same Plans, then
// report how far each prediction was, in total and per task kind.
#include "all_ranks.hpp"
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/executor/bracketed_refresh.hpp"
#include "dtsim/executor/calibration_targets.hpp"
#include "dtsim/executor/execute.hpp"
#include "dtsim/executor/validation.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/strategy.hpp"
#include "format_units.hpp"
#include "progress.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

namespace dtsim::cli {
namespace {

struct ValidateOptions {
    SimulateOptions config;
    std::string strategies;  // comma-separated; empty: --strategy
    bool hardware_given = false;
    int steps = 5;
    // Re-measure each plan's drifting figures around each run: "auto"
    // where the calibration was measured on this backend with these ranks.
    std::string refresh = "auto";
    bool gui = false;            // open the compare view at the end
    std::string gui_screenshot;  // render it to this PNG instead
    int tasks = 0;               // list the N tasks furthest from measured, per strategy
};

using executor::kTaskKinds;

struct Result {
    std::string strategy;
    std::string mode;
    executor::Comparison comparison;
};

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream in(list);
    for (std::string item; std::getline(in, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

std::string percent(double predicted, double measured) {
    if (measured <= 0) return predicted > 0 ? "n/a" : "-";
    return fmt::format("{:+.1f} %", 100.0 * (predicted - measured) / measured);
}

// Whether to refresh `cal` around each run: only a CPU calibration measured
// on this machine with this many ranks can be re-measured here.
bool should_refresh(const std::string& mode, const calib::Calibration& cal, int ranks) {
    if (mode == "off") return false;
    const std::string why_not = profiler::why_not_refreshable(cal, ranks);
    if (mode == "on" && !why_not.empty())
        throw ConfigError(
            fmt::format("--refresh on: calibration '{}' cannot be refreshed here: {}; use --refresh off "
                        "or auto",
                        cal.name, why_not));
    return why_not.empty();
}

std::string validation_table(const ValidateOptions& o, const calib::Calibration& cal, int size, bool refresh,
                             const std::vector<Result>& results) {
    std::string out;
    const auto to = std::back_inserter(out);
    fmt::format_to(to, "Predicted against measured step time: {} on {} rank{} ({}, {}{}), executed over {}\n\n",
                   o.config.model, size, size == 1 ? "" : "s", cal.name, cal.provenance.source,
                   refresh ? ", refreshed around each run" : "", runtime::to_string(profiler::transport_of(cal)));
    fmt::format_to(to, "  {:<28} {:>7} {:>12} {:>12} {:>9}   {:>10} {:>10} {:>10} {:>10}   {:>11}\n", "strategy",
                   "mode", "predicted", "measured", "error", "compute", "collective", "copy", "host", "peak memory");
    for (const auto& [strategy, mode, c] : results)
        fmt::format_to(
            to, "  {:<28} {:>7} {:>12} {:>12} {:>9}   {:>10} {:>10} {:>10} {:>10}   {:>11}\n", strategy, mode,
            format_seconds(c.predicted_s), format_seconds(c.measured_s), percent(c.predicted_s, c.measured_s),
            percent(c.predicted_kind_s[0], c.measured_kind_s[0]), percent(c.predicted_kind_s[1], c.measured_kind_s[1]),
            percent(c.predicted_kind_s[2], c.measured_kind_s[2]), percent(c.predicted_kind_s[3], c.measured_kind_s[3]),
            percent(static_cast<double>(c.predicted_peak_bytes), static_cast<double>(c.measured_peak_bytes)));
    if (o.tasks > 0)
        for (const auto& [strategy, mode, c] : results) {
            fmt::format_to(
                to, "\n  {}: the {} tasks furthest from measured (rank {}, medians over steps after the first)\n",
                strategy, std::min<std::size_t>(static_cast<std::size_t>(o.tasks), c.tasks.size()), c.rank);
            fmt::format_to(to, "  {:>6}  {:<36} {:<12} {:>12} {:>12} {:>9}\n", "task", "name", "kind", "predicted",
                           "measured", "error");
            for (const auto& t : executor::furthest_tasks(c, static_cast<std::size_t>(o.tasks)))
                fmt::format_to(to, "  {:>6}  {:<36} {:<12} {:>12} {:>12} {:>9}\n", t.task, t.name, to_string(t.kind),
                               format_seconds(t.predicted_s), format_seconds(t.measured_s),
                               percent(t.predicted_s, t.measured_s));
        }
    fmt::format_to(to,
                   "\n  Error = (predicted - measured) / measured; per kind, the summed task times of the rank that "
                   "computed longest "
                   "(medians over steps after the first); peak memory: the plan's allocations at their measured "
                   "times.\n");
    return out;
}

void run_validate(ValidateOptions o) {
    if (print_knob_help_if_asked(o.config)) return;
    executor::ensure_mpi();
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    on_all_ranks([&] {
        if (o.steps < 2) throw ConfigError(fmt::format("--steps must be >= 2: the first is warm-up (got {})", o.steps));
        const std::vector<std::string> strategies = split(o.strategies.empty() ? o.config.strategy : o.strategies);
        if (strategies.empty()) throw ConfigError(fmt::format("--strategies '{}' names no strategy", o.strategies));
        if (!o.gui_screenshot.empty()) o.gui = true;
        if (o.gui && rank == 0) check_gui_can_open(o.gui_screenshot);
        ProgressBar bar(rank == 0);
        std::vector<sim::Config> configs;
        for (const auto& strategy : strategies) {
            SimulateOptions so = o.config;
            so.strategy = strategy;
            configs.push_back(make_config(so));
            configs.back().host_memory_reuse = true;  // the executor keeps freed memory (runtime/process_memory)
            configs.back().topology = {1, size};
        }
        // Each plan's GEMM shapes and collective sizes, and all of them (a quick calibration's targets).
        profiler::CpuCalibrationOptions copt;
        copt.quick = true;
        const std::vector<executor::ValidationCase> cases = executor::validation_cases(configs, &copt.targets);
        std::vector<profiler::CalibrationTargets> targets;
        for (const auto& c : cases) targets.push_back(c.targets);
        calib::Calibration cal;
        if (o.hardware_given) {
            cal = load_hardware(o.config);
        } else {
            // No calibration given: measure this machine first (quick), on every rank.
            cal = profiler::calibrate_cpu(
                copt, [&](std::string_view what, double f) { bar.update(what, f); }, [](std::string_view) {});
            bar.finish(fmt::format("calibrated this machine (quick, {} rank{})", size, size == 1 ? "" : "s"));
        }
        const bool refresh = should_refresh(o.refresh, cal, size);
        std::optional<executor::BracketedRefresh> bracket;
        if (refresh) bracket.emplace(cal, targets);
        std::vector<Result> results;
        std::vector<ValidationForGui> for_gui;
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const double done = static_cast<double>(i) / static_cast<double>(cases.size());
            bar.update(fmt::format("{}: executing {} steps{}", strategies[i], o.steps,
                                   bracket ? ", then refreshing the calibration" : ""),
                       done);
            executor::ExecOptions eo;
            eo.steps = o.steps;
            // Over the transport the calibration priced: a gloo calibration is
            // compared with gloo's collectives, not MPI's.
            eo.transport = profiler::transport_of(cal);
            eo.half_sum = profiler::half_sum_of(cal);  // and its fp16 sums as the calibration timed them
            const executor::ValidationRun run =
                executor::validate_case(cases[i], cal, bracket ? &*bracket : nullptr, eo);
            if (rank == 0)
                results.push_back({strategies[i], std::string(executor::to_string(run.measured.mode)), run.comparison});
            if (rank == 0 && o.gui)
                for_gui.push_back(
                    {strategies[i], sim::make_timeline(run.predicted, cases[i].config, cal), run.measured.timeline});
        }
        bar.finish(fmt::format("executed {} configuration{}", configs.size(), configs.size() == 1 ? "" : "s"));
        if (rank != 0) return;
        const auto json = [&] {
            Json j = {{"model", o.config.model},
                      {"world_size", size},
                      {"hardware", cal.name},
                      {"transport", runtime::to_string(profiler::transport_of(cal))},
                      {"refreshed", refresh},
                      {"results", Json::array()}};
            for (const auto& r : results) {
                const auto& c = r.comparison;
                Json kinds = Json::object();
                for (std::size_t k = 0; k < kTaskKinds.size(); ++k)
                    if (c.predicted_kind_s[k] > 0 || c.measured_kind_s[k] > 0)
                        kinds[std::string(to_string(kTaskKinds[k]))] = {{"predicted_s", c.predicted_kind_s[k]},
                                                                        {"measured_s", c.measured_kind_s[k]}};
                Json result = {{"strategy", r.strategy},
                               {"mode", r.mode},
                               {"predicted_step_time_s", c.predicted_s},
                               {"measured_step_time_s", c.measured_s},
                               {"error", c.error()},
                               {"predicted_peak_memory_bytes", c.predicted_peak_bytes},
                               {"measured_peak_memory_bytes", c.measured_peak_bytes},
                               {"by_task_kind", kinds},
                               {"by_task_kind_rank", c.rank}};
                if (o.tasks > 0) {
                    result["tasks"] = Json::array();  // furthest from measured first
                    for (const auto& t : executor::furthest_tasks(c, static_cast<std::size_t>(o.tasks)))
                        result["tasks"].push_back({{"task", t.task},
                                                   {"name", t.name},
                                                   {"kind", to_string(t.kind)},
                                                   {"predicted_s", t.predicted_s},
                                                   {"measured_s", t.measured_s}});
                }
                j["results"].push_back(std::move(result));
            }
            return j.dump(2);
        };
        o.config.report.print({.text = [&] { return validation_table(o, cal, size, refresh, results); }, .json = json});
        if (o.gui) {
            if (!o.gui_screenshot.empty()) {
                show_validation_gui(std::move(for_gui), o.gui_screenshot);
                o.config.report.note(fmt::format("  Compare view written to {}", o.gui_screenshot));
            } else {
                fmt::print(stderr, "dtsim: opening the compare view (close the window to finish)\n");
                show_validation_gui(std::move(for_gui), {});
            }
        }
    });
}

}  // namespace

void add_validate_command(CLI::App& app) {
    auto o = std::make_shared<ValidateOptions>();
    auto* cmd = app.add_subcommand("validate",
                                   "simulate and execute the same configurations, then report the "
                                   "prediction error in total and per task kind");
    add_options(*cmd, o->config, true, /*with_topology=*/false);
    o->config.report.add_option(*cmd, {"text", "json"}, "output: text or json");
    cmd->add_option("--strategies", o->strategies, "comma-separated strategies to compare (default: --strategy)");
    cmd->add_option("--tasks", o->tasks,
                    "also list, per strategy, the N tasks whose predicted time is furthest from the measured one "
                    "(with --format json, as a \"tasks\" array)")
        ->check(CLI::Range(0, 1000000))
        ->capture_default_str();
    cmd->add_option("--steps", o->steps, "steps to execute per configuration (the first is warm-up)")
        ->capture_default_str();
    cmd->add_option("--refresh", o->refresh,
                    "re-measure each plan's GEMM shapes, collective sizes, memory bandwidth and CPU Adam just "
                    "before and just after it runs (a few seconds each) and price it from both, so that the "
                    "machine's drift is not counted as the model's error; auto: where the calibration was measured "
                    "on this CPU backend with as many ranks")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    cmd->add_flag("--gui", o->gui,
                  "then open the compare view: each strategy's predicted step above its measured one, spans coloured "
                  "by their error, and the error per kind (needs a display; rank 0 opens it)");
    cmd->add_option("--gui-screenshot", o->gui_screenshot,
                    "render that compare view offscreen to this PNG instead of opening a window");
    cmd->footer(
        "Without --hardware a quick calibration of this machine runs first.\n"
        "A shared machine's speed moves by several percent within seconds; with --refresh (auto) each prediction\n"
        "is the mean of two prices of its plan, from the calibration re-measured for it just before and just after\n"
        "the run it is compared with.\n"
        "Examples:\n  mpirun -np 2 ./dtsim validate --model mlp-4x512 --micro-batch 32 "
        "--strategies ddp,fsdp,deepspeed_stage_3\n"
        "  mpirun -np 2 ./dtsim validate --model mlp-4x512 --micro-batch 32 --strategies ddp,fsdp --gui");
    cmd->callback([o, cmd] {
        ValidateOptions v = *o;
        v.hardware_given = cmd->count("--hardware") > 0;
        run_validate(std::move(v));
    });
}

}  // namespace dtsim::cli
