// `dtsim advise`: search a default space (or --axis) and recommend the
// configuration to run, with the alternatives, the Pareto front of throughput
// against memory, and why, in numbers.
#include "commands.hpp"
#include "config_options.hpp"
#include "dtsim/advisor/emit.hpp"
#include "dtsim/advisor/ranking.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/profiler/presets.hpp"
#include "format_units.hpp"
#include "space_options.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <memory>

namespace dtsim::cli {

namespace {

struct AdviseOptions {
    std::int64_t global_batch = 0;
    std::string objective = "throughput";
    std::string headroom = "10%";  // allocator fragmentation and spikes the model does not see
    std::vector<std::string> axes;
    std::string emit;      // deepspeed | lightning | torch
    std::string emit_out;  // empty: a section on stdout
    Reporter report;
};

// --emit: the recommendation as a ready-to-paste configuration. Its notes go
// to `notes` (stderr when stdout holds advise's JSON).
void emit_recommendation(const sim::Config& config, const AdviseOptions& a, std::FILE* notes = stdout) {
    if (a.emit.empty()) return;
    const std::string strategy = advisor::emitted_strategy(config);
    if (a.emit == "deepspeed" && strategy != "deepspeed") {
        fmt::print(notes,
                   "\nNote: --emit deepspeed: the recommendation uses {}, not DeepSpeed; nothing emitted (use --emit "
                   "lightning or --emit torch).\n",
                   strategy);
        return;
    }
    const std::string text = advisor::emit(a.emit, config);
    if (!a.emit_out.empty()) {
        write_file_atomically(a.emit_out, text);
        fmt::print(notes, "\nWrote the {} configuration to {}\n", a.emit, a.emit_out);
        return;
    }
    fmt::print("\n{} configuration ({}):\n{}", a.emit == "deepspeed" ? "DeepSpeed" : a.emit,
               a.emit == "deepspeed" ? "ds_config.json" : "python", text);
}

std::string row(const advisor::SweepResult& r) {
    return fmt::format("{:>10} {:>11.1f} {:>5.1f}% {:>10} {:>11}  {}", format_seconds(r.step_time_s), r.samples_per_s,
                       r.mfu * 100, format_seconds(r.exposed_comm_s), format_bytes(r.peak_memory_bytes),
                       r.candidate.label());
}

std::string header() {
    return fmt::format("{:>10} {:>11} {:>6} {:>10} {:>11}  {}", "step", "samples/s", "MFU", "exp. comm", "peak mem",
                       "configuration");
}

void run_advise(const SimulateOptions& o, const AdviseOptions& a) {
    if (a.report.json() && !a.emit.empty() && a.emit_out.empty())
        throw ConfigError(
            fmt::format("--emit {} with --format json needs --emit-out FILE: stdout holds the JSON", a.emit));
    const sim::Config base = make_config(o);
    const advisor::RankOptions rank_options{advisor::objective_from_string(a.objective),
                                            advisor::parse_headroom(a.headroom)};
    std::optional<std::int64_t> global_batch;
    if (a.global_batch > 0) global_batch = a.global_batch;
    const calib::Calibration cal = load_hardware(o);
    advisor::SearchSpace space;
    if (a.axes.empty()) {
        space = advisor::default_space(base, global_batch, cal);
    } else {
        for (const auto& spec : a.axes) advisor::add_axis(space, advisor::parse_axis(spec));
        space.global_batch = global_batch;
    }
    const auto candidates = advisor::enumerate(space, base);
    const auto results = run_with_progress(candidates, cal);
    const advisor::Ranking ranking = advisor::rank(results, rank_options);

    const auto fitting = std::count_if(results.begin(), results.end(), [](const auto& r) { return r.fits; });
    const auto skipped = std::count_if(results.begin(), results.end(), [](const auto& r) { return !r.simulated; });
    const std::string headroom_note =
        rank_options.memory_headroom > 0 ? fmt::format(" ({:.0f}% headroom)", rank_options.memory_headroom * 100) : "";
    if (ranking.order.empty()) {
        std::int64_t smallest = 0;
        for (const auto& r : results)
            if (r.simulated && (smallest == 0 || r.peak_memory_bytes < smallest)) smallest = r.peak_memory_bytes;
        // What would shrink it, of what the user has not already chosen.
        std::string try_these = "more GPUs (--nodes)";
        if (sim::compute_dtype(base.precision) == DType::fp32) try_these += ", --precision bf16-mixed";
        if (base.seq_len == 0)
            try_these += fmt::format(", a shorter --seq-len (the default is {}'s context, {} tokens)", base.model,
                                     sim::build_workload(base).seq_len);
        try_these += ", a smaller --global-batch";
        // The default space already tries FSDP's and DeepSpeed's CPU offload.
        if (!a.axes.empty()) try_these += ", CPU offload (--axis strategy=fsdp_cpu_offload,deepspeed_stage_3_offload)";
        throw DoesNotFitError(fmt::format(
            "none of the {} configurations of {} fits on {}{}{}. Try {} or a smaller --memory-headroom.",
            results.size(), base.model, cal.name, headroom_note,
            smallest > 0 ? fmt::format(" (the smallest needs {} per GPU)", format_bytes(smallest)) : "", try_these));
    }

    const auto& best = results[ranking.order.front()];
    const std::size_t n_alt = std::min<std::size_t>(5, ranking.order.size() - 1);
    const auto json = [&] {
        // One document: the search, the pick and its alternatives by index, and every row as sweep writes it.
        nlohmann::ordered_json j;
        j["advise"] = {
            {"model", base.model},
            {"hardware", cal.name},
            {"nodes", base.topology.nodes},
            {"gpus_per_node", base.topology.gpus_per_node},
            {"objective", a.objective},
            {"memory_headroom", rank_options.memory_headroom},
            {"global_batch", global_batch ? nlohmann::ordered_json(*global_batch) : nlohmann::ordered_json()},
            {"configurations", results.size()},
            {"fit", fitting},
            {"skipped", skipped}};
        j["recommended"] = ranking.order.front();
        j["recommendation"] = best.candidate.label();
        j["alternatives"] = std::vector<std::size_t>(ranking.order.begin() + 1,
                                                     ranking.order.begin() + static_cast<std::ptrdiff_t>(n_alt + 1));
        j["pareto"] = ranking.pareto;
        nlohmann::ordered_json why = nlohmann::ordered_json::array();
        for (std::size_t i = 1; i <= n_alt; ++i) why.push_back(advisor::explain(best, results[ranking.order[i]]));
        j["why"] = why;
        j["configurations"] = advisor::sweep_rows_json(results);
        return j.dump(2);
    };
    const auto text = [&] {
        std::string out;
        const auto to = std::back_inserter(out);
        fmt::format_to(to,
                       "Searched {} configurations of {} on {} x {} {} ({}, objective {}{}): {} fit, {} do not fit, {} "
                       "skipped or invalid.\n\n",
                       results.size(), base.model, base.topology.nodes, base.topology.gpus_per_node, cal.name,
                       global_batch ? fmt::format("global batch {}", *global_batch) : "grad_accum as given",
                       a.objective, headroom_note, fitting, static_cast<long>(results.size()) - fitting - skipped,
                       skipped);
        fmt::format_to(to, "Recommendation: {}\n", best.candidate.label());
        fmt::format_to(to,
                       "  micro-batch {}, grad-accum {}: step {}, {:.1f} samples/s, {} tokens/s, MFU {:.1f}%, exposed "
                       "communication {}, peak memory {} of {} usable\n\n",
                       best.candidate.config.micro_batch, best.candidate.config.grad_accum,
                       format_seconds(best.step_time_s), best.samples_per_s, format_count(best.tokens_per_s),
                       best.mfu * 100, format_seconds(best.exposed_comm_s), format_bytes(best.peak_memory_bytes),
                       format_bytes(best.usable_memory_bytes));
        if (!best.candidate.config.env.empty()) {
            std::vector<std::string> env;
            for (const auto& [name, value] : best.candidate.config.env) env.push_back(name + "=" + value);
            fmt::format_to(
                to,
                "  NCCL environment: {} (export it on every node before launch; --emit lightning/torch set it in "
                "the script, and DeepSpeed's multi-node launcher passes what .deepspeed_env lists)\n\n",
                fmt::join(env, " "));
        }
        fmt::format_to(to, "Top alternatives:\n  {}\n", header());
        for (std::size_t i = 1; i <= n_alt; ++i) fmt::format_to(to, "  {}\n", row(results[ranking.order[i]]));
        fmt::format_to(to, "\nPareto front (throughput against peak memory):\n  {}\n", header());
        for (std::size_t i : ranking.pareto) fmt::format_to(to, "  {}\n", row(results[i]));
        fmt::format_to(to, "\nWhy the recommendation:\n");
        for (std::size_t i = 1; i <= n_alt; ++i)
            fmt::format_to(to, "  - {}\n", advisor::explain(best, results[ranking.order[i]]));
        std::size_t pareto_lines = 0;
        for (std::size_t i : ranking.pareto)
            if (pareto_lines < 5 && i != ranking.order.front() &&
                std::find(ranking.order.begin(), ranking.order.begin() + static_cast<std::ptrdiff_t>(n_alt + 1), i) ==
                    ranking.order.begin() + static_cast<std::ptrdiff_t>(n_alt + 1)) {
                fmt::format_to(to, "  - {} (Pareto)\n", advisor::explain(best, results[i]));
                ++pareto_lines;
            }
        // The fastest configuration that was ruled out, if it beats the recommendation.
        for (const auto& r : results)
            if (r.simulated && !advisor::eligible(r, rank_options.memory_headroom) &&
                r.samples_per_s > best.samples_per_s) {
                fmt::format_to(to, "  - not {}: {}\n", r.candidate.label(),
                               r.fits
                                   ? fmt::format("needs {}, above the {:.0f}% headroom",
                                                 format_bytes(r.peak_memory_bytes), rank_options.memory_headroom * 100)
                                   : r.why);
                break;
            }
        return out;
    };
    a.report.print({.text = text, .json = json});
    emit_recommendation(best.candidate.config, a, a.report.json() ? stderr : stdout);
}

}  // namespace

void add_advise_command(CLI::App& app) {
    auto opts = std::make_shared<SimulateOptions>();
    auto adv = std::make_shared<AdviseOptions>();
    auto* cmd = app.add_subcommand("advise", "recommend a strategy, micro-batch and knobs for a model and hardware");
    add_options(*cmd, *opts, true);
    cmd->remove_option(cmd->get_option("--trace"));
    cmd->add_option("--global-batch", adv->global_batch,
                    "samples per optimizer step over all GPUs, kept fixed (grad_accum derived)");
    cmd->add_option("--objective", adv->objective, "throughput or memory")
        ->check(CLI::IsMember({"throughput", "memory"}))
        ->capture_default_str();
    cmd->add_option("--memory-headroom", adv->headroom, "keep this share of usable device memory free, e.g. 10% or 0.1")
        ->capture_default_str();
    cmd->add_option("--axis", adv->axes, "search these axes (key=v1,v2,...) instead of the default space");
    adv->report.add_option(*cmd, {"text", "json"},
                           "text, or json: the recommendation, alternatives and Pareto front by index, and every "
                           "configuration as `sweep --format json` writes it (dtsim gui opens it)");
    cmd->add_option("--emit", adv->emit,
                    "write the recommendation as a DeepSpeed JSON, a Lightning Trainer or a torch DDP/FSDP call")
        ->check(CLI::IsMember({"deepspeed", "lightning", "torch"}));
    cmd->add_option("--emit-out", adv->emit_out, "write the --emit output to this file (default: a section on stdout)");
    cmd->footer(
        "Example:\n  dtsim advise --model llama2-7b --hardware h100-sxm --nodes 2 --gpus-per-node 8 \\\n"
        "      --precision bf16-mixed --global-batch 256 --memory-headroom 10%");
    cmd->callback([opts, adv] { run_advise(*opts, *adv); });
}

}  // namespace dtsim::cli
