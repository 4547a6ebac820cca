#include "dtsim/sim/ddp_buckets.hpp"

#include "dtsim/common/error.hpp"

#include <algorithm>

namespace dtsim::sim {

std::vector<std::vector<int>> assign_buckets_by_size(std::span<const BucketTensor> tensors,
                                                     std::span<const std::int64_t> limits, bool sort_by_min_index) {
    DTSIM_ASSERT(!limits.empty(), "bucket assignment needs at least one size limit");
    struct Open {
        DType dtype;
        std::vector<int> indices;
        std::int64_t size = 0;
        std::size_t limit_index = 0;
    };
    std::vector<Open> open;  // one per dtype, in order of first appearance (deterministic)
    std::vector<std::vector<int>> result;
    for (const auto& t : tensors) {
        auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) { return o.dtype == t.dtype; });
        if (it == open.end()) {
            open.push_back({t.dtype, {}, 0, 0});
            it = open.end() - 1;
        }
        it->indices.push_back(t.index);
        it->size += t.bytes;
        if (it->size >= limits[it->limit_index]) {
            result.push_back(std::move(it->indices));
            it->indices.clear();
            it->size = 0;
            it->limit_index = std::min(it->limit_index + 1, limits.size() - 1);
        }
    }
    for (auto& o : open)
        if (!o.indices.empty()) result.push_back(std::move(o.indices));
    if (sort_by_min_index)
        std::stable_sort(result.begin(), result.end(), [](const auto& a, const auto& b) {
            return *std::min_element(a.begin(), a.end()) < *std::min_element(b.begin(), b.end());
        });
    return result;
}

}  // namespace dtsim::sim
