// Messages of failed CUDA, cuBLAS, NCCL and CUPTI calls (cuda_check.hpp).
#include "cuda_check.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <filesystem>

namespace dtsim::executor::cuda {

std::string failure_message(cudaError_t e) {
    if (e == cudaSuccess) return {};
    return fmt::format("{}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
}

std::string failure_message(cublasStatus_t s) {
    if (s == CUBLAS_STATUS_SUCCESS) return {};
    return fmt::format("{}: {}", cublasGetStatusName(s), cublasGetStatusString(s));
}

std::string failure_message(ncclResult_t r) {
    if (r == ncclSuccess) return {};
    const char* last = ncclGetLastError(nullptr);
    return fmt::format("{}{}{}", ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}

std::string failure_message(CUptiResult r) {
    if (r == CUPTI_SUCCESS) return {};
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    return s ? s : "unknown CUPTI error";
}

void throw_call_failed(const char* call, const char* file, int line, const std::string& message) {
    throw Error(
        fmt::format("{} failed ({}:{}): {}", call, std::filesystem::path(file).filename().string(), line, message));
}

}  // namespace dtsim::executor::cuda
