// What CUDA devices this machine has (CUDA backend; compiled only with the toolkit).
#pragma once

#include <string>
#include <vector>

namespace dtsim::calib::cuda {

struct DeviceInfo {
    std::string name;
    long long memory_bytes = 0;
    int compute_major = 0, compute_minor = 0;
    int sm_count = 0;
};

struct DeviceQuery {
    std::vector<DeviceInfo> devices;
    int runtime_version = 0;
    std::string error;  // non-empty when the runtime could not start (no driver, no GPU)
};

DeviceQuery query_devices();

}  // namespace dtsim::calib::cuda
