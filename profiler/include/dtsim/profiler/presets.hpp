// Built-in hardware presets from datasheets and published collective
// bandwidths, so a first run needs no calibration. Labelled as presets.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace dtsim::calib {

// A preset's datasheet: what `dtsim hardware` shows. Dense peaks (no 2:4
// sparsity), decimal units, per GPU; 0: the GPU has no such unit.
struct Datasheet {
    std::string device;
    int gpus_per_node = 8;
    std::int64_t memory_bytes = 0;  // as nvidia-smi / rocm-smi reports it
    double mem_bw_gbps = 0;
    double fp64_tflops = 0, fp32_tflops = 0, tf32_tflops = 0, bf16_tflops = 0, fp8_tflops = 0, fp4_tflops = 0;
    std::string gpu_link;              // e.g. "NVLink 4, 450 GB/s per direction (NVSwitch)"
    double intra_node_busbw_gbps = 0;  // 8-GPU allreduce bus bandwidth, ring (nccl-tests / rccl-tests)
    std::string network;               // per GPU, e.g. "400 Gb/s InfiniBand NDR"
    double network_gbps = 0;           // per GPU, GB/s
    std::string library = "NCCL";      // the collective library: NCCL, or RCCL
    std::string sources;               // where each figure comes from; [E] marks estimates
};

struct PresetInfo {
    std::string name;
    std::string description;
    Datasheet sheet;
};

std::vector<PresetInfo> list_presets();

// A preset by name, or a calibration JSON file when `name_or_path` ends in
// .json or names an existing file. Unknown names list the valid presets.
// `option`: the command-line option that named it, for the error message.
Calibration load_hardware(const std::string& name_or_path, std::string_view option = "--hardware");

// `--network KIND:NxGBIT[:FLOW]`: the nodes talk over NCCL's socket transport
// (TCP, no InfiniBand or RoCE) through N NICs of GBIT Gb/s each per node;
// KIND is the NIC NCCL's auto-detection sees (ethernet, aws for ENA, gcp for
// gVNIC) and FLOW what one TCP flow sustains in GB/s (default: the kind's,
// see kSocketFlowGbps). Throws ConfigError naming the option and the part.
NcclSocketNet parse_socket_network(std::string_view spec);
// Replaces the calibration's multi-node NCCL graphs with that network's: two
// channels per NIC (NCCL's search), each at half its NIC, and no LL128 across
// nodes (the NIC sits behind the CPU). Throws ConfigError where the
// calibration has no NCCL model to apply it to.
void use_socket_network(Calibration& c, const NcclSocketNet& net);
// A one-line description: "1 x 100 Gb/s Ethernet NIC per node, NCCL over TCP
// sockets at 1.25 GB/s per flow".
std::string describe(const NcclSocketNet& net);
// `--inter-node-gbps`: the network between nodes carries `gbps_per_gpu` GB/s of
// bus bandwidth per GPU (a node's NICs together: gbps_per_gpu x GPUs per node).
// Replaces the inter-node collective curves (and drops their measured points)
// and the bandwidth of NCCL's multi-node graphs, one NIC per GPU; NVLSTree's
// graph runs at that rate across nodes and at most 40 GB/s inside. Throws
// ConfigError for a bandwidth outside (0, 1e6] or a calibration with nothing
// across nodes to change (naming it as `hardware`, as the user gave it).
void use_inter_node_bandwidth(Calibration& c, double gbps_per_gpu, std::string_view hardware);

}  // namespace dtsim::calib
