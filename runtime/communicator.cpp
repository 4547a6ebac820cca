// The MPI communicator, and what both backends share.
#include "dtsim/runtime/communicator.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/half.hpp"

#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <system_error>
#include <vector>

namespace dtsim::runtime {

std::unique_ptr<Communicator> make_gloo_communicator(MPI_Comm comm, HalfSum half_sum);  // gloo_communicator.cpp

std::string_view to_string(CommBackend b) {
    return b == CommBackend::gloo ? "gloo" : "mpi";
}

std::string_view collective_library(bool on_gpu, CommBackend cpu_transport) {
    return on_gpu ? "nccl" : to_string(cpu_transport);
}

void run_completing(const Completion& c, const std::function<void()>& work) {
    if (c.started) c.started();
    std::exception_ptr error;
    try {
        work();
    } catch (...) {
        error = std::current_exception();
    }
    if (c.done) c.done(error);
}

void Communicator::allreduce_sum_async(float* data, std::int64_t count, Completion c) {
    run_completing(c, [&] { allreduce_sum(data, count); });
}
void Communicator::allreduce_sum_async(Half* data, std::int64_t count, Completion c) {
    run_completing(c, [&] { allreduce_sum(data, count); });
}

namespace {

int mpi_count(std::int64_t count) {
    if (count < 0 || count > INT_MAX)
        throw ConfigError(fmt::format("a collective of {} elements is beyond MPI's int count", count));
    return static_cast<int>(count);
}

class MpiCommunicator final : public Communicator {
public:
    MpiCommunicator(MPI_Comm comm, int rank, int size) : Communicator(rank, size), comm_(comm) {}
    CommBackend backend() const override { return CommBackend::mpi; }

    void allreduce_sum(float* data, std::int64_t count) override {
        MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_FLOAT, MPI_SUM, comm_);
    }
    // MPI has no half type: a float sum of the half values, rounded back once
    // (exactly a half sum on 2 ranks; within (size - 1) / 2 ulps on more).
    void allreduce_sum(Half* data, std::int64_t count) override {
        std::vector<float> f(static_cast<std::size_t>(count));
        fp16_to_float(data, f.data(), f.size());
        allreduce_sum(f.data(), count);
        float_to_fp16(f.data(), data, f.size());
    }
    void reduce_scatter_sum(const float* in, float* out, std::int64_t per_rank) override {
        MPI_Reduce_scatter_block(in, out, mpi_count(per_rank), MPI_FLOAT, MPI_SUM, comm_);
    }
    void allgather(const float* in, float* out, std::int64_t per_rank) override {
        if (in == out + rank() * per_rank)
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, mpi_count(per_rank), MPI_FLOAT, comm_);
        else
            MPI_Allgather(in, mpi_count(per_rank), MPI_FLOAT, out, mpi_count(per_rank), MPI_FLOAT, comm_);
    }
    void broadcast(float* data, std::int64_t count, int root) override {
        MPI_Bcast(data, mpi_count(count), MPI_FLOAT, root, comm_);
    }
    void barrier() override { MPI_Barrier(comm_); }
    void reduce_sum(const float* in, float* out, std::int64_t count, int root) override {
        const bool in_place = in == out && rank() == root;
        MPI_Reduce(in_place ? MPI_IN_PLACE : in, out, mpi_count(count), MPI_FLOAT, MPI_SUM, root, comm_);
    }

private:
    MPI_Comm comm_;
};

}  // namespace

std::string_view to_string(HalfSum s) { return s == HalfSum::gloo ? "gloo::float16" : "c10::Half"; }

HalfSum half_sum_of_torch(std::string_view version, std::string_view option) {
    int major = -1, minor = -1;
    const char* end = version.data() + version.size();
    std::from_chars_result r = std::from_chars(version.data(), end, major);
    if (r.ec == std::errc{} && r.ptr != end && *r.ptr == '.') r = std::from_chars(r.ptr + 1, end, minor);
    const bool rest_ok = r.ptr == end || *r.ptr == '.' || *r.ptr == '+';  // "2.8.0", "2.8+cpu"
    if (r.ec != std::errc{} || major < 1 || minor < 0 || !rest_ok)
        throw ConfigError(fmt::format("{} {}: expected a torch version such as 2.7 or 1.13.1 (it decides how gloo "
                                      "sums fp16: gloo::float16 before 2.8, c10::Half from 2.8)",
                                      option, version));
    return major > 2 || (major == 2 && minor >= 8) ? HalfSum::c10 : HalfSum::gloo;
}

std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm comm, HalfSum half_sum) {
    if (backend == CommBackend::gloo) return make_gloo_communicator(comm, half_sum);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    return std::make_unique<MpiCommunicator>(comm, rank, size);
}

}  // namespace dtsim::runtime
