// Hardware presets. Every number is a datasheet peak or a published collective
// bandwidth, not a measurement of ours; the provenance says so. Run
// `dtsim calibrate` on real hardware for measured tables.
#include "dtsim/profiler/presets.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <functional>

namespace dtsim::calib {
namespace {

constexpr std::int64_t MiB = 1024LL * 1024;
constexpr std::int64_t GiB = 1024 * MiB;

struct PresetNumbers {
    std::string name, device, datasheet;
    std::int64_t memory_bytes;
    double mem_bw_gbps;
    double bf16_tflops, fp32_tflops;
    double nvlink_busbw_gbps;  // NCCL ring busbw inside one 8-GPU node (nccl-tests)
    double nic_gbps_per_gpu;   // one NIC per GPU, bytes/s after protocol overhead
    double pcie_gbps;          // pinned host<->device copies
    // Streaming (vectorized) kernels' share of the datasheet bandwidth, and the
    // element rate of torch's non-vectorized ones (DeviceSpec).
    double elementwise_efficiency;
    double indexed_elements_per_s;
    // bf16 GEMM efficiency curve: max share of the peak and half-efficiency dimensions.
    double bf16_max_efficiency = 0.78, bf16_half_m = 256, bf16_half_n = 256, bf16_half_k = 128;
    // bf16 GEMMs with misaligned feature dimensions (GemmCurve); 1 where not measured.
    double bf16_align4_ratio = 1, bf16_align2_ratio = 1;
};

// Collective curves for any group size: the NCCL ring model of
// strategy-semantics.md §5.3 with LL-protocol step latency for small sizes.
void add_link_curves(Calibration& c, LinkScope scope, double busbw_gbps, double base_latency_us,
                     double step_latency_us) {
    for (auto kind : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                      CollectiveKind::broadcast, CollectiveKind::reduce}) {
        CollectiveCurve curve;
        curve.kind = kind;
        curve.scope = scope;
        curve.group_size = 0;
        curve.latency_us = base_latency_us;
        curve.step_latency_us = step_latency_us;
        curve.bus_bw_gbps = busbw_gbps;
        c.collectives.push_back(curve);
    }
}

Calibration make_preset(const PresetNumbers& p) {
    Calibration c;
    c.name = p.name;
    c.provenance.source = "preset";
    c.provenance.machine = p.datasheet;
    c.provenance.backend = "preset";
    c.provenance.notes =
        "Datasheet peaks and published NCCL bus bandwidths. GEMM efficiency follows a shape curve "
        "(bf16: fitted to cuBLAS on random data where bench/results/cuda.md measured the GPU, else "
        "max 78% of the tensor-core peak; fp32: 85%); vectorized "
        "elementwise kernels reach a share of the peak memory bandwidth and torch's non-vectorized "
        "ones an element rate (device fields; bench/results/cuda.md); overlap slowdowns are estimates for NCCL "
        "kernels taking SMs from compute. Measure your machine with `dtsim calibrate`.";
    // About 1 GiB goes to the CUDA context, NCCL's buffers and cuBLAS workspaces.
    c.device = {p.device,          p.memory_bytes, 1 * GiB, p.mem_bw_gbps, p.elementwise_efficiency, 2.0,
                p.indexed_elements_per_s};
    c.gpus_per_node = 8;
    // Half-efficiency dimensions: a tile-sized (128-256) dimension runs at about half speed.
    c.gemm_curves.push_back({DType::bf16, p.bf16_tflops, p.bf16_max_efficiency, p.bf16_half_m, p.bf16_half_n,
                             p.bf16_half_k, 0, p.bf16_align4_ratio, p.bf16_align2_ratio});
    c.gemm_curves.push_back({DType::fp32, p.fp32_tflops, 0.85, 128, 128, 64, 0});
    add_link_curves(c, LinkScope::intra_node, p.nvlink_busbw_gbps, 8.0, 0.6);
    add_link_curves(c, LinkScope::inter_node, p.nic_gbps_per_gpu * 0.9, 10.0, 5.0);
    // DeepSpeed reports its SIMD CPUAdam 5-7x faster than torch.optim.Adam on the CPU (estimate).
    c.host = {p.pcie_gbps, p.pcie_gbps, p.pcie_gbps * 0.4, p.pcie_gbps * 0.4, 1.0e9, 6.0, 4.0, 0.2e9};
    c.overlap = {1.10, 1.05, 1.0, 1.0};
    return c;
}

const Registry<std::function<Calibration()>>& presets() {
    static const Registry<std::function<Calibration()>> registry = [] {
        Registry<std::function<Calibration()>> r("hardware");
        r.add("h100-sxm", "NVIDIA H100 SXM5 80GB x8 per node, NVLink 4 (NVSwitch), 8x 400 Gb/s InfiniBand NDR per node",
              [] {
                  return make_preset({"h100-sxm", "NVIDIA H100 SXM5 80GB",
                                      "NVIDIA H100 datasheet (989 TFLOPS dense bf16, 67 TFLOPS fp32, 3.35 TB/s HBM3); "
                                      "NCCL allreduce busbw ~360 GB/s on DGX H100 without NVLS; ConnectX-7 400 Gb/s",
                                      81559 * MiB /* as nvidia-smi reports */, 3350, 989.4, 66.9, 360, 50, 55,
                                      // Measured on an H100 SXM (bench/results/cuda.md): torch's vectorized
                                      // kernels ran at 2.96-3.24 TB/s, its non-vectorized ones at
                                      // 220-360 G elements/s (296 G over one Llama block's); the bf16
                                      // curve is fitted to 33 cuBLAS shapes of 1 GFLOP and more on
                                      // random data (7% RMS; 802 TFLOP/s at 8192x4096x4096, where
                                      // torch's q_proj ran at 797). Misaligned feature dimensions
                                      // (§6): even ones ran at 0.35 of the aligned rate (cutlass_80
                                      // align2 kernels), odd ones at 0.17 (cutlass_75 align1; GPT-2's
                                      // 50,257-token head).
                                      0.90, 300e9, 0.85, 32, 160, 160, 0.35, 0.17});
              });
        r.add("h200-sxm",
              "NVIDIA H200 SXM 141GB x8 per node, NVLink 4 (NVSwitch), 8x 400 Gb/s InfiniBand NDR per node", [] {
                  return make_preset({"h200-sxm", "NVIDIA H200",
                                      "NVIDIA H200 datasheet (989 TFLOPS dense bf16, 67 TFLOPS fp32, 4.8 TB/s HBM3e, "
                                      "141 GB); the H100's GH100 compute, NVLink 4 and ConnectX-7 400 Gb/s",
                                      143771 * MiB /* as nvidia-smi reports */, 4800, 989.4, 66.9, 360, 50, 55,
                                      // Measured on an H200 (bench/results/cuda.md): torch's vectorized
                                      // kernels ran at 4.1-4.6 TB/s (0.85-0.95 of 4.8), its non-vectorized
                                      // ones at the H100's element rate; GEMMs as the H100's (same die
                                      // and clocks; torch's GEMMs took 32.4 ms on the H100, 33.7 on it),
                                      // misaligned ones included (measured on the H100 only).
                                      0.90, 300e9, 0.85, 32, 160, 160, 0.35, 0.17});
              });
        r.add(
            "a100-sxm", "NVIDIA A100 SXM4 80GB x8 per node, NVLink 3 (NVSwitch), 8x 200 Gb/s InfiniBand HDR per node",
            [] {
                return make_preset({"a100-sxm", "NVIDIA A100 SXM4 80GB",
                                    "NVIDIA A100 datasheet (312 TFLOPS dense bf16, 19.5 TFLOPS fp32, 2.04 TB/s HBM2e); "
                                    "NCCL allreduce busbw ~230 GB/s on DGX A100; ConnectX-6 200 Gb/s",
                                    81920 * MiB /* as nvidia-smi reports */, 2039, 312, 19.5, 230, 25, 25,
                                    // Not measured here: the streaming share as before, and the H100's
                                    // element rate scaled by SMs x clock (108 x 1.41 GHz against
                                    // 132 x 1.98 GHz), an estimate. Misaligned GEMMs: not measured,
                                    // so not penalised.
                                    0.80, 300e9 * (108 * 1.41) / (132 * 1.98)});
            });
        return r;
    }();
    return registry;
}

}  // namespace

std::vector<PresetInfo> list_presets() {
    std::vector<PresetInfo> out;
    for (const auto& e : presets().entries()) out.push_back({e.name, e.description});
    return out;
}

Calibration load_hardware(const std::string& name_or_path, std::string_view option) {
    bool looks_like_file = name_or_path.ends_with(".json") || name_or_path.find('/') != std::string::npos;
    if (looks_like_file || std::filesystem::exists(name_or_path)) return read_calibration(name_or_path);
    const auto& r = presets();
    const auto* e = r.find_or_null(name_or_path);
    if (!e)
        throw ConfigError(fmt::format("{} {}: {} (or give a calibration file: {} cal.json)", option, name_or_path,
                                      unknown_name_message("hardware", name_or_path, r.names()), option));
    return e->value();
}

}  // namespace dtsim::calib
