// CUPTI activity records (CUDA backend): kernels and memcpys as our own plain
// records, so that everything past the conversion is testable without a GPU.
// The conversion itself is tested on synthetic CUPTI structs (see
// tests/profiler/test_cuda_backend.cpp). Compiled only with the CUDA toolkit.
#pragma once

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dtsim::profiler::cuda {

// The record versions this toolkit's CUPTI delivers (CUDA 13: Kernel10,
// Memcpy6). Newer toolkits bump these; to_record reads only fields every
// version has.
using CuptiKernelRecord = CUpti_ActivityKernel10;
using CuptiMemcpyRecord = CUpti_ActivityMemcpy6;

enum class ActivityKind : std::uint8_t { kernel, memcpy };

struct ActivityRecord {
    ActivityKind kind = ActivityKind::kernel;
    std::string name;  // kernel name (mangled, as CUPTI gives it) or "Memcpy HtoD (Pinned -> Device)"
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::uint32_t stream = 0;
    std::uint64_t bytes = 0;  // memcpy only
    std::uint32_t correlation = 0;
    double duration_us() const { return end_ns > start_ns ? static_cast<double>(end_ns - start_ns) / 1e3 : 0.0; }
};

struct ActivitySummary {
    int kernels = 0;
    int memcpys = 0;
    double kernel_us = 0;  // sum of kernel durations
    double memcpy_us = 0;  // sum of memcpy durations
    std::uint64_t memcpy_bytes = 0;
    double span_us = 0;  // first start to last end over all records
};

// Pure: sums durations per kind.
ActivitySummary summarize_activity(std::span<const ActivityRecord> records);

// One CUPTI record -> ours; nullopt for kinds we do not collect (or null).
std::optional<ActivityRecord> to_record(const CUpti_Activity* activity);

// Every record in a completed CUPTI buffer (walked with cuptiActivityGetNextRecord).
std::vector<ActivityRecord> records_in_buffer(std::uint8_t* buffer, std::size_t valid_bytes);

// "Memcpy HtoD (Pinned -> Device)", as Kineto names copies.
std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind);

// Collects kernel and memcpy records process-wide between start() and stop().
// One collector at a time (CUPTI's buffer callbacks are global).
class ActivityCollector {
public:
    ActivityCollector() = default;
    ~ActivityCollector();
    ActivityCollector(const ActivityCollector&) = delete;
    ActivityCollector& operator=(const ActivityCollector&) = delete;

    // Enables CONCURRENT_KERNEL and MEMCPY activity. Returns an error message,
    // empty on success.
    std::string start();
    // Flushes CUPTI's buffers, disables collection and returns the records
    // completed since start(), sorted by start time.
    std::vector<ActivityRecord> stop();
    // Flushes and returns the records so far, leaving collection on.
    std::vector<ActivityRecord> flush();
    bool running() const { return running_; }

private:
    bool running_ = false;
};

}  // namespace dtsim::profiler::cuda
