// `dtsim models` and `dtsim hardware`: what can be named on the command line.
#include "commands.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/profiler/presets.hpp"
#include "format_units.hpp"
#include "reporter.hpp"

#ifdef DTSIM_HAVE_CUDA
#include "dtsim/profiler/cuda_devices.hpp"
#endif

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iterator>
#include <memory>

namespace dtsim::cli {
namespace {

// What this machine has, so users know whether `calibrate --backend cuda` can run here.
std::string local_devices_line() {
#ifdef DTSIM_HAVE_CUDA
    const auto q = calib::cuda::query_devices();
    if (!q.error.empty()) return fmt::format("no usable CUDA device ({})", q.error);
    if (q.devices.empty()) return "no CUDA device";
    std::vector<std::string> names;
    for (const auto& d : q.devices)
        names.push_back(
            fmt::format("{} ({}, sm_{}{})", d.name, format_bytes(d.memory_bytes), d.compute_major, d.compute_minor));
    return fmt::format("{} CUDA device{}: {}", q.devices.size(), q.devices.size() == 1 ? "" : "s",
                       fmt::join(names, ", "));
#else
    return "dtsim was built without the CUDA toolkit";
#endif
}

}  // namespace

void add_models_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("models", "list the built-in models with parameters and training FLOPs per token");
    auto report = std::make_shared<Reporter>();
    report->add_option(*cmd, {"text", "json"}, "text, or json: one object per model");
    cmd->callback([report] {
        const auto json = [] {
            nlohmann::ordered_json out = nlohmann::ordered_json::array();
            for (const auto& m : models::list_models())
                out.push_back(
                    {{"name", m.name},
                     {"parameters", m.param_count > 0 ? nlohmann::ordered_json(m.param_count) : nullptr},
                     {"default_seq_len", m.default_seq_len},
                     {"training_flops_per_token",
                      m.training_flops_per_token > 0 ? nlohmann::ordered_json(m.training_flops_per_token) : nullptr},
                     {"description", m.description}});
            return out.dump(1);
        };
        const auto text = [] {
            std::string out = fmt::format("{:<22} {:>16} {:>8} {:>18}  {}\n", "model", "parameters", "seq",
                                          "train GFLOP/token", "description");
            for (const auto& m : models::list_models()) {
                std::string params = m.param_count > 0 ? format_thousands(m.param_count) : "-";
                std::string flops =
                    m.training_flops_per_token > 0 ? fmt::format("{:.3f}", m.training_flops_per_token / 1e9) : "-";
                out += fmt::format("{:<22} {:>16} {:>8} {:>18}  {}\n", m.name, params, m.default_seq_len, flops,
                                   m.description);
            }
            return out +
                   "\nTraining FLOPs per token = forward + backward at the default sequence length, micro-batch 1 "
                   "(about 6 x parameters, plus attention).\n"
                   "Any HuggingFace model of type llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, qwen2_moe, "
                   "gpt2, "
                   "gpt_neox or falcon: --model path/to/config.json (or the directory holding it).\n";
        };
        report->print({.text = text, .json = json});
    });
}

namespace {

std::string tflops(double t) {
    if (t <= 0) return "-";
    return t < 100 ? fmt::format("{:.1f}", t) : fmt::format("{:.0f}", t);
}

std::string hardware_table(const std::vector<calib::PresetInfo>& presets) {
    std::string out;
    const auto to = std::back_inserter(out);
    fmt::format_to(to, "{:<10} {:>10} {:>9}  {:>6} {:>6} {:>6} {:>9} {:>6} {:>5}  {:>10} {:>9}\n", "preset", "memory",
                   "mem BW", "fp64", "fp32", "tf32", "bf16/fp16", "fp8", "fp4", "GPU busbw", "net/GPU");
    fmt::format_to(to, "{:<10} {:>10} {:>9}  {:^43}  {:>10} {:>9}\n", "", "", "(TB/s)", "dense TFLOPS", "(GB/s)",
                   "(GB/s)");
    for (const auto& p : presets) {
        const calib::Datasheet& d = p.sheet;
        fmt::format_to(to, "{:<10} {:>10} {:>9.2f}  {:>6} {:>6} {:>6} {:>9} {:>6} {:>5}  {:>10.0f} {:>9.3g}\n", p.name,
                       format_bytes(d.memory_bytes), d.mem_bw_gbps / 1000, tflops(d.fp64_tflops), tflops(d.fp32_tflops),
                       tflops(d.tf32_tflops), tflops(d.bf16_tflops), tflops(d.fp8_tflops), tflops(d.fp4_tflops),
                       d.intra_node_busbw_gbps, d.network_gbps);
    }
    fmt::format_to(
        to,
        "\nPer GPU; every preset has 8 GPUs per node. GPU busbw: an 8-GPU allreduce's bus bandwidth inside a node "
        "(nccl-tests' "
        "busbw, ring\nalgorithm); net/GPU: the network between nodes. dtsim prices GEMMs from the bf16/fp16 and fp32 "
        "columns\n(fp32 training runs without TF32, torch's default); the others are shown for comparison.\n");
    return out;
}

nlohmann::ordered_json preset_json(const calib::PresetInfo& p) {
    const calib::Datasheet& d = p.sheet;
    const auto peak = [](double t) { return t > 0 ? nlohmann::ordered_json(t) : nlohmann::ordered_json(nullptr); };
    return {{"name", p.name},
            {"description", p.description},
            {"device", d.device},
            {"gpus_per_node", d.gpus_per_node},
            {"memory_bytes", d.memory_bytes},
            {"memory_bandwidth_gbps", d.mem_bw_gbps},
            {"dense_tflops",
             {{"fp64", peak(d.fp64_tflops)},
              {"fp32", peak(d.fp32_tflops)},
              {"tf32", peak(d.tf32_tflops)},
              {"bf16", peak(d.bf16_tflops)},
              {"fp16", peak(d.bf16_tflops)},
              {"fp8", peak(d.fp8_tflops)},
              {"fp4", peak(d.fp4_tflops)}}},
            {"gpu_link", d.gpu_link},
            {"intra_node_allreduce_busbw_gbps", d.intra_node_busbw_gbps},
            {"collective_library", d.library},
            {"network", d.network},
            {"network_gbps_per_gpu", d.network_gbps},
            {"sources", d.sources}};
}

std::string preset_text(const calib::PresetInfo& p) {
    std::string out;
    const auto to = std::back_inserter(out);
    const calib::Datasheet& d = p.sheet;
    fmt::format_to(to, "{}: {}\n", p.name, p.description);
    fmt::format_to(to, "  device            {}\n", d.device);
    fmt::format_to(to, "  memory            {} ({:.2f} TB/s)\n", format_bytes(d.memory_bytes), d.mem_bw_gbps / 1000);
    fmt::format_to(to, "  dense TFLOPS      fp64 {}, fp32 {}, tf32 {}, bf16/fp16 {}, fp8 {}, fp4 {}\n",
                   tflops(d.fp64_tflops), tflops(d.fp32_tflops), tflops(d.tf32_tflops), tflops(d.bf16_tflops),
                   tflops(d.fp8_tflops), tflops(d.fp4_tflops));
    fmt::format_to(to, "  between GPUs      {}\n", d.gpu_link);
    fmt::format_to(to, "  8-GPU allreduce   {:.0f} GB/s bus bandwidth ({}, ring)\n", d.intra_node_busbw_gbps,
                   d.library);
    fmt::format_to(to, "  between nodes     {} ({:.3g} GB/s per GPU)\n", d.network, d.network_gbps);
    fmt::format_to(to, "  sources           {}\n", d.sources);
    fmt::format_to(to, "                    (numbered in docs/notes/hardware-presets.md; [E]: an estimate)\n");
    return out;
}

}  // namespace

void add_hardware_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("hardware",
                                   "list the built-in hardware presets: memory, FLOPS per dtype, "
                                   "bandwidths, and their sources");
    auto name = std::make_shared<std::string>();
    cmd->add_option("preset", *name, "show one preset in full, with the source of each figure");
    auto report = std::make_shared<Reporter>();
    report->add_option(*cmd, {"text", "json"}, "text, or json: every preset's datasheet (or the one named)");
    cmd->footer(
        "Examples:\n"
        "  dtsim hardware            # every preset, one line each\n"
        "  dtsim hardware mi300x     # one preset, with its sources\n"
        "  dtsim hardware --format json");
    cmd->callback([name, report] {
        const auto presets = calib::list_presets();
        if (!name->empty()) {
            for (const auto& p : presets)
                if (p.name == *name)
                    return report->print(
                        {.text = [&] { return preset_text(p); }, .json = [&] { return preset_json(p).dump(1); }});
            std::vector<std::string> names;
            for (const auto& p : presets) names.push_back(p.name);
            throw ConfigError(unknown_name_message("hardware preset", *name, names));
        }
        report->print({.text =
                           [&] {
                               return hardware_table(presets) +
                                      "\nPresets are datasheet peaks and published NCCL/RCCL bandwidths, labelled "
                                      "'preset' in every report;\n`dtsim hardware NAME` gives the sources. A "
                                      "calibration file in dtsim's JSON format can be given instead:\n--hardware "
                                      "cal.json. Override one field with --gpu-memory GIB or --inter-node-gbps "
                                      "GBPS.\n" +
                                      fmt::format("This machine: {}\n", local_devices_line());
                           },
                       .json =
                           [&] {
                               nlohmann::ordered_json out = nlohmann::ordered_json::array();
                               for (const auto& p : presets) out.push_back(preset_json(p));
                               return out.dump(1);
                           }});
    });
}

}  // namespace dtsim::cli
