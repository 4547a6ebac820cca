// `dtsim sweep`: simulate every configuration of a search space (--axis,
// --space) and list them as a table, CSV or JSON.
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/advisor/mpi_sweep.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "format_units.hpp"
#include "progress.hpp"
#include "reporter.hpp"
#include "space_options.hpp"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>

namespace dtsim::cli {

namespace {

struct SweepOptions {
    SpaceOptions space;
    Reporter report;
};

}  // namespace

advisor::SearchSpace space_from_options(const SpaceOptions& s) {
    advisor::SearchSpace space = s.space_file.empty() ? advisor::SearchSpace{} : advisor::load_space(s.space_file);
    for (const auto& spec : s.axes) advisor::add_axis(space, advisor::parse_axis(spec));
    if (s.global_batch > 0) space.global_batch = s.global_batch;
    return space;
}

void add_space_options(CLI::App& cmd, SpaceOptions& s) {
    cmd.add_option("--axis", s.axes,
                   "an axis of the space, key=v1,v2,...: strategy, micro_batch, grad_accum, seq_len, precision, "
                   "activation_checkpointing (false, true, N: every N-th block, op: op-level), a strategy knob, or an "
                   "NCCL variable --env takes (e.g. "
                   "NCCL_SOCKET_NTHREADS=default,2,4; default leaves it unset) (repeatable)");
    cmd.add_option("--space", s.space_file, "a JSON search space: {\"strategy\": [...], \"knobs\": {...}}");
    cmd.add_option("--global-batch", s.global_batch,
                   "samples per optimizer step over all GPUs; grad_accum = global / (micro_batch x GPUs)");
}

std::vector<advisor::SweepResult> run_with_progress(const std::vector<advisor::Candidate>& candidates,
                                                    const calib::Calibration& cal) {
    ProgressBar bar(::isatty(STDERR_FILENO) != 0);
    const auto start = std::chrono::steady_clock::now();
    auto results = advisor::run_sweep(candidates, cal, [&](std::size_t done, std::size_t total, const auto& c) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const double eta = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
        bar.update(fmt::format("{}/{} ETA {} {}", done, total, format_seconds(eta), c.label()),
                   static_cast<double>(done) / static_cast<double>(total));
    });
    bar.finish("");
    return results;
}

namespace {

std::string table(const std::vector<advisor::SweepResult>& results) {
    std::string out = fmt::format("{:>4}  {:<60} {:>10} {:>11} {:>6} {:>10} {:>11}  {}\n", "#", "configuration", "step",
                                  "samples/s", "MFU", "exp. comm", "peak mem", "fits");
    for (const auto& r : results) {
        std::string label = r.candidate.label();
        if (r.simulated)
            out += fmt::format("{:>4}  {:<60} {:>10} {:>11.1f} {:>5.1f}% {:>10} {:>11}  {}\n", r.candidate.index, label,
                               format_seconds(r.step_time_s), r.samples_per_s, r.mfu * 100,
                               format_seconds(r.exposed_comm_s), format_bytes(r.peak_memory_bytes),
                               r.fits ? "yes" : "no: " + r.why);
        else
            out += fmt::format("{:>4}  {:<60} {:>10} {:>11} {:>6} {:>10} {:>11}  no: {}\n", r.candidate.index, label,
                               "-", "-", "-", "-", "-", r.why);
    }
    return out;
}

}  // namespace

void add_sweep_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    auto sweep = std::make_shared<SweepOptions>();
    auto* cmd = app.add_subcommand("sweep", "simulate every configuration of a search space (--axis, --space)");
    add_options(*cmd, *opts, true);
    cmd->remove_option(cmd->get_option("--trace"));
    sweep->report.add_option(*cmd, {"table", "csv", "json"}, "output: table, csv or json");
    add_space_options(*cmd, sweep->space);
    cmd->footer(
        "Example:\n  dtsim sweep --model gpt2-xl --nodes 2 --precision bf16-mixed --axis strategy=ddp,fsdp \\\n"
        "      --axis micro_batch=1,2,4 --axis bucket_cap_mb=10,25,50 --format csv");
    cmd->callback([opts, sweep] {
        const sim::Config base = make_config(*opts);
        const auto candidates = advisor::enumerate(space_from_options(sweep->space), base);
        const calib::Calibration cal = load_hardware(*opts);
        std::vector<advisor::SweepResult> results;
        if (advisor::launched_by_mpirun()) {
            // Under mpirun: each rank simulates every size-th configuration and rank 0
            // prints what one process would; the other ranks print nothing.
            auto d = advisor::run_sweep_mpi(candidates, cal);
            if (d.rank != 0) return;
            results = std::move(d.results);
        } else {
            results = run_with_progress(candidates, cal);
        }
        sweep->report.print({.text = [&] { return table(results); },
                             .json = [&] { return advisor::sweep_json(results); },
                             .csv = [&] { return advisor::sweep_csv(results); }});
    });
}

}  // namespace dtsim::cli
