// Reduce (nccl-tests reduce_perf) to rank 0: S = count * 4, busbw factor 1.
// Only the root's result is checked.
#include "collective_table.hpp"

#include <algorithm>

namespace dtsim::profiler::collectives {
namespace {

constexpr int kRoot = 0;

std::int64_t count_for_bytes(std::int64_t target_bytes, int /*nranks*/) {
    return std::max<std::int64_t>(1, target_bytes / kTypeSize);
}

std::int64_t total_bytes(std::int64_t count, int /*nranks*/) {
    return count * kTypeSize;
}

// Pipelined chain: every rank but the root forwards all of S.
double busbw_factor(int /*nranks*/) {
    return 1.0;
}

void init(Buffers& b) {
    const auto n = static_cast<std::size_t>(b.count);
    b.send.resize(n);
    b.recv.assign(n, 0.0f);
    for (std::size_t i = 0; i < n; ++i) b.send[i] = input_value(b.rank, static_cast<std::int64_t>(i));
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.reduce_sum(b.send.data(), b.recv.data(), b.count, kRoot);
}

std::int64_t check(const Buffers& b) {
    if (b.rank != kRoot) return 0;
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < b.count; ++i) {
        if (differs(b.recv[static_cast<std::size_t>(i)], summed_value(b.nranks, i))) ++wrong;
    }
    return wrong;
}

}  // namespace

const CollectiveTable& reduce_table() {
    static const CollectiveTable table{"reduce",    calib::CollectiveKind::reduce,
                                       "sum",       kRoot,
                                       false,       count_for_bytes,
                                       total_bytes, busbw_factor,
                                       init,        run,
                                       check};
    return table;
}

}  // namespace dtsim::profiler::collectives
