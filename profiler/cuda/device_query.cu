// The first CUDA translation unit of the profiler: queries the devices. It is
// compiled whenever the toolkit is found so the CUDA build never rots; at run
// time it reports "no device" cleanly on machines without a GPU.
#include "dtsim/profiler/cuda_devices.hpp"

#include <cuda_runtime.h>

#include <string>

namespace dtsim::calib::cuda {

DeviceQuery query_devices() {
    DeviceQuery q;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        q.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
        return q;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
        q.devices.push_back(
            {prop.name, static_cast<long long>(prop.totalGlobalMem), prop.major, prop.minor, prop.multiProcessorCount});
    }
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    q.runtime_version = runtime;
    return q;
}

}  // namespace dtsim::calib::cuda
