// AllGather (nccl-tests all_gather_perf): each rank sends `count` elements;
// S = count * nranks * 4, busbw factor (n-1)/n.
#include "collective_table.hpp"

#include <algorithm>

namespace dtsim::profiler::collectives {
namespace {

std::int64_t count_for_bytes(std::int64_t target_bytes, int nranks) {
    return std::max<std::int64_t>(1, target_bytes / (kTypeSize * nranks));
}

std::int64_t total_bytes(std::int64_t count, int nranks) {
    return count * nranks * kTypeSize;
}

// Ring: n-1 steps, each moving S/n per rank.
double busbw_factor(int nranks) {
    return static_cast<double>(nranks - 1) / nranks;
}

// In place: this rank's block of `recv` holds its input.
void init(Buffers& b) {
    b.send = {};
    b.recv.assign(static_cast<std::size_t>(b.count * b.nranks), 0.0f);
    for (std::int64_t i = 0; i < b.count; ++i)
        b.recv[static_cast<std::size_t>(b.rank * b.count + i)] = input_value(b.rank, i);
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.allgather(b.recv.data() + b.rank * b.count, b.recv.data(), b.count);
}

// Block r of the result is rank r's send buffer.
std::int64_t check(const Buffers& b) {
    std::int64_t wrong = 0;
    for (int r = 0; r < b.nranks; ++r) {
        for (std::int64_t j = 0; j < b.count; ++j) {
            if (differs(b.recv[static_cast<std::size_t>(r * b.count + j)], input_value(r, j))) ++wrong;
        }
    }
    return wrong;
}

}  // namespace

const CollectiveTable& allgather_table() {
    static const CollectiveTable table{"all_gather", calib::CollectiveKind::allgather,
                                       "none",       -1,
                                       true,         count_for_bytes,
                                       total_bytes,  busbw_factor,
                                       init,         run,
                                       check};
    return table;
}

}  // namespace dtsim::profiler::collectives
