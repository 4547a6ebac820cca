// AllReduce (nccl-tests all_reduce_perf): S = count * 4, busbw factor 2(n-1)/n.
#include "collective_table.hpp"

#include <algorithm>

namespace dtsim::profiler::collectives {
namespace {

std::int64_t count_for_bytes(std::int64_t target_bytes, int /*nranks*/) {
    return std::max<std::int64_t>(1, target_bytes / kTypeSize);
}

std::int64_t total_bytes(std::int64_t count, int /*nranks*/) {
    return count * kTypeSize;
}

// Ring: a reduce-scatter then an all-gather, each moving (n-1)/n of S per rank.
double busbw_factor(int nranks) {
    return 2.0 * (nranks - 1) / nranks;
}

// In place: the input lives in `recv` (the timed repeats keep summing it,
// which costs the same).
void init(Buffers& b) {
    const auto n = static_cast<std::size_t>(b.count);
    b.send = {};
    b.recv.resize(n);
    for (std::size_t i = 0; i < n; ++i) b.recv[i] = input_value(b.rank, static_cast<std::int64_t>(i));
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.allreduce_sum(b.recv.data(), b.count);
}

std::int64_t check(const Buffers& b) {
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < b.count; ++i) {
        if (differs(b.recv[static_cast<std::size_t>(i)], summed_value(b.nranks, i))) ++wrong;
    }
    return wrong;
}

}  // namespace

const CollectiveTable& allreduce_table() {
    static const CollectiveTable table{"all_reduce", calib::CollectiveKind::allreduce,
                                       "sum",        -1,
                                       true,         count_for_bytes,
                                       total_bytes,  busbw_factor,
                                       init,         run,
                                       check};
    return table;
}

}  // namespace dtsim::profiler::collectives
