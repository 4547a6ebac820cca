// CUPTI activity collection: buffer callbacks, record conversion and the pure
// summary (cuda_activity.hpp).
#include "dtsim/profiler/cuda_activity.hpp"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

namespace dtsim::profiler::cuda {
namespace {

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kBufferAlign = 8;

// Records completed by CUPTI's worker thread, taken by stop()/flush().
std::mutex g_mutex;
std::vector<ActivityRecord> g_records;
bool g_callbacks_registered = false;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
    if (buffer && valid > 0) {
        auto records = records_in_buffer(buffer, valid);
        std::lock_guard lock(g_mutex);
        g_records.insert(g_records.end(), records.begin(), records.end());
    }
    std::free(buffer);
}

std::string cupti_error(const char* what, CUptiResult r) {
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    return std::string(what) + ": " + (s ? s : "unknown CUPTI error");
}

std::vector<ActivityRecord> take_records() {
    std::vector<ActivityRecord> out;
    {
        std::lock_guard lock(g_mutex);
        out.swap(g_records);
    }
    std::sort(out.begin(), out.end(),
              [](const ActivityRecord& a, const ActivityRecord& b) { return a.start_ns < b.start_ns; });
    return out;
}

}  // namespace

ActivitySummary summarize_activity(std::span<const ActivityRecord> records) {
    ActivitySummary s;
    std::uint64_t first = 0, last = 0;
    bool any = false;
    for (const auto& r : records) {
        if (r.kind == ActivityKind::kernel) {
            ++s.kernels;
            s.kernel_us += r.duration_us();
        } else {
            ++s.memcpys;
            s.memcpy_us += r.duration_us();
            s.memcpy_bytes += r.bytes;
        }
        if (!any || r.start_ns < first) first = r.start_ns;
        if (!any || r.end_ns > last) last = r.end_ns;
        any = true;
    }
    if (any && last > first) s.span_us = static_cast<double>(last - first) / 1e3;
    return s;
}

std::string memcpy_name(std::uint8_t copy_kind, std::uint8_t src_kind, std::uint8_t dst_kind) {
    static const char* const copies[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                         "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    static const char* const memories[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                           "Array",   "Managed",  "Device Static", "Managed Static"};
    auto copy = copy_kind < std::size(copies) ? copies[copy_kind] : "Unknown";
    auto src = src_kind < std::size(memories) ? memories[src_kind] : "Unknown";
    auto dst = dst_kind < std::size(memories) ? memories[dst_kind] : "Unknown";
    return std::string("Memcpy ") + copy + " (" + src + " -> " + dst + ")";
}

std::optional<ActivityRecord> to_record(const CUpti_Activity* activity) {
    if (!activity) return std::nullopt;
    ActivityRecord r;
    switch (activity->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const auto* k = reinterpret_cast<const CuptiKernelRecord*>(activity);
            r.kind = ActivityKind::kernel;
            r.name = k->name ? k->name : "";
            r.start_ns = k->start;
            r.end_ns = k->end;
            r.stream = k->streamId;
            r.correlation = k->correlationId;
            return r;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* m = reinterpret_cast<const CuptiMemcpyRecord*>(activity);
            r.kind = ActivityKind::memcpy;
            r.name = memcpy_name(m->copyKind, m->srcKind, m->dstKind);
            r.start_ns = m->start;
            r.end_ns = m->end;
            r.stream = m->streamId;
            r.bytes = m->bytes;
            r.correlation = m->correlationId;
            return r;
        }
        default: return std::nullopt;
    }
}

std::vector<ActivityRecord> records_in_buffer(std::uint8_t* buffer, std::size_t valid_bytes) {
    std::vector<ActivityRecord> out;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
        if (auto r = to_record(record)) out.push_back(std::move(*r));
    }
    return out;
}

ActivityCollector::~ActivityCollector() {
    if (running_) stop();
}

std::string ActivityCollector::start() {
    if (running_) return {};
    if (!g_callbacks_registered) {
        CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityRegisterCallbacks", r);
        g_callbacks_registered = true;
    }
    take_records();  // drop anything left from an earlier collection
    for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY}) {
        CUptiResult r = cuptiActivityEnable(kind);
        if (r != CUPTI_SUCCESS) {
            cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
            return cupti_error("cuptiActivityEnable", r);
        }
    }
    running_ = true;
    return {};
}

std::vector<ActivityRecord> ActivityCollector::flush() {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    return take_records();
}

std::vector<ActivityRecord> ActivityCollector::stop() {
    if (!running_) return {};
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    running_ = false;
    return take_records();
}

}  // namespace dtsim::profiler::cuda
