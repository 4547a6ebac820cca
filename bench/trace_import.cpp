// trace_import: how fast read_trace reads a large Kineto-like trace, and how
// much memory it needs for it.
//
//   trace_import [--size-mb N] [--dir DIR] [--keep]
//
// Writes a synthetic Kineto GPU trace of about N MB (default 1024) into DIR
// (default /tmp): per op a cpu_op with Kineto's record_shapes args, a
// cudaLaunchKernel, its kernel with Kineto's dozen kernel args, the ac2g flow
// pair linking them, ProfilerStep#N annotations every 400 ops and an NCCL
// allreduce with record_param_comms metadata every 50 ops, written with
// Kineto's indentation. Then times read_trace on it (one thread) and prints
// MB/s (by wall time, and by CPU time, which is what one core does when
// the machine is shared) and the process's peak RSS (getrusage ru_maxrss) as a fraction of the
// file size. Targets: >= 200 MB/s, peak RSS <= 0.25 x file size.
#include "dtsim/traces/trace_reader.hpp"

#include <fmt/format.h>

#include <sys/resource.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

namespace {

struct Options {
    std::uint64_t size_bytes = 1024ull * 1000 * 1000;
    std::string dir = "/tmp";
    bool keep = false;
};

std::string fmt_us(std::int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

// Writes the trace; returns its size in bytes.
std::uint64_t write_trace(const std::string& path, std::uint64_t target_bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot write " + path);
    std::uint64_t written = 0;
    std::string buf;
    const auto flush = [&] {
        std::fwrite(buf.data(), 1, buf.size(), f);
        written += buf.size();
        buf.clear();
    };
    buf += R"J({
  "schemaVersion": 1,
  "deviceProperties": [
    {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045231616, "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132}
  ],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8, "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 8, "ranks": [0, 1, 2, 3, 4, 5, 6, 7]}], "nccl_version": "2.21.5"},
  "baseTimeNanoseconds": 1700000000000000000,
  "traceEvents": [
  {
    "ph": "M", "name": "process_name", "pid": 4242, "tid": 0,
    "args": {"name": "python"}
  },
  {
    "ph": "M", "name": "thread_name", "pid": 0, "tid": 7,
    "args": {"name": "stream 7"}
  })J";
    static const char* kKernels[] = {
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
        "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"};
    static const char* kOps[] = {"aten::linear", "aten::gelu", "aten::_softmax", "aten::mm"};
    std::int64_t t_ns = 1'000'000;
    std::int64_t gpu_ns = 1'050'000;
    std::int64_t id = 1;
    std::int64_t step = 0;
    std::int64_t step_start_ns = t_ns;
    for (std::int64_t op = 0; written + buf.size() < target_bytes; ++op) {
        const int k = static_cast<int>(op % 4);
        const std::int64_t ext = id++;
        const std::int64_t corr = id++;
        const std::int64_t cpu_dur = 9'000 + (op % 7) * 1'111;
        const std::int64_t launch_ts = t_ns + 2'000;
        const std::int64_t kernel_dur = 15'000 + (op % 13) * 977;
        gpu_ns = std::max(gpu_ns + 1'500, launch_ts + 4'000);
        fmt::format_to(std::back_inserter(buf), R"J(,
  {{
    "ph": "X", "cat": "cpu_op", "name": "{}", "pid": 4242, "tid": 4242,
    "ts": {}, "dur": {},
    "args": {{
      "External id": {},"Record function id": 0, "Concrete Inputs": ["", "", ""], "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"], "Input Strides": [[1024, 1], [1024, 1], [1]], "Input Dims": [[8192, 1024], [4096, 1024], [4096]], "Ev Idx": {}
    }}
  }},
  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
    "ts": {}, "dur": 4.321,
    "args": {{
      "External id": {}, "cbid": 211, "correlation": {}
    }}
  }},
  {{
    "ph": "s", "id": {}, "pid": 4242, "tid": 4242, "ts": {}, "cat": "ac2g", "name": "ac2g"
  }},
  {{
    "ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7,
    "ts": {}, "dur": {},
    "args": {{
      "External id": {},
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": {},
      "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.939394, "warps per SM": 7.757576,
      "grid": [256, 1, 1], "block": [128, 1, 1],
      "est. achieved occupancy %": 12
    }}
  }},
  {{
    "ph": "f", "id": {}, "pid": 0, "tid": 7, "ts": {}, "cat": "ac2g", "name": "ac2g", "bp": "e"
  }})J",
                       kOps[k], fmt_us(t_ns), fmt_us(cpu_dur), ext, op, fmt_us(launch_ts), ext, corr, corr,
                       fmt_us(launch_ts), kKernels[k], fmt_us(gpu_ns), fmt_us(kernel_dur), ext, corr, corr,
                       fmt_us(gpu_ns));
        gpu_ns += kernel_dur;
        t_ns += cpu_dur + 1'000;
        if (op % 50 == 49) {
            const std::int64_t nccl_dur = 180'000 + (op % 3) * 20'000;
            const std::int64_t c = id++;
            fmt::format_to(std::back_inserter(buf), R"J(,
  {{
    "ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 4242, "tid": 4242,
    "ts": {}, "dur": 12.5,
    "args": {{
      "External id": {}, "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 16777216, "Out msg nelems": 16777216, "Group size": 8, "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": {}
    }}
  }},
  {{
    "ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "pid": 0, "tid": 20,
    "ts": {}, "dur": {},
    "args": {{
      "External id": {}, "queued": 0, "device": 0, "context": 1, "stream": 20, "correlation": {},
      "registers per thread": 96, "shared memory": 0, "blocks per SM": 0.181818, "warps per SM": 2.909091,
      "grid": [24, 1, 1], "block": [512, 1, 1], "est. achieved occupancy %": 5,
      "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 16777216, "Out msg nelems": 16777216, "Group size": 8, "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Seq": {}
    }}
  }})J",
                           fmt_us(t_ns), c, op / 50, fmt_us(gpu_ns - 10'000), fmt_us(nccl_dur), c, c, op / 50);
        }
        if (op % 400 == 399) {
            fmt::format_to(std::back_inserter(buf), R"J(,
  {{
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 4242, "tid": 4242,
    "ts": {}, "dur": {},
    "args": {{
      "External id": {}, "Record function id": 0, "Ev Idx": {}
    }}
  }})J",
                           step, fmt_us(step_start_ns), fmt_us(t_ns - step_start_ns), id++, op);
            ++step;
            t_ns += 50'000;
            step_start_ns = t_ns;
        }
        if (buf.size() > (1u << 20)) flush();
    }
    buf += "\n  ],\n  \"traceName\": \"/tmp/tmpabc/trace.json\"\n}\n";
    flush();
    std::fclose(f);
    return written;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--size-mb" && i + 1 < argc) {
            o.size_bytes = std::stoull(argv[++i]) * 1000 * 1000;
        } else if (a == "--dir" && i + 1 < argc) {
            o.dir = argv[++i];
        } else if (a == "--keep") {
            o.keep = true;
        } else {
            fmt::print(stderr, "usage: trace_import [--size-mb N (default 1024)] [--dir DIR (default /tmp)] [--keep]\n");
            return 2;
        }
    }
    const std::string path = (std::filesystem::path(o.dir) / "dtsim_bench_trace_import.json").string();
    fmt::print("writing a Kineto-like trace of ~{} MB to {} ...\n", o.size_bytes / 1'000'000, path);
    const std::uint64_t size_bytes = write_trace(path, o.size_bytes);

    rusage before{};
    getrusage(RUSAGE_SELF, &before);
    const auto t0 = std::chrono::steady_clock::now();
    const dtsim::traces::TraceModel model = dtsim::traces::read_trace(path);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage after{};
    getrusage(RUSAGE_SELF, &after);

    const auto cpu_seconds = [](const rusage& u) {
        return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
               static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    const double cpu = cpu_seconds(after) - cpu_seconds(before);
    const double mb = static_cast<double>(size_bytes) / 1e6;
    const double peak_bytes = static_cast<double>(after.ru_maxrss) * 1024.0;
    fmt::print("file            {:.1f} MB ({} events: {} spans, {} flows, {} args kept, {} strings)\n", mb,
               model.stats.events, model.spans.size(), model.flows.size(), model.args.size(), model.strings.size());
    fmt::print("read_trace      {:.2f} s wall = {:.0f} MB/s; {:.2f} s CPU (user + sys) = {:.0f} MB/s per core   "
               "(target >= 200 MB/s)\n",
               seconds, mb / seconds, cpu, mb / cpu);
    fmt::print("peak RSS        {:.1f} MB = {:.3f} x file size   (target <= 0.25; before reading {:.1f} MB)\n",
               peak_bytes / 1e6, peak_bytes / static_cast<double>(size_bytes),
               static_cast<double>(before.ru_maxrss) * 1024.0 / 1e6);
    if (!o.keep) std::filesystem::remove(path);
    return 0;
}
