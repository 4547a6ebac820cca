// Hardware presets. Every number is a datasheet peak or a published collective
// bandwidth, not a measurement of ours; the provenance says so. Run
// `dtsim calibrate` on real hardware for measured tables.
#include "dtsim/profiler/presets.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>

namespace dtsim::calib {
namespace {

constexpr std::int64_t MiB = 1024LL * 1024;
constexpr std::int64_t GiB = 1024 * MiB;

// The bf16 GEMM efficiency curve: max share of the peak, half-efficiency
// dimensions, and the rate of GEMMs with misaligned feature dimensions
// (GemmCurve). The defaults where nothing was measured: 78 % at most, not
// penalised for alignment.
struct Bf16Curve {
    double max_efficiency = 0.78, half_m = 256, half_n = 256, half_k = 128;
    double align4_ratio = 1, align2_ratio = 1;
};

// GH100 (H100 SXM, H200): fitted to 33 cuBLAS shapes of 1 GFLOP and more on
// random data on an H100 (bench/results/cuda.md; 7% RMS; 802 TFLOP/s at
// 8192x4096x4096, where torch's q_proj ran at 797). Misaligned feature
// dimensions (§6): even ones ran at 0.35 of the aligned rate (cutlass_80
// align2 kernels), odd ones at 0.17 (cutlass_75 align1; GPT-2's 50,257-token
// head).
constexpr Bf16Curve kGH100Bf16 = {
    .max_efficiency = 0.85, .half_m = 32, .half_n = 160, .half_k = 160, .align4_ratio = 0.35, .align2_ratio = 0.17};

// NCCL's view of the 8-GPU SXM nodes, for its algorithm choice (NcclTopology):
// the graphs NCCL 2.30.7's topology search finds, worked out from its source
// in docs/notes/nccl-tuning.md §1.1 (derived, not read from a log). NICs sit on
// the GPUs' PCIe switches (PXN), so LL128 runs across nodes.
// An NVSwitch node whose tree graphs are its ring graphs (as the search finds
// them on these nodes), with NICs beside the GPUs and one NIC per GPU.
constexpr NcclTopology nvswitch_node(int sm, bool amd_cpu, NcclGraph ring_node, NcclGraph nvls_node,
                                     NcclGraph ring_nodes, int channels_node, NcclGraph nvls_nodes = {}) {
    NcclTopology t;
    t.sm = sm;
    t.amd_cpu = amd_cpu;
    t.nvls = nvls_node.channels > 0;
    t.ring_node = t.tree_node = ring_node;
    t.nvls_node = nvls_node;
    t.ring_nodes = t.tree_nodes = ring_nodes;
    t.nvls_nodes = nvls_nodes;
    t.channels_node = channels_node;
    t.channels_nodes = 16;
    return t;
}
// DGX/HGX H100 and H200: NVLink 4 (18 x 20.6 GB/s) gives a ring of 6 x 60,
// doubled to 12 x 30; NVLS 8 channels (40 in, 60 out); 8 x 400G NDR give
// 8 x 48 across nodes (not doubled, 48 < 50). Intel Xeon hosts. NVLSTree
// across nodes: one channel per NIC, at most 8; each head GPU's NVLink
// carries (channels + 1) x bwIntra of its 370.8 GB/s, so the search settles
// on 8 x 40 inside, then raises only bwInter to the NIC path's 48
// (docs/notes/nccl-tuning.md §1.1.1).
constexpr double kNvlsTreeIntraGbps = 40;  // 8 channels: (8 + 1) x 40 <= 18 x 20.6
constexpr NcclTopology kHgxH100Nccl =
    nvswitch_node(90, false, {12, 30, 30}, {8, 40, 60}, {8, 48, 48}, 24,
                  {.channels = 8, .bw_intra_gbps = kNvlsTreeIntraGbps, .bw_inter_gbps = 48});
// DGX A100: NVLink 3 (12 x 20 GB/s) gives 6 x 40 doubled to 12 x 20; 8 x 200G
// HDR behind PCIe Gen4 give 8 x 24. AMD EPYC hosts. No NVLS before Hopper.
constexpr NcclTopology kDgxA100Nccl = nvswitch_node(80, true, {12, 20, 20}, {}, {8, 24, 24}, 24);
// HGX B200 [E]: not derived from the search; a ring of 16 x 43.75 = 700, the
// preset's busbw (NCCL's link model: 18 x 40.1 = 722), NVLS left out until
// its Blackwell graph is worked out, and 8 x 400G as on the H100. Intel hosts.
constexpr NcclTopology kHgxB200Nccl = nvswitch_node(100, false, {16, 43.75, 43.75}, {}, {8, 48, 48}, 32);

struct PresetNumbers {
    std::string name, description;
    std::string datasheet;  // the provenance line of every report
    Datasheet sheet;
    double pcie_gbps;  // pinned host<->device copies
    // Streaming (vectorized) kernels' share of the datasheet bandwidth, and the
    // element rate of torch's non-vectorized ones (DeviceSpec).
    double elementwise_efficiency;
    double indexed_elements_per_s;
    Bf16Curve bf16 = {};
    // Intra-node groups smaller than the node whose bus bandwidth differs from
    // the 8-GPU figure (group size, GB/s); empty: the same for every group.
    std::vector<std::pair<int, double>> small_group_busbw = {};
    // NCCL's own cost model for this node shape; none (sm 0): RCCL, or PCIe
    // nodes whose graphs are not worked out, priced by the per-link curves.
    NcclTopology nccl = {};
};

// The H100 SXM's measured element rate of torch's non-vectorized kernels
// (bench/results/cuda.md), scaled to another GPU by SMs x boost clock: an
// estimate wherever that GPU was not measured.
constexpr double kH100IndexedRate = 300e9;
double scaled_indexed_rate(double sms, double boost_ghz) {
    return kH100IndexedRate * (sms * boost_ghz) / (132 * 1.98);
}

// Collective curves for any group size: the NCCL ring model of
// strategy-semantics.md §5.3 with LL-protocol step latency for small sizes.
void add_link_curves(Calibration& c, LinkScope scope, double busbw_gbps, double base_latency_us, double step_latency_us,
                     int group_size = 0) {
    for (auto kind : {CollectiveKind::allreduce, CollectiveKind::reduce_scatter, CollectiveKind::allgather,
                      CollectiveKind::broadcast, CollectiveKind::reduce}) {
        CollectiveCurve curve;
        curve.kind = kind;
        curve.scope = scope;
        curve.group_size = group_size;
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
    const Datasheet& d = p.sheet;
    c.device = {d.device, d.memory_bytes,          1 * GiB, d.mem_bw_gbps, p.elementwise_efficiency,
                2.0,      p.indexed_elements_per_s};
    c.gpus_per_node = d.gpus_per_node;
    // Half-efficiency dimensions: a tile-sized (128-256) dimension runs at about half speed.
    c.gemm_curves.push_back({DType::bf16, d.bf16_tflops, p.bf16.max_efficiency, p.bf16.half_m, p.bf16.half_n,
                             p.bf16.half_k, 0, p.bf16.align4_ratio, p.bf16.align2_ratio});
    c.gemm_curves.push_back({DType::fp32, d.fp32_tflops, 0.85, 128, 128, 64, 0});
    add_link_curves(c, LinkScope::intra_node, d.intra_node_busbw_gbps, 8.0, 0.6);
    for (const auto& [group, busbw] : p.small_group_busbw)
        add_link_curves(c, LinkScope::intra_node, busbw, 8.0, 0.6, group);
    add_link_curves(c, LinkScope::inter_node, d.network_gbps * 0.9, 10.0, 5.0);
    // DeepSpeed reports its SIMD CPUAdam 5-7x faster than torch.optim.Adam on the CPU (estimate).
    c.host = {p.pcie_gbps, p.pcie_gbps, p.pcie_gbps * 0.4, p.pcie_gbps * 0.4, 1.0e9, 6.0, 4.0, 0.2e9};
    c.overlap = {1.10, 1.05, 1.0, 1.0};
    c.nccl = p.nccl;
    return c;
}

// Figures per GPU, dense peaks (half the sparse ones NVIDIA quotes), decimal
// units. Sources: docs/notes/hardware-presets.md, numbered there; [E] marks
// an estimate and says how it was made.
const std::vector<PresetNumbers>& preset_numbers() {
    static const std::vector<PresetNumbers> all = {
        {.name = "h100-sxm",
         .description = "NVIDIA H100 SXM5 80GB x8 per node, NVLink 4 (NVSwitch), 8x 400 Gb/s InfiniBand NDR per node",
         .datasheet = "NVIDIA H100 datasheet (989 TFLOPS dense bf16, 67 TFLOPS fp32, 3.35 TB/s HBM3); "
                      "NCCL allreduce busbw ~360 GB/s on DGX H100 without NVLS; ConnectX-7 400 Gb/s",
         .sheet = {.device = "NVIDIA H100 SXM5 80GB",
                   .memory_bytes = 81559 * MiB,  // as nvidia-smi reports
                   .mem_bw_gbps = 3350,
                   .fp64_tflops = 66.9,
                   .fp32_tflops = 66.9,
                   .tf32_tflops = 494.7,
                   .bf16_tflops = 989.4,
                   .fp8_tflops = 1978.9,
                   .gpu_link = "NVLink 4, 450 GB/s per direction (NVSwitch)",
                   .intra_node_busbw_gbps = 360,
                   .network = "400 Gb/s InfiniBand NDR (ConnectX-7)",
                   .network_gbps = 50,
                   .sources = "H100 architecture whitepaper [5]; nvidia-smi [13]; ring busbw ~370 (NCCL maintainer "
                              "[6], 365-370 for 2-8 GPUs [36]); NVLS would give ~480 [7]"},
         .pcie_gbps = 55,
         // Measured on an H100 SXM (bench/results/cuda.md): torch's vectorized
         // kernels ran at 2.96-3.24 TB/s, its non-vectorized ones at
         // 220-360 G elements/s (296 G over one Llama block's); GEMMs as
         // kGH100Bf16 says.
         .elementwise_efficiency = 0.90,
         .indexed_elements_per_s = kH100IndexedRate,
         .bf16 = kGH100Bf16,
         .nccl = kHgxH100Nccl},
        {.name = "h200-sxm",
         .description = "NVIDIA H200 SXM 141GB x8 per node, NVLink 4 (NVSwitch), 8x 400 Gb/s InfiniBand NDR per node",
         .datasheet = "NVIDIA H200 datasheet (989 TFLOPS dense bf16, 67 TFLOPS fp32, 4.8 TB/s HBM3e, "
                      "141 GB); the H100's GH100 compute, NVLink 4 and ConnectX-7 400 Gb/s",
         .sheet = {.device = "NVIDIA H200",
                   .memory_bytes = 143771 * MiB,  // as nvidia-smi reports
                   .mem_bw_gbps = 4800,
                   .fp64_tflops = 66.9,
                   .fp32_tflops = 66.9,
                   .tf32_tflops = 494.7,
                   .bf16_tflops = 989.4,
                   .fp8_tflops = 1978.9,
                   .gpu_link = "NVLink 4, 450 GB/s per direction (NVSwitch)",
                   .intra_node_busbw_gbps = 360,
                   .network = "400 Gb/s InfiniBand NDR (ConnectX-7)",
                   .network_gbps = 50,
                   .sources = "H200 datasheet, DGX BasePOD [2]; nvidia-smi [13]; the H100's compute [5]; ring busbw "
                              "as the H100's (NVLS: 480 on Azure ND H200 v5 [7], 475 [9])"},
         .pcie_gbps = 55,
         // Measured on an H200 (bench/results/cuda.md): torch's vectorized
         // kernels ran at 4.1-4.6 TB/s (0.85-0.95 of 4.8), its non-vectorized
         // ones at the H100's element rate; GEMMs as the H100's (same die
         // and clocks; torch's GEMMs took 32.4 ms on the H100, 33.7 on it),
         // misaligned ones included (measured on the H100 only).
         .elementwise_efficiency = 0.90,
         .indexed_elements_per_s = kH100IndexedRate,
         .bf16 = kGH100Bf16,
         .nccl = kHgxH100Nccl},
        {.name = "b200",
         .description = "NVIDIA B200 180GB x8 per node (HGX/DGX B200), NVLink 5 (NVSwitch), 8x 400 Gb/s per node",
         .datasheet = "NVIDIA HGX B200 specifications (2,250 TFLOPS dense bf16, 75 TFLOPS fp32, 8 TB/s HBM3e, "
                      "180 GB); NCCL ring allreduce busbw ~700 GB/s (estimate); ConnectX-7 400 Gb/s",
         .sheet = {.device = "NVIDIA B200",
                   .memory_bytes = 183359 * MiB,
                   .mem_bw_gbps = 8000,
                   .fp64_tflops = 37,
                   .fp32_tflops = 75,
                   .tf32_tflops = 1125,
                   .bf16_tflops = 2250,
                   .fp8_tflops = 4500,
                   .fp4_tflops = 9000,
                   .gpu_link = "NVLink 5, 900 GB/s per direction (NVSwitch)",
                   .intra_node_busbw_gbps = 700,
                   .network = "400 Gb/s InfiniBand NDR or Ethernet (ConnectX-7)",
                   .network_gbps = 50,
                   .sources = "HGX B200 spec table [3] (the Blackwell tech brief [4] gives fp64 40, fp32 80, tf32 "
                              "1,100); nvidia-smi [1][13]; NICs [2]; ring busbw [E] ~700 from NCCL's link model "
                              "(18 x 40.1 = 722 [12]) and a B300's 695 ring [11] (NVLS: 830+ [10])"},
         .pcie_gbps = 55,
         // Not measured: the H100's streaming share; element rate scaled by
         // SMs x clock (148 x 1.965 GHz) [E]; misaligned GEMMs not penalised.
         .elementwise_efficiency = 0.90,
         .indexed_elements_per_s = scaled_indexed_rate(148, 1.965),
         .nccl = kHgxB200Nccl},
        {.name = "a100-sxm",
         .description = "NVIDIA A100 SXM4 80GB x8 per node, NVLink 3 (NVSwitch), 8x 200 Gb/s InfiniBand HDR per node",
         .datasheet = "NVIDIA A100 datasheet (312 TFLOPS dense bf16, 19.5 TFLOPS fp32, 2.04 TB/s HBM2e); "
                      "NCCL allreduce busbw ~230 GB/s on DGX A100; ConnectX-6 200 Gb/s",
         .sheet = {.device = "NVIDIA A100 SXM4 80GB",
                   .memory_bytes = 81920 * MiB,  // as nvidia-smi reports
                   .mem_bw_gbps = 2039,
                   .fp64_tflops = 19.5,
                   .fp32_tflops = 19.5,
                   .tf32_tflops = 156,
                   .bf16_tflops = 312,
                   .gpu_link = "NVLink 3, 300 GB/s per direction (NVSwitch)",
                   .intra_node_busbw_gbps = 230,
                   .network = "200 Gb/s InfiniBand HDR (ConnectX-6)",
                   .network_gbps = 25,
                   .sources = "A100 datasheet [15]; nvidia-smi [13]; busbw ~230 (NCCL maintainer [8], 231.6 on Azure "
                              "ND A100 v4 [7]); NICs [16][17]"},
         .pcie_gbps = 25,
         // Not measured here: the streaming share as before, and the H100's
         // element rate scaled by SMs x clock (108 x 1.41 GHz against
         // 132 x 1.98 GHz), an estimate. Misaligned GEMMs: not measured,
         // so not penalised.
         .elementwise_efficiency = 0.80,
         .indexed_elements_per_s = scaled_indexed_rate(108, 1.41),
         .nccl = kDgxA100Nccl},
        {.name = "a100-40gb",
         .description = "NVIDIA A100 SXM4 40GB x8 per node (DGX A100 40GB), NVLink 3 (NVSwitch), 8x 200 Gb/s HDR",
         .datasheet = "NVIDIA A100 datasheet (312 TFLOPS dense bf16, 19.5 TFLOPS fp32, 1.56 TB/s HBM2, 40 GB); "
                      "NCCL allreduce busbw ~230 GB/s (the 80GB part's NVLink); ConnectX-6 200 Gb/s",
         .sheet = {.device = "NVIDIA A100 SXM4 40GB",
                   .memory_bytes = 40960 * MiB,  // drivers 535+; older ones report 40536 MiB
                   .mem_bw_gbps = 1555,
                   .fp64_tflops = 19.5,
                   .fp32_tflops = 19.5,
                   .tf32_tflops = 156,
                   .bf16_tflops = 312,
                   .gpu_link = "NVLink 3, 300 GB/s per direction (NVSwitch)",
                   .intra_node_busbw_gbps = 230,
                   .network = "200 Gb/s InfiniBand HDR (ConnectX-6)",
                   .network_gbps = 25,
                   .sources = "A100 datasheet [15]; nvidia-smi [13]; busbw as the 80GB part's (same NVLink) [8]; "
                              "Azure ND A100 v4 (40GB, 200 Gb/s HDR per GPU) [17]"},
         .pcie_gbps = 25,
         .elementwise_efficiency = 0.80,
         .indexed_elements_per_s = scaled_indexed_rate(108, 1.41),
         .nccl = kDgxA100Nccl},
        {.name = "a100-pcie",
         .description =
             "NVIDIA A100 80GB PCIe x8 per node, PCIe Gen4 only (no NVLink bridge), ~20 Gb/s Ethernet per GPU",
         .datasheet = "NVIDIA A100 datasheet (A100 80GB PCIe: 312 TFLOPS dense bf16, 19.5 TFLOPS fp32, 1.94 TB/s, "
                      "300 W); 8-GPU allreduce over PCIe Gen4 ~20 GB/s busbw (estimate); Azure NC A100 v4 network",
         .sheet = {.device = "NVIDIA A100 80GB PCIe",
                   .memory_bytes = 81920 * MiB,
                   .mem_bw_gbps = 1935,
                   .fp64_tflops = 19.5,
                   .fp32_tflops = 19.5,
                   .tf32_tflops = 156,
                   .bf16_tflops = 312,
                   .gpu_link = "PCIe Gen4 x16, 32 GB/s per direction (NVLink bridges join pairs only)",
                   .intra_node_busbw_gbps = 20,
                   .network = "Ethernet, ~20 Gb/s per GPU (Azure NC A100 v4: 80 Gb/s for 4 GPUs)",
                   .network_gbps = 2.5,
                   .sources = "A100 datasheet [15]; nvidia-smi [13]; busbw [E] ~20 (range 12-24) from NCCL's "
                              "PCIe Gen4 model (24 GB/s per link [19]) and CPU-bound PCIe systems [20]; network "
                              "[18]. At 300 W it holds lower clocks than the SXM part under load."},
         .pcie_gbps = 25,
         .elementwise_efficiency = 0.80,
         .indexed_elements_per_s = scaled_indexed_rate(108, 1.41)},
        {.name = "h100-pcie",
         .description = "NVIDIA H100 PCIe 80GB x8 per node, PCIe Gen5 only (no NVLink bridge), ~25 Gb/s per GPU",
         .datasheet = "NVIDIA H100 datasheet (H100 PCIe: 756 TFLOPS dense bf16, 51 TFLOPS fp32, 2.0 TB/s HBM2e, "
                      "350 W); 8-GPU allreduce over PCIe Gen5 ~30 GB/s busbw (estimate)",
         .sheet = {.device = "NVIDIA H100 PCIe",
                   .memory_bytes = 81559 * MiB,
                   .mem_bw_gbps = 2000,
                   .fp64_tflops = 51.2,
                   .fp32_tflops = 51.2,
                   .tf32_tflops = 378,
                   .bf16_tflops = 756,
                   .fp8_tflops = 1513,
                   .gpu_link = "PCIe Gen5 x16, 64 GB/s per direction (NVLink bridges join pairs only)",
                   .intra_node_busbw_gbps = 30,
                   .network = "Ethernet, ~25 Gb/s per GPU (no standard; estimate)",
                   .network_gbps = 3,
                   .sources = "H100 datasheet [25] and product brief [24]; nvidia-smi [13]; busbw [E] ~30 (range "
                              "25-40) from NCCL's Gen5 model (48 GB/s per link [19]) and 28 GB/s on 8 Gen5 GPUs "
                              "[20]; a bridged pair measured 116 [27]; network [E]"},
         .pcie_gbps = 55,
         .elementwise_efficiency = 0.90,
         .indexed_elements_per_s = scaled_indexed_rate(114, 1.755)},
        {.name = "l40s",
         .description = "NVIDIA L40S 48GB x8 per node, PCIe Gen4 only (no NVLink), 400 Gb/s per node (AWS g6e)",
         .datasheet = "NVIDIA L40S datasheet (362 TFLOPS dense bf16, 91.6 TFLOPS fp32, 864 GB/s GDDR6, 48 GB); "
                      "8-GPU allreduce over PCIe Gen4 ~20 GB/s busbw (estimate); AWS g6e.48xlarge network",
         .sheet = {.device = "NVIDIA L40S",
                   .memory_bytes = 46068 * MiB,
                   .mem_bw_gbps = 864,
                   .fp64_tflops = 1.4,
                   .fp32_tflops = 91.6,
                   .tf32_tflops = 183,
                   .bf16_tflops = 362,
                   .fp8_tflops = 733,
                   .gpu_link = "PCIe Gen4 x16, 32 GB/s per direction (no NVLink)",
                   .intra_node_busbw_gbps = 20,
                   .network = "EFA, 50 Gb/s per GPU (AWS g6e.48xlarge: 400 Gb/s for 8)",
                   .network_gbps = 6.25,
                   .sources = "L40S datasheet [21]; nvidia-smi [13]; fp64 [E] 1:64 of fp32 [22]; busbw [E] as the "
                              "A100 PCIe's [19][20]; network [23]"},
         .pcie_gbps = 25,
         // GDDR6: the streaming share [E]; element rate scaled by SMs x clock [E].
         .elementwise_efficiency = 0.80,
         .indexed_elements_per_s = scaled_indexed_rate(142, 2.52)},
        {.name = "mi300x",
         .description = "AMD Instinct MI300X 192GB x8 per node, Infinity Fabric mesh (RCCL), 8x 400 Gb/s per node",
         .datasheet = "AMD MI300X (ROCm MI300 microarchitecture: 1,307 TFLOPS dense bf16, 163 TFLOPS fp32, "
                      "5.3 TB/s HBM3, 192 GB); RCCL allreduce busbw ~318 GB/s on 8 GPUs (AMD ROCm blog); 400 Gb/s",
         .sheet = {.device = "AMD Instinct MI300X",
                   .memory_bytes = 196288 * MiB,  // rocm-smi: 205,822,885,888 bytes
                   .mem_bw_gbps = 5300,
                   .fp64_tflops = 163.4,
                   .fp32_tflops = 163.4,
                   .tf32_tflops = 653.7,
                   .bf16_tflops = 1307.4,
                   .fp8_tflops = 2614.9,
                   .gpu_link = "Infinity Fabric (xGMI), 7 links x 64 GB/s per direction, fully connected, no switch",
                   .intra_node_busbw_gbps = 318,
                   .network = "400 Gb/s InfiniBand NDR or RoCE",
                   .network_gbps = 50,
                   .library = "RCCL",
                   .sources = "ROCm MI300 microarchitecture [28]; rocm-smi [29]; 8-GPU busbw 317.96 at 8 GB, capped "
                              "at 310-330 [31], 315.7 independently [35]; network [32]. RCCL differs from NCCL on "
                              "NVSwitch: no switch and no in-fabric reduction (no NVLS/SHARP); a group of k GPUs "
                              "uses only k-1 of each GPU's 7 links, so 2- and 4-GPU groups get about 46 and 140 "
                              "GB/s [E], as dtsim's curves for those groups say; RCCL kernels run "
                              "on CUs and take them from compute. GEMM efficiency on MI300X is not measured here: "
                              "the NVIDIA curve's shape is assumed."},
         .pcie_gbps = 55,
         // Not measured: the streaming share and the element rate [E] (304 CUs
         // at 2.1 GHz counted as SMs).
         .elementwise_efficiency = 0.80,
         .indexed_elements_per_s = scaled_indexed_rate(304, 2.1),
         // k GPUs of the fully connected mesh use k-1 links each, about 46 GB/s
         // apiece [E] ([31]: 48 achievable per link), up to the 8-GPU cap.
         .small_group_busbw = {{2, 46}, {3, 92}, {4, 138}, {5, 184}, {6, 230}, {7, 276}}},
    };
    return all;
}

const Registry<std::function<Calibration()>>& presets() {
    static const Registry<std::function<Calibration()>> registry = [] {
        Registry<std::function<Calibration()>> r("hardware");
        for (const PresetNumbers& p : preset_numbers()) r.add(p.name, p.description, [&p] { return make_preset(p); });
        return r;
    }();
    return registry;
}

}  // namespace

std::vector<PresetInfo> list_presets() {
    std::vector<PresetInfo> out;
    for (const PresetNumbers& p : preset_numbers()) out.push_back({p.name, p.description, p.sheet});
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

namespace {

// What one TCP flow sustains, GB/s, per kind of NIC (docs/notes/nccl-tuning.md §3):
// - aws: 10 Gb/s, EC2's single-flow limit inside a cluster placement group
//   (5 Gb/s outside one; EC2 User Guide, "Amazon EC2 instance network bandwidth").
// - ethernet and gcp [E]: 1.25 GB/s, from nccl#450 (4 x 8 V100 over 100 Gb/s
//   TCP, 4 channels of 1 socket each: 4.5-5.2 GB/s busbw at 8-16 MiB, about
//   1.2 GB/s a flow); nccl#209 saw 2.06 GB/s on one flow of a 32 Gb/s network.
//   A host's own figure (iperf3 with one stream) replaces it: KIND:NxG:FLOW.
struct SocketKind {
    std::string_view name;
    SocketNic vendor;
    std::string_view nic;
    double flow_gbps;
};
constexpr SocketKind kSocketKinds[] = {{"ethernet", SocketNic::generic, "Ethernet", 1.25},
                                       {"aws", SocketNic::aws, "AWS ENA", 1.25},
                                       {"gcp", SocketNic::gcp, "GCP gVNIC", 1.25}};

double parse_positive(std::string_view spec, std::string_view part, std::string_view text, double max,
                      std::string_view what) {
    double x = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
    if (ec != std::errc{} || ptr != text.data() + text.size() || !(x > 0) || x > max)
        throw ConfigError(fmt::format("--network {}: {} '{}': expected {}, more than 0 and at most {:g}", spec, part,
                                      text, what, max));
    return x;
}

}  // namespace

NcclSocketNet parse_socket_network(std::string_view spec) {
    const std::string usage = fmt::format(
        "--network {}: expected KIND:NxGBIT[:FLOW], e.g. ethernet:1x100 (one 100 Gb/s NIC per node) or "
        "aws:4x100:1.25; KIND is ethernet, aws or gcp",
        spec);
    const auto colon = spec.find(':');
    if (colon == std::string_view::npos) throw ConfigError(usage);
    const std::string_view kind = spec.substr(0, colon);
    const auto* k = std::find_if(std::begin(kSocketKinds), std::end(kSocketKinds),
                                 [&](const SocketKind& s) { return s.name == kind; });
    if (k == std::end(kSocketKinds))
        throw ConfigError(
            fmt::format("--network {}: unknown kind '{}': expected ethernet, aws (ENA) or gcp (gVNIC); "
                        "InfiniBand and RoCE are the presets' own networks (--inter-node-gbps)",
                        spec, kind));
    std::string_view rest = spec.substr(colon + 1);
    const auto colon2 = rest.find(':');
    const std::string_view nics = rest.substr(0, colon2);
    const auto x = nics.find('x');
    if (x == std::string_view::npos) throw ConfigError(usage);
    NcclSocketNet net;
    net.vendor = k->vendor;
    const double n = parse_positive(spec, "NIC count", nics.substr(0, x), 16, "a whole number of NICs per node");
    if (n != std::floor(n))
        throw ConfigError(
            fmt::format("--network {}: NIC count '{}': expected a whole number", spec, nics.substr(0, x)));
    net.nics = static_cast<int>(n);
    net.nic_gbps = parse_positive(spec, "NIC speed", nics.substr(x + 1), 3200, "Gb/s per NIC") / 8;
    net.flow_gbps = colon2 == std::string_view::npos
                        ? k->flow_gbps
                        : parse_positive(spec, "flow rate", rest.substr(colon2 + 1), 1e4, "GB/s per TCP flow");
    return net;
}

void use_socket_network(Calibration& c, const NcclSocketNet& net) {
    if (!c.nccl.present())
        throw ConfigError(
            fmt::format("--network: '{}' has no NCCL model to run over sockets (the NVIDIA SXM presets "
                        "have one: h100-sxm, h200-sxm, a100-sxm, a100-40gb, b200)",
                        c.name));
    // NCCL reads each NIC's speed from /sys/class/net/*/speed.
    const int channels = NcclSocketNet::kChannelsPerNic * net.nics;  // nics <= 16 (MAX_IFS): at most 32 of NCCL's 64
    for (NcclGraph* g : {&c.nccl.ring_nodes, &c.nccl.tree_nodes})
        *g = NcclGraph{channels, net.channel_gbps(), net.channel_gbps()};
    c.nccl.channels_nodes = channels;
    c.nccl.nic_near_gpu = false;
    c.nccl.socket = net;
    c.nccl.nvls_nodes = {};  // NVLSTree's graph over sockets is not worked out: dtsim leaves it out
}

void use_inter_node_bandwidth(Calibration& c, double gbps_per_gpu, std::string_view hardware) {
    if (!(gbps_per_gpu > 0) || gbps_per_gpu > 1e6)
        throw ConfigError(
            fmt::format("--inter-node-gbps {}: expected a bus bandwidth per GPU in GB/s, more than 0 and at most 1e6",
                        gbps_per_gpu));
    bool any = false;
    for (auto& curve : c.collectives) {
        if (curve.scope != LinkScope::inter_node) continue;
        curve.bus_bw_gbps = gbps_per_gpu;
        curve.points.clear();  // measured at another bandwidth
        any = true;
    }
    if (c.nccl.present()) {
        // NCCL's multi-node graphs: one NIC per GPU, so a node's channels
        // together carry the GPUs' bandwidth (8 x 400G NDR: 8 x 48 GB/s).
        for (NcclGraph* g : {&c.nccl.ring_nodes, &c.nccl.tree_nodes})
            g->bw_intra_gbps = g->bw_inter_gbps = gbps_per_gpu * c.gpus_per_node / g->channels;
        // NVLSTree's channels, one per NIC, run at the NIC's rate. Inside the
        // node the search starts from the same speed and settles at 8 x 40 on
        // NVLink 4 (docs/notes/nccl-tuning.md §1.1.1), so the slower of the two.
        if (NcclGraph& g = c.nccl.nvls_nodes; g.channels > 0) {
            g.bw_inter_gbps = gbps_per_gpu * c.gpus_per_node / g.channels;
            g.bw_intra_gbps = std::min(kNvlsTreeIntraGbps, g.bw_inter_gbps);
        }
        any = true;
    }
    if (!any)
        throw ConfigError(
            fmt::format("--inter-node-gbps: '{}' has no inter-node collective curves to change; "
                        "use a preset or a calibration measured across nodes",
                        hardware));
}

std::string describe(const NcclSocketNet& net) {
    const auto* k = std::find_if(std::begin(kSocketKinds), std::end(kSocketKinds),
                                 [&](const SocketKind& s) { return s.vendor == net.vendor; });
    return fmt::format("{} x {:g} Gb/s {} NIC{} per node, NCCL over TCP sockets at {:g} GB/s per flow", net.nics,
                       net.nic_gbps * 8, k->nic, net.nics > 1 ? "s" : "", net.flow_gbps);
}

}  // namespace dtsim::calib
