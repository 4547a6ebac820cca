// DDP's gradient bucketing, as PyTorch's Reducer does it
// (reducer.cpp compute_bucket_assignment_by_size; strategy-semantics.md §1.2).
#pragma once

#include "dtsim/common/dtype.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace dtsim::sim {

struct BucketTensor {
    int index = 0;           // parameter index (model.parameters() order)
    std::int64_t bytes = 0;  // numel * element size of the gradient
    DType dtype = DType::fp32;
};

// Walks `tensors` in the given order, keeping one open bucket per dtype, and
// closes a bucket once its size reaches the current limit (the tensor that
// crosses the limit stays in it). The first bucket of each dtype uses
// limits[0], later ones the last limit. With `sort_by_min_index` (the initial
// assignment, no gradient order known) buckets are sorted by their smallest
// parameter index; otherwise they stay in closing order. Returns parameter
// indices per bucket.
std::vector<std::vector<int>> assign_buckets_by_size(std::span<const BucketTensor> tensors,
                                                     std::span<const std::int64_t> limits, bool sort_by_min_index);

}  // namespace dtsim::sim
