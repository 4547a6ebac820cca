// Collectives (MPI or gloo) measured like nccl-tests: one file per collective under
// profiler/collectives/ fills the same small table (name, bytes, bus-bandwidth
// factor, run), one driver sweeps sizes, checks results (#wrong) and prints
// nccl-tests' columns (formats.md §8).
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/measure.hpp"
#include "dtsim/runtime/communicator.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <span>
#include <vector>

namespace dtsim::profiler {

struct CollectiveRow {
    calib::CollectiveKind kind;
    DType dtype = DType::fp32;
    std::int64_t size_bytes = 0;  // nccl-tests' size: total bytes S
    std::int64_t count = 0;       // elements
    Measurement time;             // the slowest rank per iteration, over the iterations
    double algbw_gbps = 0;
    double busbw_gbps = 0;
    std::int64_t wrong = 0;  // elements that differ from the expected result
};

struct CollectiveSweep {
    std::vector<calib::CollectiveKind> kinds;
    std::int64_t min_bytes = 1024;
    std::int64_t max_bytes = 256LL << 20;
    int factor = 2;  // size multiplier between steps (nccl-tests -f)
    // Sizes (bytes S) measured besides the sweep's, by kind: the ones a Plan
    // issues, so that pricing them needs no interpolation across the steps
    // (shared-memory MPI has cliffs between powers of two).
    std::vector<std::pair<calib::CollectiveKind, std::int64_t>> extra_sizes;
    bool only_extra_sizes = false;  // measure extra_sizes alone, not the sweep's steps
    // Also allreduce in fp16, at the allreduce sizes (bytes S): what the fp16
    // compression hook sends, which gloo sums slower per byte than fp32.
    bool fp16_allreduce = false;
};

// Collective over MPI_COMM_WORLD; every rank must call it, with `comm` over
// the whole world (MPI or gloo: the transport measured). MPI times and
// synchronises the samples. Results are the same on every rank.
std::vector<CollectiveRow> bench_collectives(const CollectiveSweep& sweep, const RepeatPolicy& policy,
                                             const ProgressFn& progress, runtime::Communicator& comm);

// The rows of one kind and dtype, in their order.
std::vector<CollectiveRow> rows_of_kind(std::span<const CollectiveRow> rows, calib::CollectiveKind kind,
                                        DType dtype = DType::fp32);

// Rows as the calibration's points: the mean time (measure.hpp says why).
std::vector<calib::CollectivePoint> points_of(std::span<const CollectiveRow> rows);

// nccl-tests' table for one collective: header and one row per size;
// `transport` ("mpi", "gloo") goes in its first line.
std::string format_nccl_tests_table(const std::vector<CollectiveRow>& rows, int nranks, std::string_view transport);

// How much a running collective slows compute and the reverse: large
// allreduces over `comm` (the run's transport) on the calling thread while a
// probe thread, at the executor's compute priority, loops GEMMs (only the
// calling thread communicates). Every rank calls it.
calib::OverlapSpec bench_overlap(bool quick, const RepeatPolicy& policy, runtime::Communicator& comm);

}  // namespace dtsim::profiler
