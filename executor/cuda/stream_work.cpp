// Replay work of one Plan stream on the GPU (cuda_backend.hpp): the CPU
// backend's replay (executor/cpu/replay.cpp) with cuBLAS, memory-pass kernels,
// NCCL and cudaMemcpyAsync in place of OpenBLAS, loops, MPI and memcpy.
#include "cuda_backend.hpp"

#include "../replayed_ops.hpp"

#include "device_kernels.hpp"
#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace dtsim::executor::cuda {
namespace {

using sim::TaskKind;

// Caps that keep scratch bounded yet larger than any GPU's L2 cache, so passes
// and copies stream from HBM as the real ones do: larger work loops over them.
constexpr std::int64_t kMemScratchBytes = 256LL << 20;
constexpr std::int64_t kCopyChunkBytes = 256LL << 20;
// A batched GEMM runs as one strided-batched call when each operand fits in this.
constexpr std::int64_t kBatchedOperandBytes = 512LL << 20;

bool batched_fits(const models::Op& op, std::int64_t elem) {
    const std::int64_t limit = kBatchedOperandBytes / elem;
    return op.batch > 1 && op.m * op.k <= limit / op.batch && op.k * op.n <= limit / op.batch &&
           op.m * op.n <= limit / op.batch;
}

int to_int(std::int64_t v, const char* what) {
    if (v > std::numeric_limits<int>::max())
        throw ConfigError(
            fmt::format("a GEMM's {} = {} exceeds cuBLAS' int range; the CUDA executor cannot replay it.", what, v));
    return static_cast<int>(v);
}

std::uint32_t half_pattern(DType t) {
    // 0.5 in each element, for memory passes, collectives and copies, where the
    // values do not change the speed.
    switch (t) {
        case DType::fp32: return 0x3F000000u;
        case DType::bf16: return 0x3F003F00u;
        case DType::fp16: return 0x38003800u;
    }
    return 0;
}

FillFormat fill_format(DType t) {
    switch (t) {
        case DType::fp32: return FillFormat::fp32;
        case DType::bf16: return FillFormat::bf16;
        case DType::fp16: return FillFormat::fp16;
    }
    return FillFormat::fp32;
}

// GEMM operands: random values in the GEMM's dtype, as a model's tensors are.
DeviceBuffer random_filled(std::int64_t bytes, DType t, std::uint32_t seed) {
    const auto words = static_cast<std::size_t>((std::max<std::int64_t>(bytes, 0) + 3) / 4);
    DeviceBuffer b(words * 4);
    DTSIM_CUDA_CHECK(launch_fill_random(b.get(), words, fill_format(t), seed, nullptr));
    return b;
}

DeviceBuffer filled(std::int64_t bytes, std::uint32_t pattern) {
    const auto words = static_cast<std::size_t>((std::max<std::int64_t>(bytes, 0) + 3) / 4);
    DeviceBuffer b(words * 4);
    DTSIM_CUDA_CHECK(launch_fill_words(b.get(), words, pattern, nullptr));
    return b;
}

}  // namespace

bool is_host_task(const sim::Task& t) {
    return t.kind == TaskKind::host_compute || t.kind == TaskKind::io;
}

StreamWork::StreamWork(const sim::Plan& plan, const models::Workload& w, int stream, DType gemm_dtype, int world,
                       const std::string& io_file)
    : plan_(&plan), w_(&w), dtype_(gemm_dtype) {
    const std::int64_t elem = dtype_bytes(gemm_dtype);
    std::int64_t a = 0, b = 0, c = 0, mem = 0, comm = 0, copy = 0;
    bool gpu = false, compute = false, host = false, pinned = false, pageable = false;
    for (const auto& t : plan.tasks) {
        if (t.stream != stream) continue;
        if (is_host_task(t)) {
            host = true;
            continue;
        }
        gpu = true;
        switch (t.kind) {
            case TaskKind::compute:
                compute = true;
                if (const auto* ops = ops_of(w, t))
                    for (const auto& op : *ops) {
                        if (op.kind != models::OpKind::gemm || op.m <= 0 || op.n <= 0 || op.k <= 0) continue;
                        const std::int64_t batch = batched_fits(op, elem) ? op.batch : 1;
                        a = std::max(a, op.m * op.k * batch);
                        b = std::max(b, op.k * op.n * batch);
                        c = std::max(c, op.m * op.n * batch);
                    }
                mem = std::max(mem, memory_pass_bytes(w, t));
                break;
            case TaskKind::collective:
                comm = std::max(comm, 4 * (std::max<std::int64_t>(1, t.bytes / 4) + world));
                break;
            case TaskKind::copy:
                copy = std::max(copy, t.bytes);
                (t.pinned ? pinned : pageable) = true;
                break;
            case TaskKind::host_compute:
            case TaskKind::io: break;
        }
    }
    if (gpu) stream_.emplace();
    if (compute) {
        cublas_.emplace();
        DTSIM_CUDA_CHECK(cublasSetStream(cublas_->get(), stream_->get()));
    }
    a_ = random_filled(a * elem, gemm_dtype, 1);
    b_ = random_filled(b * elem, gemm_dtype, 2);
    c_ = DeviceBuffer(static_cast<std::size_t>(c * elem));
    c_elems_ = static_cast<std::size_t>(c);
    mem_floats_ = static_cast<std::size_t>(std::min(mem, kMemScratchBytes) / 4);
    if (mem > 0) mem_floats_ = std::max<std::size_t>(mem_floats_, 2);
    mem_ = filled(static_cast<std::int64_t>(mem_floats_) * 4, half_pattern(DType::fp32));
    comm_ = filled(comm, half_pattern(DType::fp32));
    const std::int64_t chunk = (std::min(copy, kCopyChunkBytes) + 3) / 4 * 4;  // as filled() rounds
    copy_dev_ = filled(chunk, half_pattern(DType::fp32));
    if (pinned) copy_pinned_ = HostBuffer(static_cast<std::size_t>(chunk), true);
    if (pageable) copy_pageable_ = HostBuffer(static_cast<std::size_t>(chunk), false);
    DTSIM_CUDA_CHECK(cudaDeviceSynchronize());  // the fills, on the legacy stream
    if (host) {
        host_ = std::make_unique<cpu::Scratch>();
        cpu::size_scratch(*host_, plan, w, stream, world, io_file);
    }
}

StreamWork::~StreamWork() {
    if (host_) cpu::release_scratch(*host_);
}

StreamWork::StreamWork(StreamWork&&) noexcept = default;

bool StreamWork::enqueue(const sim::Task& t, ncclComm_t comm) {
    switch (t.kind) {
        case TaskKind::compute: {
            bool launched = false;
            if (const auto* ops = ops_of(*w_, t)) {
                for (std::size_t k = 0; k < ops->size(); ++k) {
                    const auto& op = (*ops)[k];
                    if (!replays_op(*plan_, t, k)) continue;
                    launched = (op.kind == models::OpKind::gemm ? gemm(op) : memory_pass(op.bytes)) || launched;
                }
                if (t.phase == sim::Phase::backward)
                    launched = memory_pass(t.bytes) || launched;  // fused bucket copies
            } else {
                launched = memory_pass(t.bytes);
            }
            return launched;
        }
        case TaskKind::collective: collective(t, comm); return false;
        case TaskKind::copy: return copy(t);
        case TaskKind::host_compute:
        case TaskKind::io: break;
    }
    throw InternalError("StreamWork::enqueue: a host task belongs on a host thread");
}

void StreamWork::run_host(const sim::Task& t) {
    DTSIM_ASSERT(host_ != nullptr, "a host task on a stream sized without host tasks");
    cpu::replay_task(*plan_, *w_, t, *host_, nullptr);
}

// C = A * B, column-major m x k times k x n, as the profiler's GEMM benchmark.
bool StreamWork::gemm(const models::Op& op) {
    if (op.m <= 0 || op.n <= 0 || op.k <= 0 || op.batch <= 0) return false;
    const int m = to_int(op.m, "m"), n = to_int(op.n, "n"), k = to_int(op.k, "k");
    const std::int64_t elem = dtype_bytes(dtype_);
    const bool batched = batched_fits(op, elem) && static_cast<std::size_t>(op.m * op.n * op.batch) <= c_elems_;
    const float alpha = 1.0f, beta = 0.0f;
    const cublasHandle_t h = cublas_->get();
    if (dtype_ == DType::fp32) {
        const auto* a = static_cast<const float*>(a_.get());
        const auto* b = static_cast<const float*>(b_.get());
        auto* c = static_cast<float*>(c_.get());
        if (batched) {
            DTSIM_CUDA_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, op.m * op.k,
                                                       b, k, op.k * op.n, &beta, c, m, op.m * op.n,
                                                       to_int(op.batch, "batch")));
        } else {
            for (std::int64_t i = 0; i < op.batch; ++i)
                DTSIM_CUDA_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a, m, b, k, &beta, c, m));
        }
        return true;
    }
    const cudaDataType type = dtype_ == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    if (batched) {
        DTSIM_CUDA_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a_.get(), type, m,
                                                    op.m * op.k, b_.get(), type, k, op.k * op.n, &beta, c_.get(), type,
                                                    m, op.m * op.n, to_int(op.batch, "batch"), CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT));
    } else {
        for (std::int64_t i = 0; i < op.batch; ++i)
            DTSIM_CUDA_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a_.get(), type, m, b_.get(),
                                          type, k, &beta, c_.get(), type, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    return true;
}

bool StreamWork::memory_pass(std::int64_t bytes) {
    const std::size_t half = mem_floats_ / 2;
    if (half == 0 || bytes <= 0) return false;
    // Read n floats, write n floats: 8 bytes per element.
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(1, bytes / 8));
    DTSIM_CUDA_CHECK(launch_memory_pass(static_cast<float*>(mem_.get()), half, n, stream_->get()));
    return true;
}

// bytes/4 floats, summed, root 0, in place, as the CPU backend's MPI replay.
void StreamWork::collective(const sim::Task& t, ncclComm_t comm) {
    if (comm == nullptr)
        throw InternalError(fmt::format("no NCCL communicator for stream {} group {}", t.stream, t.group));
    int ranks = 1, rank = 0;
    DTSIM_CUDA_CHECK(ncclCommCount(comm, &ranks));
    DTSIM_CUDA_CHECK(ncclCommUserRank(comm, &rank));
    const auto count = static_cast<std::size_t>(std::max<std::int64_t>(1, t.bytes / 4));
    const std::size_t per_rank = std::max<std::size_t>(1, count / static_cast<std::size_t>(ranks));
    float* buf = static_cast<float*>(comm_.get());
    float* mine = buf + static_cast<std::size_t>(rank) * per_rank;
    const cudaStream_t s = stream_->get();
    switch (t.collective) {
        case calib::CollectiveKind::allreduce:
            DTSIM_CUDA_CHECK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, s));
            return;
        case calib::CollectiveKind::reduce_scatter:
            DTSIM_CUDA_CHECK(ncclReduceScatter(buf, mine, per_rank, ncclFloat, ncclSum, comm, s));
            return;
        case calib::CollectiveKind::allgather:
            DTSIM_CUDA_CHECK(ncclAllGather(mine, buf, per_rank, ncclFloat, comm, s));
            return;
        case calib::CollectiveKind::broadcast:
            DTSIM_CUDA_CHECK(ncclBroadcast(buf, buf, count, ncclFloat, 0, comm, s));
            return;
        case calib::CollectiveKind::reduce:
            DTSIM_CUDA_CHECK(ncclReduce(buf, buf, count, ncclFloat, ncclSum, 0, comm, s));
            return;
    }
}

// In chunks of at most kCopyChunkBytes, in the Plan's direction, against
// pinned or pageable memory as the task says.
bool StreamWork::copy(const sim::Task& t) {
    // Device to device copies one half of the buffer onto the other.
    const std::size_t chunk = t.transfer == sim::Transfer::none ? copy_dev_.bytes() / 2 : copy_dev_.bytes();
    if (t.bytes <= 0 || chunk == 0) return false;
    void* host = t.pinned ? copy_pinned_.get() : copy_pageable_.get();
    for (std::int64_t left = t.bytes; left > 0;) {
        const std::size_t n = std::min(chunk, static_cast<std::size_t>(left));
        switch (t.transfer) {
            case sim::Transfer::h2d:
            case sim::Transfer::nvme_read:
                DTSIM_CUDA_CHECK(cudaMemcpyAsync(copy_dev_.get(), host, n, cudaMemcpyHostToDevice, stream_->get()));
                break;
            case sim::Transfer::d2h:
            case sim::Transfer::nvme_write:
                DTSIM_CUDA_CHECK(cudaMemcpyAsync(host, copy_dev_.get(), n, cudaMemcpyDeviceToHost, stream_->get()));
                break;
            case sim::Transfer::none:
                DTSIM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(copy_dev_.get()) + chunk, copy_dev_.get(), n,
                                                 cudaMemcpyDeviceToDevice, stream_->get()));
                break;
        }
        left -= static_cast<std::int64_t>(n);
    }
    return true;
}

}  // namespace dtsim::executor::cuda
