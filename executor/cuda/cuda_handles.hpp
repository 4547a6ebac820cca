// Owning handles for the CUDA executor's resources: device and host buffers,
// streams, events and a cuBLAS handle. Creation failures throw (DTSIM_CUDA_CHECK);
// release errors are ignored, as destructors must not throw.
#pragma once

#include "cuda_check.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace dtsim::executor::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
        if (bytes > 0) DTSIM_CUDA_CHECK(cudaMalloc(&p_, bytes));
    }
    ~DeviceBuffer() {
        if (p_) cudaFree(p_);
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(p_, o.p_);
        std::swap(bytes_, o.bytes_);
        return *this;
    }
    void* get() const { return p_; }
    std::size_t bytes() const { return bytes_; }

private:
    void* p_ = nullptr;
    std::size_t bytes_ = 0;
};

// Page-locked (cudaMallocHost) or ordinary pageable host memory, as the Plan's
// copies say: the two copy at different speeds.
class HostBuffer {
public:
    HostBuffer() = default;
    HostBuffer(std::size_t bytes, bool pinned) : pinned_(pinned), bytes_(bytes) {
        if (bytes == 0) return;
        if (pinned) {
            DTSIM_CUDA_CHECK(cudaMallocHost(&p_, bytes));
        } else {
            pageable_.assign(bytes, 1);
            p_ = pageable_.data();
        }
    }
    ~HostBuffer() {
        if (pinned_ && p_) cudaFreeHost(p_);
    }
    HostBuffer(HostBuffer&& o) noexcept
        : pinned_(o.pinned_),
          p_(std::exchange(o.p_, nullptr)),
          bytes_(std::exchange(o.bytes_, 0)),
          pageable_(std::move(o.pageable_)) {}
    HostBuffer& operator=(HostBuffer&& o) noexcept {
        std::swap(pinned_, o.pinned_);
        std::swap(p_, o.p_);
        std::swap(bytes_, o.bytes_);
        std::swap(pageable_, o.pageable_);
        return *this;
    }
    void* get() const { return p_; }
    std::size_t bytes() const { return bytes_; }

private:
    bool pinned_ = false;
    void* p_ = nullptr;
    std::size_t bytes_ = 0;
    std::vector<unsigned char> pageable_;
};

class Stream {
public:
    Stream() { DTSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~Stream() {
        if (s_) cudaStreamDestroy(s_);
    }
    Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    Stream& operator=(Stream&& o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }
    cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

// With timing: events both order streams and time tasks (the fallback to CUPTI).
class Event {
public:
    Event() { DTSIM_CUDA_CHECK(cudaEventCreate(&e_)); }
    ~Event() {
        if (e_) cudaEventDestroy(e_);
    }
    Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
        std::swap(e_, o.e_);
        return *this;
    }
    cudaEvent_t get() const { return e_; }

private:
    cudaEvent_t e_ = nullptr;
};

class CublasHandle {
public:
    CublasHandle() { DTSIM_CUDA_CHECK(cublasCreate(&h_)); }
    ~CublasHandle() {
        if (h_) cublasDestroy(h_);
    }
    CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    CublasHandle& operator=(CublasHandle&& o) noexcept {
        std::swap(h_, o.h_);
        return *this;
    }
    cublasHandle_t get() const { return h_; }

private:
    cublasHandle_t h_ = nullptr;
};

}  // namespace dtsim::executor::cuda
