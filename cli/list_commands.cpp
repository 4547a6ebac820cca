// `dtsim models` and `dtsim hardware`: what can be named on the command line.
#include "commands.hpp"
#include "dtsim/models/model_registry.hpp"
#include "dtsim/profiler/presets.hpp"
#include "format_units.hpp"

#ifdef DTSIM_HAVE_CUDA
#include "dtsim/profiler/cuda_devices.hpp"
#endif

#include <fmt/format.h>

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
    cmd->callback([] {
        fmt::print("{:<22} {:>16} {:>8} {:>18}  {}\n", "model", "parameters", "seq", "train GFLOP/token",
                   "description");
        for (const auto& m : models::list_models()) {
            std::string params = m.param_count > 0 ? format_thousands(m.param_count) : "-";
            std::string flops =
                m.training_flops_per_token > 0 ? fmt::format("{:.3f}", m.training_flops_per_token / 1e9) : "-";
            fmt::print("{:<22} {:>16} {:>8} {:>18}  {}\n", m.name, params, m.default_seq_len, flops, m.description);
        }
        fmt::print(
            "\nTraining FLOPs per token = forward + backward at the default sequence length, micro-batch 1 "
            "(about 6 x parameters, plus attention).\n"
            "Any HuggingFace model of type llama, mistral, qwen2, gemma, gemma2, phi3, mixtral, qwen2_moe, gpt2, "
            "gpt_neox or falcon: --model "
            "path/to/config.json (or the "
            "directory holding it).\n");
    });
}

void add_hardware_command(CLI::App& app) {
    auto* cmd = app.add_subcommand("hardware", "list the built-in hardware presets");
    cmd->callback([] {
        for (const auto& p : calib::list_presets()) {
            const calib::Calibration c = calib::load_hardware(p.name);
            fmt::print("{:<10} {}\n", p.name, p.description);
            fmt::print(
                "           {} GPUs/node, {} memory, bf16 {:.0f} TFLOPS, fp32 {:.1f} TFLOPS, {:.0f} GB/s memory\n",
                c.gpus_per_node, format_bytes(c.device.memory_bytes), c.peak_tflops(DType::bf16),
                c.peak_tflops(DType::fp32), c.device.mem_bw_gbps);
        }
        fmt::print(
            "\nPresets are datasheet peaks and published NCCL bandwidths, labelled 'preset' in every report.\n"
            "A calibration file in dtsim's JSON format can be given instead: --hardware cal.json.\n");
        fmt::print("This machine: {}\n", local_devices_line());
    });
}

}  // namespace dtsim::cli
