// CUDA backend microbenchmarks (cuda_benchmarks.hpp). Host code only: cuBLAS,
// NCCL, CUPTI and the runtime API; no kernels of our own.
#include "dtsim/profiler/cuda_benchmarks.hpp"

#include "dtsim/profiler/cuda_activity.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace dtsim::profiler::cuda {
namespace {

// A failed CUDA, cuBLAS or NCCL call; caught at the entry points and returned
// as CudaResult::error.
struct CudaFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
        throw CudaFailure(fmt::format("{} failed: {}: {}", what, cudaGetErrorName(e), cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw CudaFailure(fmt::format("{} failed: {}", what, cublasGetStatusString(s)));
}
void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw CudaFailure(fmt::format("{} failed: {}", what, ncclGetErrorString(r)));
}
void check_mpi(int r, const char* what) {
    if (r != MPI_SUCCESS) throw CudaFailure(fmt::format("{} failed (MPI error {})", what, r));
}

template <class F>
auto guarded(F&& f) -> CudaResult<decltype(f())> {
    CudaResult<decltype(f())> out;
    out.error = cuda_unavailable_reason();
    if (!out.error.empty()) return out;
    try {
        out.value = f();
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    return out;
}

class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)), "cudaMalloc"); }
    ~DeviceBuffer() { cudaFree(p_); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    void* get() const { return p_; }

private:
    void* p_ = nullptr;
};

class PinnedBuffer {
public:
    explicit PinnedBuffer(std::size_t bytes) {
        check(cudaMallocHost(&p_, std::max<std::size_t>(bytes, 1)), "cudaMallocHost");
    }
    ~PinnedBuffer() { cudaFreeHost(p_); }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    void* get() const { return p_; }

private:
    void* p_ = nullptr;
};

class Stream {
public:
    Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() { cudaStreamDestroy(s_); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    cudaStream_t get() const { return s_; }

private:
    cudaStream_t s_ = nullptr;
};

class EventPair {
public:
    EventPair() {
        check(cudaEventCreate(&a_), "cudaEventCreate");
        check(cudaEventCreate(&b_), "cudaEventCreate");
    }
    ~EventPair() {
        cudaEventDestroy(a_);
        cudaEventDestroy(b_);
    }
    EventPair(const EventPair&) = delete;
    EventPair& operator=(const EventPair&) = delete;
    void start(cudaStream_t s) { check(cudaEventRecord(a_, s), "cudaEventRecord"); }
    void stop(cudaStream_t s) { check(cudaEventRecord(b_, s), "cudaEventRecord"); }
    double elapsed_us() {
        check(cudaEventSynchronize(b_), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
        return static_cast<double>(ms) * 1e3;
    }

private:
    cudaEvent_t a_ = nullptr, b_ = nullptr;
};

class Cublas {
public:
    Cublas() { check(cublasCreate(&h_), "cublasCreate"); }
    ~Cublas() { cublasDestroy(h_); }
    Cublas(const Cublas&) = delete;
    Cublas& operator=(const Cublas&) = delete;
    cublasHandle_t get() const { return h_; }

private:
    cublasHandle_t h_ = nullptr;
};

// Device memory filled with pseudo-random values in [-1, 1): zeros or a short
// repeating pattern draw less power and let the clocks run higher than a
// model's tensors do (measured on an H100: 871 TFLOP/s on an 8192x4096x4096
// bf16 GEMM of a 13-value pattern, where torch's same GEMM ran at 797).
void fill_device(void* dst, std::size_t elements, DType dtype) {
    std::uint64_t state = 0x853C49E6748FEA9Bull ^ elements;
    auto next = [&state] {  // splitmix64
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return static_cast<float>((z ^ (z >> 31)) >> 40) * (2.0f / 16777216.0f) - 1.0f;
    };
    if (dtype == DType::fp32) {
        std::vector<float> host(elements);
        for (auto& v : host) v = next();
        check(cudaMemcpy(dst, host.data(), elements * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    } else {
        std::vector<__nv_bfloat16> host(elements);
        for (auto& v : host) v = __float2bfloat16(next());
        check(cudaMemcpy(dst, host.data(), elements * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
}

// One GEMM C = A * B (column-major, m x k times k x n) on the handle's stream.
// A row-major GEMM C[m,n] = op(A) op(B) in `layout`, called as torch calls
// cuBLAS (column-major): C^T = op(B)^T op(A)^T, so B comes first. nn.Linear's
// forward (layout NT) is cuBLAS's "TN" with the weight as its first operand.
struct Gemm {
    cublasHandle_t handle;
    DType dtype;
    int m, n, k;
    void *a, *b, *c;
    GemmLayout layout = GemmLayout::nn;
    void launch() const {
        const float alpha = 1.0f, beta = 0.0f;
        const bool ta = layout == GemmLayout::tn, tb = layout == GemmLayout::nt;
        const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        const int ldb = tb ? k : n, lda = ta ? m : k;
        if (dtype == DType::fp32) {
            check(cublasSgemm(handle, op_b, op_a, n, m, k, &alpha, static_cast<const float*>(b), ldb,
                              static_cast<const float*>(a), lda, &beta, static_cast<float*>(c), n),
                  "cublasSgemm");
        } else {
            const cudaDataType t = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
            check(cublasGemmEx(handle, op_b, op_a, n, m, k, &alpha, b, t, ldb, a, t, lda, &beta, c, t, n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  "cublasGemmEx");
        }
    }
};

int to_int(std::int64_t v, const char* what) {
    if (v <= 0 || v > 2147483647) throw CudaFailure(fmt::format("{} = {} is outside cuBLAS' int range", what, v));
    return static_cast<int>(v);
}

// Device time per call from CUPTI kernel records: `calls` launches produced
// the kernels in `records` (in order); the first `skip` calls are warm-up.
// Empty when the records do not divide evenly into calls.
std::vector<double> per_call_kernel_us(const std::vector<ActivityRecord>& records, int calls, int skip) {
    std::vector<const ActivityRecord*> kernels;
    for (const auto& r : records)
        if (r.kind == ActivityKind::kernel) kernels.push_back(&r);
    if (calls <= 0 || kernels.empty() || kernels.size() % static_cast<std::size_t>(calls) != 0) return {};
    const std::size_t per = kernels.size() / static_cast<std::size_t>(calls);
    std::vector<double> out;
    for (int i = skip; i < calls; ++i) {
        double us = 0;
        for (std::size_t j = 0; j < per; ++j) us += kernels[static_cast<std::size_t>(i) * per + j]->duration_us();
        out.push_back(us);
    }
    return out;
}

// MPI: rank, size and the device this rank drives.
struct MpiPlace {
    int rank = 0, size = 1, local_rank = 0;
};

MpiPlace mpi_place() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) throw CudaFailure("NCCL benchmarks bootstrap over MPI: call MPI_Init first (run under mpirun)");
    MpiPlace p;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &p.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &p.size), "MPI_Comm_size");
    MPI_Comm local;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    MPI_Comm_rank(local, &p.local_rank);
    MPI_Comm_free(&local);
    return p;
}

class NcclComm {
public:
    explicit NcclComm(const MpiPlace& p) {
        int devices = 0;
        check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
        check(cudaSetDevice(p.local_rank % devices), "cudaSetDevice");
        ncclUniqueId id;
        std::memset(&id, 0, sizeof id);
        if (p.rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
        check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
        check(ncclCommInitRank(&comm_, p.size, id, p.rank), "ncclCommInitRank");
    }
    ~NcclComm() {
        if (comm_) ncclCommDestroy(comm_);
    }
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;
    ncclComm_t get() const { return comm_; }

private:
    ncclComm_t comm_ = nullptr;
};

double bus_factor(calib::CollectiveKind kind, int n) {
    const double dn = static_cast<double>(n);
    switch (kind) {
        case calib::CollectiveKind::allreduce: return 2.0 * (dn - 1) / dn;
        case calib::CollectiveKind::reduce_scatter:
        case calib::CollectiveKind::allgather: return (dn - 1) / dn;
        case calib::CollectiveKind::broadcast:
        case calib::CollectiveKind::reduce: return 1.0;
    }
    return 1.0;
}

// One collective of nccl-tests' size `bytes` (fp32, sum, root 0).
void launch_collective(calib::CollectiveKind kind, std::size_t bytes, int nranks, const void* send, void* recv,
                       ncclComm_t comm, cudaStream_t s) {
    const std::size_t count = bytes / sizeof(float);
    const std::size_t per_rank = count / static_cast<std::size_t>(nranks);
    switch (kind) {
        case calib::CollectiveKind::allreduce:
            check(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s), "ncclAllReduce");
            return;
        case calib::CollectiveKind::reduce_scatter:
            check(ncclReduceScatter(send, recv, per_rank, ncclFloat, ncclSum, comm, s), "ncclReduceScatter");
            return;
        case calib::CollectiveKind::allgather:
            check(ncclAllGather(send, recv, per_rank, ncclFloat, comm, s), "ncclAllGather");
            return;
        case calib::CollectiveKind::broadcast:
            check(ncclBroadcast(send, recv, count, ncclFloat, 0, comm, s), "ncclBroadcast");
            return;
        case calib::CollectiveKind::reduce:
            check(ncclReduce(send, recv, count, ncclFloat, ncclSum, 0, comm, s), "ncclReduce");
            return;
    }
}

// Elements of the result that differ from what the collective must produce
// when rank r contributes the value r + 1 everywhere.
std::int64_t count_wrong(calib::CollectiveKind kind, std::size_t bytes, const MpiPlace& p, const void* recv) {
    const std::size_t count = bytes / sizeof(float);
    const std::size_t per_rank = count / static_cast<std::size_t>(p.size);
    std::size_t n = count;
    if (kind == calib::CollectiveKind::reduce_scatter) n = per_rank;
    if (kind == calib::CollectiveKind::reduce && p.rank != 0) return 0;
    std::vector<float> host(n);
    check(cudaMemcpy(host.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
    const float sum = static_cast<float>(p.size) * static_cast<float>(p.size + 1) / 2.0f;
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
        float expected = sum;
        if (kind == calib::CollectiveKind::broadcast) expected = 1.0f;
        if (kind == calib::CollectiveKind::allgather)
            expected = static_cast<float>(i / std::max<std::size_t>(per_rank, 1) + 1);
        if (host[i] != expected) ++wrong;
    }
    std::int64_t total = 0;
    MPI_Allreduce(&wrong, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

// Every rank runs `run` the same number of times (rank 0 decides from the
// budget), each sample being the slowest rank's time.
Measurement measure_collectively(const RepeatPolicy& policy, const std::function<double()>& run) {
    for (int i = 0; i < policy.warmup; ++i) run();
    double first = run();
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int n = policy.min_samples;
    if (first > 0) n = static_cast<int>(policy.budget_s * 1e6 / first);
    n = std::clamp(n, std::max(policy.min_samples, 1), std::max(policy.max_samples, 1));
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<double> samples{first};
    for (int i = 1; i < n; ++i) {
        double t = run();
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        samples.push_back(t);
    }
    return summarize(std::move(samples));
}

std::string version_string(int code) {
    if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
    return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

// Times `iterations` GEMMs on `s`, in microseconds per GEMM.
double time_gemm_loop(const Gemm& g, cudaStream_t s, int iterations) {
    EventPair ev;
    check(cublasSetStream(g.handle, s), "cublasSetStream");
    ev.start(s);
    for (int i = 0; i < iterations; ++i) g.launch();
    ev.stop(s);
    return ev.elapsed_us() / iterations;
}

}  // namespace

std::string cuda_unavailable_reason() {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear the sticky error
        return fmt::format("no CUDA device: {}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (count == 0) return "no CUDA device: the driver reports no GPUs";
    return {};
}

CudaResult<std::vector<calib::GemmPoint>> bench_cublas_gemm(std::span<const GemmShape> shapes, DType dtype,
                                                            const RepeatPolicy& policy, const ProgressFn& progress) {
    return guarded([&] {
        std::vector<calib::GemmPoint> points;
        Cublas cublas;
        Stream stream;
        check(cublasSetStream(cublas.get(), stream.get()), "cublasSetStream");
        ActivityCollector collector;
        const bool cupti = collector.start().empty();
        const std::size_t elem = static_cast<std::size_t>(dtype_bytes(dtype));
        for (std::size_t i = 0; i < shapes.size(); ++i) {
            const auto& s = shapes[i];
            if (progress)
                progress(fmt::format("cuBLAS GEMM {} {}x{}x{}", to_string(s.layout), s.m, s.n, s.k),
                         static_cast<double>(i) / static_cast<double>(shapes.size()));
            Gemm g{cublas.get(),     dtype,   to_int(s.m, "m"), to_int(s.n, "n"),
                   to_int(s.k, "k"), nullptr, nullptr,          nullptr, s.layout};
            const auto am = static_cast<std::size_t>(s.m * s.k), bm = static_cast<std::size_t>(s.k * s.n),
                       cm = static_cast<std::size_t>(s.m * s.n);
            DeviceBuffer a(am * elem), b(bm * elem), c(cm * elem);
            fill_device(a.get(), am, dtype);
            fill_device(b.get(), bm, dtype);
            g.a = a.get();
            g.b = b.get();
            g.c = c.get();
            if (cupti) collector.flush();  // drop the fills' copies
            EventPair ev;
            int calls = 0;
            Measurement events = measure(policy, [&] {
                ++calls;
                ev.start(stream.get());
                g.launch();
                ev.stop(stream.get());
                return ev.elapsed_us();
            });
            Measurement m = events;
            if (cupti) {
                check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
                auto device_us = per_call_kernel_us(collector.flush(), calls, policy.warmup);
                if (!device_us.empty()) m = summarize(std::move(device_us));
            }
            points.push_back({dtype, s.m, s.n, s.k, 1, m.mean_us, m.spread, s.layout});
        }
        if (progress) progress("cuBLAS GEMM", 1.0);
        return points;
    });
}

std::string nccl_provenance() {
    std::string out;
    int code = 0;
    if (ncclGetVersion(&code) == ncclSuccess) {
        out = "nccl " + version_string(code);
    } else {
        out = "nccl unknown";
    }
    std::vector<std::string> vars;
    for (char** e = environ; e && *e; ++e)
        if (std::strncmp(*e, "NCCL_", 5) == 0) vars.emplace_back(*e);
    std::sort(vars.begin(), vars.end());
    for (const auto& v : vars) out += "; " + v;
    return out;
}

CudaResult<NcclSweepResult> bench_nccl_collectives(const CollectiveSweep& sweep, const RepeatPolicy& policy,
                                                   const ProgressFn& progress) {
    return guarded([&] {
        NcclSweepResult result;
        result.provenance = nccl_provenance();
        const MpiPlace p = mpi_place();
        NcclComm comm(p);
        Stream stream;
        const auto max_bytes = static_cast<std::size_t>(std::max<std::int64_t>(sweep.max_bytes, 4));
        const auto n = static_cast<std::size_t>(p.size);
        // Send and receive sized for the largest case of any kind (all-gather receives S).
        const std::size_t align = 4 * n;
        const std::size_t cap = (max_bytes + align - 1) / align * align;
        DeviceBuffer send(cap), recv(cap);
        std::vector<float> host(cap / sizeof(float), static_cast<float>(p.rank + 1));
        check(cudaMemcpy(send.get(), host.data(), cap, cudaMemcpyHostToDevice), "cudaMemcpy");
        std::vector<std::int64_t> sizes;
        for (std::int64_t s = std::max<std::int64_t>(sweep.min_bytes, 4); s <= sweep.max_bytes;
             s = sweep.factor > 1 ? s * sweep.factor : s * 2)
            sizes.push_back(s);
        const double total = static_cast<double>(sizes.size() * sweep.kinds.size());
        int done = 0;
        EventPair ev;
        for (auto kind : sweep.kinds) {
            for (auto size : sizes) {
                if (progress && p.rank == 0)
                    progress(fmt::format("NCCL {} {} B", calib::to_string(kind), size), done / std::max(total, 1.0));
                ++done;
                // Round to whole elements per rank, as nccl-tests does.
                const std::size_t bytes = static_cast<std::size_t>(size) / align * align;
                if (bytes == 0) continue;
                // Every rank sends rank + 1 everywhere; count_wrong knows what each kind must produce.
                const void* src = send.get();
                launch_collective(kind, bytes, p.size, src, recv.get(), comm.get(), stream.get());
                check(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
                CollectiveRow row;
                row.kind = kind;
                row.size_bytes = static_cast<std::int64_t>(bytes);
                row.count = static_cast<std::int64_t>(
                    (kind == calib::CollectiveKind::allgather || kind == calib::CollectiveKind::reduce_scatter)
                        ? bytes / sizeof(float) / n
                        : bytes / sizeof(float));
                row.wrong = count_wrong(kind, bytes, p, recv.get());
                row.time = measure_collectively(policy, [&] {
                    ev.start(stream.get());
                    launch_collective(kind, bytes, p.size, src, recv.get(), comm.get(), stream.get());
                    ev.stop(stream.get());
                    return ev.elapsed_us();
                });
                row.algbw_gbps = row.time.median_us > 0 ? static_cast<double>(bytes) / (row.time.median_us * 1e3) : 0;
                row.busbw_gbps = row.algbw_gbps * bus_factor(kind, p.size);
                result.rows.push_back(row);
            }
        }
        if (progress && p.rank == 0) progress("NCCL collectives", 1.0);
        return result;
    });
}

// Mean rate of cudaMemcpyAsync of `n` bytes from `src` to `dst` on a stream of
// its own, timed by events, in GB/s of `n` per copy.
static double copy_gbps(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind, const RepeatPolicy& policy) {
    Stream stream;
    EventPair ev;
    const Measurement m = measure(policy, [&] {
        ev.start(stream.get());
        check(cudaMemcpyAsync(dst, src, n, kind, stream.get()), "cudaMemcpyAsync");
        ev.stop(stream.get());
        return ev.elapsed_us();
    });
    return m.mean_us > 0 ? static_cast<double>(n) / (m.mean_us * 1e3) : 0.0;
}

CudaResult<HostCopyResult> bench_host_copies(std::int64_t bytes, const RepeatPolicy& policy) {
    return guarded([&] {
        if (bytes <= 0) throw CudaFailure("host copy size must be positive");
        const auto n = static_cast<std::size_t>(bytes);
        DeviceBuffer dev(n);
        PinnedBuffer pinned(n);
        std::vector<unsigned char> pageable(n, 1);
        std::memset(pinned.get(), 1, n);
        HostCopyResult r;
        r.h2d_pinned_gbps = copy_gbps(dev.get(), pinned.get(), n, cudaMemcpyHostToDevice, policy);
        r.d2h_pinned_gbps = copy_gbps(pinned.get(), dev.get(), n, cudaMemcpyDeviceToHost, policy);
        r.h2d_pageable_gbps = copy_gbps(dev.get(), pageable.data(), n, cudaMemcpyHostToDevice, policy);
        r.d2h_pageable_gbps = copy_gbps(pageable.data(), dev.get(), n, cudaMemcpyDeviceToHost, policy);
        return r;
    });
}

CudaResult<double> bench_device_copy(std::int64_t bytes, const RepeatPolicy& policy) {
    return guarded([&] {
        if (bytes <= 0) throw CudaFailure("device copy size must be positive");
        const auto n = static_cast<std::size_t>(bytes);
        DeviceBuffer src(n);
        DeviceBuffer dst(n);
        check(cudaMemset(src.get(), 1, n), "cudaMemset");
        // Each byte copied is read once and written once.
        return 2.0 * copy_gbps(dst.get(), src.get(), n, cudaMemcpyDeviceToDevice, policy);
    });
}

std::vector<GemmShape> gpu_gemm_shapes(bool quick) {
    std::vector<GemmShape> shapes = default_gemm_shapes(quick);
    if (quick) {
        const auto probes = layout_probe_shapes(true);
        shapes.insert(shapes.end(), probes.begin(), probes.end());
        return shapes;
    }
    const std::vector<GemmShape> large{
        {4096, 4096, 4096},  {8192, 8192, 8192},  {16384, 4096, 4096}, {8192, 4096, 11008},
        {8192, 11008, 4096}, {4096, 8192, 8192},  {16384, 8192, 1024}, {8192, 1024, 8192},
        {8192, 28672, 8192}, {8192, 8192, 28672}, {32768, 4096, 4096}, {4096, 16384, 4096},
        // Misaligned feature dimensions, for the GEMM curve's alignment ratios
        // (even, odd; bench/results/cuda.md §8).
        {4096, 4100, 4096},  {4096, 4096, 4100},  {4096, 4095, 4096},  {4096, 4096, 4097},
        // nn.Linear's forward (NT) and weight-gradient (TN) layouts, for the
        // curve's layout ratios (each shape is also measured NN above).
        {8192, 8192, 8192, GemmLayout::nt},  {8192, 8192, 8192, GemmLayout::tn},
        {16384, 4096, 4096, GemmLayout::nt}, {16384, 4096, 4096, GemmLayout::tn},
        {8192, 11008, 4096, GemmLayout::nt}, {8192, 4096, 11008, GemmLayout::tn},
    };
    shapes.insert(shapes.end(), large.begin(), large.end());
    return shapes;
}

CudaResult<calib::OverlapSpec> bench_cuda_overlap(bool quick, const RepeatPolicy& policy) {
    return guarded([&] {
        const MpiPlace p = mpi_place();
        NcclComm comm(p);
        Cublas cublas;
        Stream compute, comm_stream;
        const int dim = quick ? 2048 : 8192;
        const std::size_t elems = static_cast<std::size_t>(dim) * static_cast<std::size_t>(dim);
        DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 2);
        fill_device(a.get(), elems, DType::bf16);
        fill_device(b.get(), elems, DType::bf16);
        Gemm g{cublas.get(), DType::bf16, dim, dim, dim, a.get(), b.get(), c.get()};
        const std::size_t comm_bytes = quick ? (64u << 20) : (512u << 20);
        DeviceBuffer send(comm_bytes), recv(comm_bytes);
        check(cudaMemset(send.get(), 0, comm_bytes), "cudaMemset");
        const int gemms = quick ? 20 : 50;
        const int allreduces = quick ? 5 : 10;
        const int repeats = std::max(policy.min_samples, 3);
        auto allreduce_loop = [&](EventPair& ev) {
            ev.start(comm_stream.get());
            for (int i = 0; i < allreduces; ++i)
                launch_collective(calib::CollectiveKind::allreduce, comm_bytes, p.size, send.get(), recv.get(),
                                  comm.get(), comm_stream.get());
            ev.stop(comm_stream.get());
        };
        std::vector<double> gemm_alone, gemm_with, comm_alone, comm_with;
        EventPair comm_ev;
        time_gemm_loop(g, compute.get(), 3);  // warm-up
        allreduce_loop(comm_ev);
        comm_ev.elapsed_us();
        for (int r = 0; r < repeats; ++r) {
            gemm_alone.push_back(time_gemm_loop(g, compute.get(), gemms));
            MPI_Barrier(MPI_COMM_WORLD);
            allreduce_loop(comm_ev);
            comm_alone.push_back(comm_ev.elapsed_us());
            MPI_Barrier(MPI_COMM_WORLD);
            allreduce_loop(comm_ev);  // runs while the GEMMs below run
            gemm_with.push_back(time_gemm_loop(g, compute.get(), gemms));
            comm_with.push_back(comm_ev.elapsed_us());
        }
        auto median = [](std::vector<double> v) { return summarize(std::move(v)).median_us; };
        calib::OverlapSpec spec;
        spec.compute_slowdown_under_comm = std::max(1.0, median(gemm_with) / median(gemm_alone));
        spec.comm_slowdown_under_compute = std::max(1.0, median(comm_with) / median(comm_alone));
        // The group runs as fast as its slowest rank.
        MPI_Allreduce(MPI_IN_PLACE, &spec.compute_slowdown_under_comm, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &spec.comm_slowdown_under_compute, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        return spec;
    });
}

}  // namespace dtsim::profiler::cuda
