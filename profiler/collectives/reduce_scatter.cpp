// ReduceScatter (nccl-tests reduce_scatter_perf): each rank receives `count`
// elements; S = count * nranks * 4, busbw factor (n-1)/n.
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

void init(Buffers& b) {
    const auto n = static_cast<std::size_t>(b.count * b.nranks);
    b.send.resize(n);
    b.recv.assign(static_cast<std::size_t>(b.count), 0.0f);
    for (std::size_t i = 0; i < n; ++i) b.send[i] = input_value(b.rank, static_cast<std::int64_t>(i));
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.reduce_scatter_sum(b.send.data(), b.recv.data(), b.count);
}

// Rank r holds the sum of block r of the send buffers.
std::int64_t check(const Buffers& b) {
    std::int64_t wrong = 0;
    const std::int64_t offset = b.rank * b.count;
    for (std::int64_t j = 0; j < b.count; ++j) {
        if (differs(b.recv[static_cast<std::size_t>(j)], summed_value(b.nranks, offset + j))) ++wrong;
    }
    return wrong;
}

}  // namespace

const CollectiveTable& reduce_scatter_table() {
    static const CollectiveTable table{"reduce_scatter",
                                       calib::CollectiveKind::reduce_scatter,
                                       "sum",
                                       -1,
                                       false,
                                       count_for_bytes,
                                       total_bytes,
                                       busbw_factor,
                                       init,
                                       run,
                                       check};
    return table;
}

}  // namespace dtsim::profiler::collectives
