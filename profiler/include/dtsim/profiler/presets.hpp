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

}  // namespace dtsim::calib
