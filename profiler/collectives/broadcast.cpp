// Broadcast (nccl-tests broadcast_perf) from rank 0, in place in `recv`:
// S = count * 4, busbw factor 1.
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

// Pipelined chain: every rank but the last forwards all of S.
double busbw_factor(int /*nranks*/) {
    return 1.0;
}

// The root holds its input; the others hold values the broadcast must overwrite.
void init(Buffers& b) {
    const auto n = static_cast<std::size_t>(b.count);
    b.send.clear();
    b.recv.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        b.recv[i] = b.rank == kRoot ? input_value(kRoot, static_cast<std::int64_t>(i)) : -1.0f;
    }
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.broadcast(b.recv.data(), b.count, kRoot);
}

std::int64_t check(const Buffers& b) {
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < b.count; ++i) {
        if (differs(b.recv[static_cast<std::size_t>(i)], input_value(kRoot, i))) ++wrong;
    }
    return wrong;
}

}  // namespace

const CollectiveTable& broadcast_table() {
    static const CollectiveTable table{"broadcast", calib::CollectiveKind::broadcast,
                                       "none",      kRoot,
                                       false,       count_for_bytes,
                                       total_bytes, busbw_factor,
                                       init,        run,
                                       check};
    return table;
}

}  // namespace dtsim::profiler::collectives
