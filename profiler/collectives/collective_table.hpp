// One row of the collectives table (nccl-tests style): every collective fills
// the same small struct in its own file and the shared driver (driver.cpp)
// sweeps sizes, times, checks and prints them. Private to profiler/collectives/.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/runtime/communicator.hpp"
#include "dtsim/runtime/huge_pages.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace dtsim::profiler::collectives {

// The buffers of one size step on one rank. fp32 throughout (nccl-tests -d float).
struct Buffers {
    int rank = 0;
    int nranks = 1;
    std::int64_t count = 0;  // the collective's count argument (per rank for reduce_scatter/allgather)
    runtime::Floats send;    // on huge pages, as the executor's buffers
    runtime::Floats recv;
};

struct CollectiveTable {
    std::string_view name;  // nccl-tests' test name, e.g. "all_reduce" (binary all_reduce_perf)
    calib::CollectiveKind kind;
    std::string_view redop;  // nccl-tests' redop column: "sum" or "none"
    int root;                // nccl-tests' root column: -1 when the collective has none
    // Whether the timed call works in place (MPI_IN_PLACE), as the executor's
    // and the frameworks' calls do (DDP's bucket allreduce, the flat-parameter
    // all-gather into the buffer that holds the local shard).
    bool in_place;
    // The collective's count argument for a requested size in bytes (at least 1).
    std::int64_t (*count_for_bytes)(std::int64_t target_bytes, int nranks);
    // nccl-tests' size S in bytes for a count argument.
    std::int64_t (*total_bytes)(std::int64_t count, int nranks);
    // busbw = algbw * factor (nccl-tests doc/PERFORMANCE.md).
    double (*busbw_factor)(int nranks);
    // Sizes both buffers and fills them with deterministic per-rank data.
    void (*init)(Buffers& b);
    // The call on the world's communicator (fp32, sum where it reduces).
    void (*run)(Buffers& b, runtime::Communicator& comm);
    // Elements on this rank that differ from the expected result after init + run.
    std::int64_t (*check)(const Buffers& b);
    DType dtype = DType::fp32;  // the elements' type (nccl-tests' type column: float, half)
};

constexpr std::int64_t kTypeSize = 4;  // fp32

// The deterministic input of `rank` at element `i` (small integers: exact sums in fp32).
inline float input_value(int rank, std::int64_t i) {
    return static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

// Sum over ranks of input_value(r, i).
inline float summed_value(int nranks, std::int64_t i) {
    const std::int64_t n = nranks;
    return static_cast<float>(n * (n + 1) / 2 + n * (i % 7));
}

// Whether `got` differs from `expected` beyond fp32 rounding.
bool differs(float got, float expected);

const CollectiveTable& allreduce_table();
const CollectiveTable& reduce_scatter_table();
const CollectiveTable& allgather_table();
const CollectiveTable& broadcast_table();
const CollectiveTable& reduce_table();
const CollectiveTable& allreduce_fp16_table();

// The table of `kind` in `dtype`: every CollectiveKind has an fp32 one;
// allreduce has an fp16 one too. Throws ConfigError for any other.
const CollectiveTable& table_for(calib::CollectiveKind kind, DType dtype = DType::fp32);

}  // namespace dtsim::profiler::collectives
