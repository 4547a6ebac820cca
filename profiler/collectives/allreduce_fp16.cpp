// AllReduce of fp16 (nccl-tests all_reduce_perf -d half): S = count * 2, busbw
// factor 2(n-1)/n. On NCCL a half sum costs what its bytes cost; gloo sums
// half on the CPU element by element (torch's dist.all_reduce of a float16
// tensor, the fp16 compression hook's call), which is what this measures.
#include "collective_table.hpp"

#include "dtsim/common/half.hpp"

#include <algorithm>

namespace dtsim::profiler::collectives {
namespace {

constexpr std::int64_t kHalfSize = 2;

std::int64_t count_for_bytes(std::int64_t target_bytes, int /*nranks*/) {
    return std::max<std::int64_t>(1, target_bytes / kHalfSize);
}

std::int64_t total_bytes(std::int64_t count, int /*nranks*/) {
    return count * kHalfSize;
}

double busbw_factor(int nranks) {
    return 2.0 * (nranks - 1) / nranks;
}

// The half buffer lives in `recv`'s storage (two halves per float slot).
runtime::Half* halves(Buffers& b) {
    return reinterpret_cast<runtime::Half*>(b.recv.data());
}
const runtime::Half* halves(const Buffers& b) {
    return reinterpret_cast<const runtime::Half*>(b.recv.data());
}

// In place, as DDP's fp16 hook reduces its compressed bucket. The inputs are
// small integers: their sums are exact in half.
void init(Buffers& b) {
    b.send = {};
    b.recv.assign(static_cast<std::size_t>((b.count + 1) / 2), 0.0f);
    runtime::Half* h = halves(b);
    for (std::int64_t i = 0; i < b.count; ++i) h[i] = fp16_bits(input_value(b.rank, i));
}

void run(Buffers& b, runtime::Communicator& comm) {
    comm.allreduce_sum(halves(b), b.count);
}

std::int64_t check(const Buffers& b) {
    std::int64_t wrong = 0;
    const runtime::Half* h = halves(b);
    for (std::int64_t i = 0; i < b.count; ++i)
        if (differs(fp16_value(h[i]), summed_value(b.nranks, i))) ++wrong;
    return wrong;
}

}  // namespace

const CollectiveTable& allreduce_fp16_table() {
    static const CollectiveTable table{"all_reduce", calib::CollectiveKind::allreduce,
                                       "sum",        -1,
                                       true,         count_for_bytes,
                                       total_bytes,  busbw_factor,
                                       init,         run,
                                       check,        DType::fp16};
    return table;
}

}  // namespace dtsim::profiler::collectives
