// Status checks for the CUDA executor: every CUDA runtime, cuBLAS, NCCL and
// CUPTI call goes through DTSIM_CUDA_CHECK, which throws dtsim::Error with the
// call's text, file:line and the library's own message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <nccl.h>

#include <string>

namespace dtsim::executor::cuda {

// The library's message for a failed status; empty on success.
std::string failure_message(cudaError_t e);
std::string failure_message(cublasStatus_t s);
std::string failure_message(ncclResult_t r);
std::string failure_message(CUptiResult r);

[[noreturn]] void throw_call_failed(const char* call, const char* file, int line, const std::string& message);

template <class Status>
void check_call(Status status, const char* call, const char* file, int line) {
    if (std::string m = failure_message(status); !m.empty()) throw_call_failed(call, file, line, m);
}

}  // namespace dtsim::executor::cuda

#define DTSIM_CUDA_CHECK(call) ::dtsim::executor::cuda::check_call((call), #call, __FILE__, __LINE__)
