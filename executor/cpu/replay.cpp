// Replay mode's work units: each task's ops at their shapes on scratch buffers.
#include "cpu_backend.hpp"

#include "../replayed_ops.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/runtime/cpu_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace dtsim::executor::cpu {
namespace {

using runtime::copy_pass;
using runtime::memory_pass;
using sim::TaskKind;
constexpr std::int64_t kIoChunkBytes = 8 * 1024 * 1024;

std::int64_t floats_of(std::int64_t bytes) {
    return std::max<std::int64_t>(1, bytes / 4);
}

void grow(runtime::Floats& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.assign(static_cast<std::size_t>(n), 0.5f);
}

// The op's GEMM with its layout's transposes, as torch hands them to the BLAS.
void gemm(const models::Op& op, Scratch& s) {
    if (op.m <= 0 || op.n <= 0 || op.k <= 0) return;
    for (std::int64_t b = 0; b < op.batch; ++b)
        runtime::sgemm(op.layout, op.m, op.n, op.k, s.a.data(), s.b.data(), s.c.data());
}

void spin(std::int64_t ns) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
    while (std::chrono::steady_clock::now() < until) {
    }
}

void file_io(const sim::Task& t, Scratch& s) {
    const bool write = t.transfer == sim::Transfer::nvme_write;
    std::FILE* f = std::fopen(s.file.c_str(), write ? "r+b" : "rb");
    if (f == nullptr) throw Error(fmt::format("cannot open the executor's I/O file {}", s.file));
    const auto chunk = std::min<std::int64_t>(kIoChunkBytes, static_cast<std::int64_t>(s.mem.size()) * 4);
    for (std::int64_t left = t.bytes; left > 0;) {
        const auto n = static_cast<std::size_t>(std::min(chunk, left));
        const std::size_t done = write ? std::fwrite(s.mem.data(), 1, n, f) : std::fread(s.mem.data(), 1, n, f);
        if (done != n) {
            const int err = errno;
            std::fclose(f);
            throw Error(fmt::format("{} failed on the executor's I/O file {}: {}", write ? "writing" : "reading",
                                    s.file, err != 0 ? std::strerror(err) : "end of file"));
        }
        left -= static_cast<std::int64_t>(n);
    }
    // A full disk often shows only when the buffered bytes reach it.
    const bool flushed = !write || std::fflush(f) == 0;
    const int err = errno;
    if (std::fclose(f) != 0 || !flushed)
        throw Error(fmt::format("writing the executor's I/O file {} failed: {}", s.file, std::strerror(err)));
}

}  // namespace

CollectiveCall collective_call(const sim::Task& t) {
    DTSIM_ASSERT(t.kind == TaskKind::collective, "a collective task");
    const bool half = t.collective == calib::CollectiveKind::allreduce && t.dtype == DType::fp16;
    return {t.collective, half, half ? std::max<std::int64_t>(1, t.bytes / 2) : floats_of(t.bytes)};
}

void size_scratch(Scratch& s, const sim::Plan& plan, const models::Workload& w, int stream, int world,
                  const std::string& file) {
    std::int64_t a = 0, b = 0, c = 0, mem = 0, comm = 0, comm_out = 0, io = 0;
    for (const auto& t : plan.tasks) {
        if (t.stream != stream) continue;
        switch (t.kind) {
            case TaskKind::compute:
                if (const auto* ops = ops_of(w, t))
                    for (const auto& op : *ops)
                        if (op.kind == models::OpKind::gemm) {
                            a = std::max(a, op.m * op.k);
                            b = std::max(b, op.k * op.n);
                            c = std::max(c, op.m * op.n);
                        }
                mem = std::max(mem, memory_pass_bytes(w, t) / 4);
                break;
            case TaskKind::collective: {
                const std::int64_t n = floats_of(t.bytes);
                if (n > std::numeric_limits<int>::max())
                    throw ConfigError(
                        fmt::format("a {} of {} bytes exceeds one MPI call's count; the CPU executor cannot replay it.",
                                    to_string(t.collective), t.bytes));
                comm = std::max(comm, n + world);
                comm_out = std::max(comm_out, n / world + 1);
                break;
            }
            case TaskKind::copy: mem = std::max(mem, t.bytes / 4); break;
            case TaskKind::host_compute: mem = std::max(mem, 4 * t.elements); break;
            case TaskKind::io:
                mem = std::max(mem, kIoChunkBytes / 4);
                io = std::max(io, t.bytes);
                break;
        }
    }
    grow(s.a, a);
    grow(s.b, b);
    grow(s.c, c);
    grow(s.mem, std::min(std::max<std::int64_t>(mem, 0), runtime::memory_pass_scratch_bytes() / 4));
    grow(s.comm, comm);
    grow(s.comm_out, comm_out);
    if (io > 0) {
        // Reads need a file that holds their bytes; writes overwrite it from the start.
        s.file = file;
        std::FILE* f = std::fopen(file.c_str(), "wb");
        if (f == nullptr)
            throw Error(fmt::format("cannot create the executor's I/O file {}: {}", file, std::strerror(errno)));
        std::vector<char> zeros(static_cast<std::size_t>(std::min(io, kIoChunkBytes)), 0);
        bool ok = true;
        for (std::int64_t left = io; left > 0 && ok;) {
            const auto n =
                static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(zeros.size())));
            ok = std::fwrite(zeros.data(), 1, n, f) == n;
            left -= static_cast<std::int64_t>(n);
        }
        ok = std::fflush(f) == 0 && ok;
        const int err = errno;
        ok = std::fclose(f) == 0 && ok;
        if (!ok) {
            std::remove(file.c_str());
            throw Error(fmt::format("cannot write the executor's {:.1f} MiB I/O file {}: {}",
                                    static_cast<double>(io) / (1 << 20), file, std::strerror(err)));
        }
        s.file_bytes = io;
    }
}

void release_scratch(Scratch& s) {
    if (!s.file.empty()) std::remove(s.file.c_str());
    s = Scratch{};
}

void replay_task(const sim::Plan& plan, const models::Workload& w, const sim::Task& t, Scratch& s,
                 runtime::Communicator* comm) {
    switch (t.kind) {
        case TaskKind::compute:
            if (const auto* ops = ops_of(w, t)) {
                for (std::size_t k = 0; k < ops->size(); ++k) {
                    const auto& op = (*ops)[k];
                    if (!replays_op(plan, t, k))
                        continue;
                    else if (op.kind == models::OpKind::gemm)
                        gemm(op, s);
                    else
                        memory_pass(op.bytes, s.mem);
                }
                if (t.phase == sim::Phase::backward) memory_pass(t.bytes, s.mem);  // fused bucket copies
            } else if (t.phase == sim::Phase::optimizer) {
                runtime::update_pass(t.bytes, s.mem);  // parameters and states updated where they lie
            } else {
                memory_pass(t.bytes, s.mem);
            }
            return;
        case TaskKind::collective: {
            DTSIM_ASSERT(comm != nullptr, "a collective runs on its group's communicator");
            const CollectiveCall call = collective_call(t);
            const std::int64_t count = call.count;
            const std::int64_t per_rank = std::max<std::int64_t>(1, count / comm->size());
            float* data = s.comm.data();
            if (call.half) {
                // The scratch holds the task's bytes (size_scratch): as halves, twice as many elements.
                static_assert(sizeof(runtime::Half) == 2);
                comm->allreduce_sum(reinterpret_cast<runtime::Half*>(data), count);
                return;
            }
            switch (call.kind) {
                case calib::CollectiveKind::allreduce: comm->allreduce_sum(data, count); break;
                case calib::CollectiveKind::reduce_scatter:
                    comm->reduce_scatter_sum(data, s.comm_out.data(), per_rank);
                    break;
                case calib::CollectiveKind::allgather:
                    comm->allgather(data + comm->rank() * per_rank, data, per_rank);
                    break;
                case calib::CollectiveKind::broadcast: comm->broadcast(data, count, 0); break;
                case calib::CollectiveKind::reduce: comm->reduce_sum(data, data, count, 0); break;
            }
            return;
        }
        case TaskKind::copy: copy_pass(t.bytes, s.mem); return;
        case TaskKind::host_compute:
            if (t.elements > 0) runtime::adam_pass(t.elements, s.mem);
            if (t.fixed_ns > 0) spin(t.fixed_ns);
            return;
        case TaskKind::io: file_io(t, s); return;
    }
}

}  // namespace dtsim::executor::cpu
