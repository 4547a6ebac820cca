// `dtsim scale`: one configuration at several GPU counts: throughput, scaling
// efficiency and the step's breakdown, and the curve as an SVG plot.
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/advisor/scaling.hpp"
#include "dtsim/advisor/svg_plot.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/profiler/presets.hpp"
#include "format_units.hpp"
#include "reporter.hpp"

#include <fmt/format.h>

#include <memory>

namespace dtsim::cli {
namespace {

struct ScaleOptions {
    std::string gpus = "8,16,32,64";
    int gpus_per_node = 8;
    std::string plot;
    Reporter report;
};

std::string table(const advisor::ScaleResult& r) {
    std::string out =
        fmt::format("{:>6} {:>6} {:>10} {:>11} {:>11} {:>10} {:>10} {:>10} {:>11}  {}\n", "GPUs", "nodes", "step",
                    "samples/s", "tokens/s", "scaling", "compute", "exp. comm", "peak mem", "fits");
    for (const auto& p : r.points) {
        if (!p.simulated) {
            out += fmt::format("{:>6} {:>6} {:>10} {:>11} {:>11} {:>10} {:>10} {:>10} {:>11}  no: {}\n", p.gpus,
                               p.topology.nodes, "-", "-", "-", "-", "-", "-", "-", p.why);
            continue;
        }
        const std::string eff = r.baseline_gpus > 0 ? fmt::format("{:.1f}%", p.efficiency * 100) : "-";
        out += fmt::format("{:>6} {:>6} {:>10} {:>11.1f} {:>11} {:>10} {:>10} {:>10} {:>11}  {}\n", p.gpus,
                           p.topology.nodes, format_seconds(p.step_time_s), p.samples_per_s,
                           format_count(p.tokens_per_s), eff, format_seconds(p.compute_s),
                           format_seconds(p.exposed_comm_s), format_bytes(p.peak_memory_bytes), p.fits ? "yes" : p.why);
    }
    if (r.baseline_gpus > 0)
        out += fmt::format("scaling efficiency: samples/s per GPU relative to {} GPUs\n", r.baseline_gpus);
    else
        out += "scaling efficiency: no GPU count fits, so there is no baseline\n";
    return out;
}

}  // namespace

void add_scale_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    auto scale = std::make_shared<ScaleOptions>();
    auto* cmd = app.add_subcommand("scale", "simulate one configuration at several GPU counts (scaling curve)");
    add_options(*cmd, *opts, true, /*with_topology=*/false);
    cmd->remove_option(cmd->get_option("--trace"));
    cmd->add_option("--gpus", scale->gpus, "GPU counts, comma-separated (multiples of --gpus-per-node above one node)")
        ->capture_default_str();
    cmd->add_option("--gpus-per-node", scale->gpus_per_node, "GPUs per node; larger counts use whole nodes")
        ->capture_default_str();
    cmd->add_option("--plot", scale->plot, "write the scaling curve as an SVG file (samples/s and efficiency)");
    scale->report.add_option(*cmd, {"table", "json"}, "output: table or json");
    cmd->footer(
        "Example:\n  dtsim scale --model gpt2-xl --strategy fsdp --precision bf16-mixed --micro-batch 8 \\\n"
        "      --gpus 8,16,32,64,128,256 --plot scale.svg");
    cmd->callback([opts, scale] {
        const auto counts = advisor::parse_gpu_counts(scale->gpus);
        const sim::Config base = make_config(*opts);
        const calib::Calibration cal = load_hardware(*opts);
        const auto result = advisor::run_scaling(base, counts, scale->gpus_per_node, cal);
        scale->report.print(
            {.text = [&] { return table(result); }, .json = [&] { return advisor::scaling_json(result); }});
        if (!scale->plot.empty()) {
            const std::string title = fmt::format("{} {} {} micro-batch {} on {}", opts->model, opts->strategy,
                                                  opts->precision, opts->micro_batch, opts->hardware);
            write_file_atomically(scale->plot, advisor::render_svg(advisor::scaling_plot(result, title)));
            scale->report.note(fmt::format("wrote {}", scale->plot));
        }
    });
}

}  // namespace dtsim::cli
