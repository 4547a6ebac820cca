// Calibration: the measured (or preset) costs the simulator prices tasks with.
// profiler/ writes it, everything else reads it. Plain data plus JSON I/O;
// pricing lives in sim/cost_model so this type stays a value.
#pragma once

#include "dtsim/common/dtype.hpp"
#include "dtsim/common/gemm_layout.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::calib {

inline constexpr int kCalibrationVersion = 1;

enum class CollectiveKind : std::uint8_t { allreduce, reduce_scatter, allgather, broadcast, reduce };
std::string_view to_string(CollectiveKind k);
CollectiveKind collective_kind_from_string(std::string_view s);  // throws ConfigError

// nccl-tests' bus-bandwidth factor (busbw = algbw * factor) and NCCL's ring
// step count (strategy-semantics.md §5.1-5.2); shared by fitting and pricing.
double busbw_factor(CollectiveKind kind, int n);
int ring_steps(CollectiveKind kind, int n);

// Inside one node (NVLink, shared memory) or across nodes (InfiniBand, TCP).
enum class LinkScope : std::uint8_t { intra_node, inter_node };
std::string_view to_string(LinkScope s);
LinkScope link_scope_from_string(std::string_view s);

// One measured collective: nccl-tests' `size` (total bytes S) and time.
struct CollectivePoint {
    std::int64_t size_bytes = 0;
    double time_us = 0;  // mean of the repeats (presets and imports: as published)
    double spread = 0;   // (p90 - p10) / median of the repeats; 0 when unknown
};

// Cost of one collective kind on one link for one group size. `points` are
// measurements (interpolated in log-log); latency and bus bandwidth are the
// fitted (or, for presets, published) alpha-beta line used outside the
// measured range: t = latency_us + steps * step_latency_us + S * busbw_factor / bus_bw.
struct CollectiveCurve {
    CollectiveKind kind = CollectiveKind::allreduce;
    LinkScope scope = LinkScope::intra_node;
    int group_size = 0;  // 0: valid for any group size (presets)
    double latency_us = 0;
    double step_latency_us = 0;
    double bus_bw_gbps = 0;
    double fit_error = 0;                 // relative RMS error of the fitted line over the points
    std::vector<CollectivePoint> points;  // sorted by size; may be empty
    // The element type measured. fp32 curves price every dtype without its own
    // curve (NCCL moves bytes at one rate whatever they hold); a 16-bit curve
    // exists where the reduction's arithmetic is not free: gloo sums fp16 on the
    // CPU element by element, 2-3x slower per byte than fp32.
    DType dtype = DType::fp32;
};

// GEMM efficiency by shape: efficiency = max_efficiency * prod_d d / (d + half_d)
// for d in (m, n, k): small dimensions cannot fill the machine.
struct GemmCurve {
    DType dtype = DType::fp32;
    double peak_tflops = 0;
    double max_efficiency = 0;
    double half_m = 0, half_n = 0, half_k = 0;
    double fit_error = 0;
    // GEMMs whose leading dimensions are not 16-byte multiples run slower
    // kernel families (cuBLAS on Hopper: cutlass_80 "align2" for 4-8 bytes,
    // Turing-era cutlass_75 "align1" for 2 bytes; bench/results/cuda.md §6):
    // their rate as a fraction of an aligned GEMM's. 1: no penalty (CPU BLAS,
    // or not measured).
    double align4_ratio = 1;  // 4- or 8-byte aligned
    double align2_ratio = 1;  // 2-byte aligned (odd bf16/fp16 dimensions)
    // The ratio of a kernel family (dtsim::gemm_alignment_class): 0 aligned.
    double alignment_ratio(int family) const { return family == 0 ? 1.0 : family == 1 ? align4_ratio : align2_ratio; }
    // The rate of the transposed layouts (dtsim::GemmLayout) as a fraction of
    // NN's, which the shape fit describes: nn.Linear's forward is NT and its
    // weight gradient TN. 1: as fast as NN (or not measured).
    double nt_ratio = 1;
    double tn_ratio = 1;
    double layout_ratio(GemmLayout l) const { return l == GemmLayout::nt ? nt_ratio : l == GemmLayout::tn ? tn_ratio : 1.0; }
};

// A measured GEMM; the cost model interpolates efficiency between these.
struct GemmPoint {
    DType dtype = DType::fp32;
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    double time_us = 0;  // mean of the repeats (presets and imports: as published)
    double spread = 0;   // (p90 - p10) / median of the repeats; 0 when unknown
    GemmLayout layout = GemmLayout::nn;  // the transposes it ran with
};

struct DeviceSpec {
    std::string name;
    std::int64_t memory_bytes = 0;
    // Not available to tensors: CUDA context, NCCL buffers, allocator slack.
    std::int64_t reserved_bytes = 0;
    double mem_bw_gbps = 0;             // peak memory bandwidth
    double elementwise_efficiency = 0;  // achieved / peak for streaming kernels
    double kernel_overhead_us = 0;      // per-kernel launch gap on the device
    // Elements per second of torch's non-vectorized elementwise kernels
    // (broadcast, strided or casting operands), which index-math, not memory,
    // bounds: the same on an H100 and an H200 (bench/results/cuda.md). 0: not
    // limiting (CPU backends, whose passes are bound by bandwidth).
    double indexed_elements_per_s = 0;
    // Bytes a second of an in-place update (an optimizer step: every byte it
    // writes it has read) over those of an out-of-place pass, both counted as
    // the Plan counts them (read + written). On a CPU a store to a line not in
    // cache reads the line first (write-allocate), so an out-of-place pass
    // moves a third more than it counts and an in-place one does not;
    // measured by calibrate on CPUs (1.5 if only that), 1 elsewhere.
    double in_place_speedup = 1.0;
};

struct HostSpec {
    double h2d_pinned_gbps = 0;
    double d2h_pinned_gbps = 0;
    double h2d_pageable_gbps = 0;
    double d2h_pageable_gbps = 0;
    double cpu_adam_params_per_s = 0;  // DeepSpeed CPUAdam-style update throughput per rank
    double nvme_read_gbps = 0;
    double nvme_write_gbps = 0;
    // torch.optim.Adam stepping on the CPU (FSDP CPU offload): no SIMD-fused kernel.
    double cpu_torch_adam_params_per_s = 0;
    // Memory fresh from the OS, first written (page faults and zeroing), beyond
    // a write of mapped memory. 0: not measured, or a device whose allocator
    // keeps its memory (CUDA's caching allocator): no cost.
    double first_touch_gbps = 0;
    // CPU ranks share their node's memory: mem_bw_gbps and first_touch_gbps
    // are each rank's rate with every rank of the node busy. The same two
    // measured by one rank alone, the node's other ranks idle (0: not
    // measured; GPUs, one rank a node). A run with fewer ranks per node than
    // the calibration gets more of each (sim::with_node_share).
    double mem_bw_one_rank_gbps = 0;
    double first_touch_one_rank_gbps = 0;
};

// How much concurrent work slows other work (>= 1): compute and collectives;
// compute and host-side tasks (copies, the CPU optimizer, file I/O). On a GPU
// node host work barely touches the GPU (1.0); on the CPU backend it takes
// the rank's core from compute.
struct OverlapSpec {
    double compute_slowdown_under_comm = 1.0;
    double comm_slowdown_under_compute = 1.0;
    double compute_slowdown_under_host = 1.0;
    double host_slowdown_under_compute = 1.0;
    // Ranks that compute the same work do not finish it together: a rank's
    // windows vary from sample to sample, and a collective starts when its
    // group's slowest rank arrives. `straggler` is E[the slowest of
    // `straggler_ranks` ranks' time for one window, all computing at once] /
    // E[one rank's], measured in lockstep (calibrate, on CPU ranks); 1 with
    // straggler_ranks 0: not measured (GPUs, presets), ranks arrive together.
    // sim::straggler_factor carries it to other group sizes.
    double straggler = 1.0;
    int straggler_ranks = 0;
};

struct Provenance {
    std::string source;   // "preset" or "measured"
    std::string machine;  // host name, or the datasheet the preset follows
    std::string date;
    std::string backend;  // "preset", "cpu-mpi-openblas", "cuda-nccl-cublas"
    int world_size = 0;
    std::string notes;
    // How the figures were sampled (profiler::describe(RepeatPolicy)); empty for presets.
    std::string sampling;
    // Over gloo: how its fp16 allreduce summed, "c10::Half" (torch 2.8 and later) or "gloo::float16" (earlier
    // torch); empty elsewhere, and in calibrations made before it was recorded (c10::Half).
    std::string half_sum;

    // What `backend` says, read in this one place (an imported table's
    // "+nccl-tests" suffix keeps both). Measured on CPU ranks: the model's
    // thread runs the layers and waits in synchronous collectives.
    bool host_ranks() const { return backend.starts_with("cpu-"); }
    // Its collectives ran over gloo, as torch's ProcessGroupGloo runs them.
    bool gloo_collectives() const { return backend.starts_with("cpu-gloo-"); }
    // The library that ran its collectives, as a timeline names their stream:
    // "gloo", "mpi" (other CPU calibrations) or "nccl" (GPUs and presets).
    std::string_view collective_library() const { return gloo_collectives() ? "gloo" : host_ranks() ? "mpi" : "nccl"; }
};

// One graph NCCL's topology search found (src/graph/search.cc): its channel
// count and each channel's bandwidth inside a node and across nodes, in GB/s.
struct NcclGraph {
    int channels = 0;
    double bw_intra_gbps = 0;
    double bw_inter_gbps = 0;
};

// NCCL's socket transport (src/transport/net_socket.cc): nodes joined by
// plain TCP, no InfiniBand or RoCE. NCCL picks its algorithm by the NICs'
// speed, but each channel's connection moves data over NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD TCP flows (one when both are unset on a generic NIC),
// and a single flow runs well below a fast NIC (docs/notes/nccl-tuning.md §3).
// The NIC as NCCL's auto-detection sees it (its PCI vendor): AWS ENA
// (0x1d0f), GCP gVNIC (0x1ae0), or any other.
enum class SocketNic : std::uint8_t { generic, aws, gcp };
struct NcclSocketNet {
    SocketNic vendor = SocketNic::generic;
    int nics = 0;          // NICs per node; 0: no socket network (RDMA, the graphs' own NICs)
    double nic_gbps = 0;   // each NIC's speed, GB/s (100 Gb/s = 12.5)
    double flow_gbps = 0;  // what one TCP flow sustains, GB/s (a calibration value)
    // NCCL's search puts two channels on each NIC (sjeaugey, nccl#438), each
    // at half its speed.
    static constexpr int kChannelsPerNic = 2;
    double channel_gbps() const { return nic_gbps / kChannelsPerNic; }
    bool present() const { return nics > 0; }
};

// What NCCL's own cost model (src/graph/tuning.cc, v2.30.7) needs to pick an
// algorithm and protocol per call: the graphs its search finds on this node
// shape and the facts its rules read (docs/notes/nccl-tuning.md). Where a
// calibration has it (the NVIDIA SXM presets, and calibrations made from
// them), collectives that no measured table covers are priced by that model
// over the whole group: tree and NVLS latency grows with log2 of the node
// count, a ring's linearly. `sm == 0`: none; the per-link curves apply.
struct NcclTopology {
    int sm = 0;                // the GPUs' compute capability x 10: 80 Ampere, 90 Hopper, 100 Blackwell
    bool amd_cpu = false;      // network overhead 2 us instead of 1, and lower LL caps across nodes
    bool nvlink = true;        // the GPUs of a node talk over NVLink (graph typeIntra NVL), else PCIe
    bool nvls = false;         // NVSwitch multicast (NVLink SHARP): the NVLS algorithms
    bool nic_near_gpu = true;  // the NIC is on the GPU's PCIe switch (typeInter <= PXN): LL128 across nodes
    NcclGraph ring_node, tree_node, nvls_node;  // one node
    NcclGraph ring_nodes, tree_nodes;           // more than one node
    // NVLSTree's graph across nodes: one channel per NIC, each headed by the
    // NIC's own GPU (search.cc ncclTopoSearchRecNet with the NVLS pattern).
    NcclGraph nvls_nodes;
    int channels_node = 0, channels_nodes = 0;  // channels launched (connect.cc ncclTopoPostset)
    // The GPUs per node the graphs describe, each with its own NIC. A job on
    // fewer GPUs of a node reaches only their NICs: the multi-node graphs keep
    // that share of their channels (an assumption; NCCL's search would say).
    int gpus_per_node = 8;
    NcclSocketNet socket;  // present: the nodes talk over NCCL's socket transport
    bool present() const { return sm > 0; }
};

struct Calibration {
    int version = kCalibrationVersion;
    std::string name;
    Provenance provenance;
    DeviceSpec device;
    int gpus_per_node = 0;  // node shape the intra-node data describes
    std::vector<GemmCurve> gemm_curves;
    std::vector<GemmPoint> gemm_points;
    std::vector<CollectiveCurve> collectives;
    HostSpec host;
    OverlapSpec overlap;
    NcclTopology nccl;

    const GemmCurve* gemm_curve(DType dtype) const;
    double peak_tflops(DType dtype) const;  // 0 when unknown
};

// JSON I/O. Reading validates every field and names the file and field on error.
std::string to_json_text(const Calibration& c);
Calibration calibration_from_json_text(const std::string& text, const std::string& file);
Calibration read_calibration(const std::string& path);
void write_calibration(const Calibration& c, const std::string& path);

}  // namespace dtsim::calib
