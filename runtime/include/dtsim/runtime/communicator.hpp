// A process group's collectives, over the transport a run uses: MPI (shared
// memory on one node) or gloo over TCP, the transport torch's ProcessGroupGloo
// uses on CPU. The calibration measures, and the executor runs, through the
// same communicator, so a calibration describes the transport the run meets.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string_view>

namespace dtsim::runtime {

enum class CommBackend : std::uint8_t { mpi, gloo };
std::string_view to_string(CommBackend b);
// The library that runs a rank's collectives, as a timeline names their
// stream: NCCL on a GPU, else the CPU transport's ("mpi", "gloo").
std::string_view collective_library(bool on_gpu, CommBackend cpu_transport);

// IEEE half precision, bit for bit (gloo::float16's layout).
using Half = std::uint16_t;

// How torch's ProcessGroupGloo sums fp16 tensors, which depends on its version
// (docs/notes/torch-gloo-collectives.md §4): from torch 2.8 (pytorch #153862)
// through c10::Half, each element converted to float, added and rounded; before
// 2.8 through gloo's own gloo::float16, whose software conversions took about
// 2.3x torch 2.15's time per element here (16 MiB: 53 ms against 23.5 ms).
enum class HalfSum : std::uint8_t { c10, gloo };
std::string_view to_string(HalfSum s);
// The sum of the torch whose version is `version` ("2.7", "1.13.1",
// "2.8.0+cpu"); a ConfigError naming `option` for anything else.
HalfSum half_sum_of_torch(std::string_view version, std::string_view option);

// What an asynchronous collective reports, on the thread that runs it.
struct Completion {
    std::function<void()> started;                 // as it starts (may be empty)
    std::function<void(std::exception_ptr)> done;  // once it has ended: the error it raised, or null
};
// Runs `work` on this thread between `c.started` and `c.done`, handing `c.done`
// the exception `work` threw, if any, instead of throwing it.
void run_completing(const Completion& c, const std::function<void()>& work);

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual CommBackend backend() const = 0;
    int rank() const { return rank_; }
    int size() const { return size_; }

    // Every call is collective over the group, issued in the same order on
    // every rank, from one thread at a time.

    // In place: data[i] becomes the sum over ranks.
    virtual void allreduce_sum(float* data, std::int64_t count) = 0;
    virtual void allreduce_sum(Half* data, std::int64_t count) = 0;
    // The same sum, returning before it ends, as ProcessGroupGloo's allreduce
    // returns a Work: `data` must stay put until `c.done` has run. It counts
    // as a call for the order above when it is issued. gloo runs it on one of
    // its two worker threads (ProcessGroupGloo::Options::threads), beside at
    // most one other collective; MPI runs it before returning.
    virtual void allreduce_sum_async(float* data, std::int64_t count, Completion c);
    virtual void allreduce_sum_async(Half* data, std::int64_t count, Completion c);
    // in: per_rank * size() elements; out: this rank's per_rank-element block of the sum.
    virtual void reduce_scatter_sum(const float* in, float* out, std::int64_t per_rank) = 0;
    // out: per_rank * size() elements; rank r's block comes from its `in`.
    // In place when in == out + rank() * per_rank.
    virtual void allgather(const float* in, float* out, std::int64_t per_rank) = 0;
    virtual void broadcast(float* data, std::int64_t count, int root) = 0;
    // The sum of every rank's `in` lands in root's `out` (in place when in ==
    // out). The other ranks' `out` is undefined afterwards: gloo uses it as
    // scratch, as torch.distributed.reduce leaves non-destination tensors.
    virtual void reduce_sum(const float* in, float* out, std::int64_t count, int root) = 0;
    // Returns once every rank has entered it (over this transport: a gloo
    // barrier leaves gloo's threads as warm as torch's dist.barrier does).
    virtual void barrier() = 0;

protected:
    Communicator(int rank, int size) : rank_(rank), size_(size) {}

private:
    int rank_ = 0;
    int size_ = 1;
};

// A communicator over the ranks of `comm` (collective over it). MPI: uses
// `comm`, which must outlive the communicator. gloo: one TCP connection per
// peer, bootstrapped by exchanging addresses over `comm`; it binds the
// interface named by GLOO_SOCKET_IFNAME, as torch does, else this host's name,
// else the loopback. Every call runs on one of the communicator's two worker
// threads, the blocking ones while the caller waits, as ProcessGroupGloo runs
// its work: each call takes its tag as it is issued, in the caller's order. A process that mpirun
// bound to one CPU is unbound first: torchrun and mp.spawn leave torch's ranks
// unbound, and gloo's worker and event-loop threads sharing one core wait a
// scheduler tick per message (a 1 KiB allreduce: 4.9 ms bound, 1.0 ms unbound
// on the 2-core development machine). The rank says so on stderr once.
// `half_sum`: how a gloo communicator sums fp16 (MPI's sums halves its own way).
std::unique_ptr<Communicator> make_communicator(CommBackend backend, MPI_Comm comm, HalfSum half_sum = HalfSum::c10);


}  // namespace dtsim::runtime
