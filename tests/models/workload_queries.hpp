// Queries on a built Workload that the model tests share.
#pragma once

#include "dtsim/models/workload.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

namespace dtsim::test {

// Bytes every layer of transformer block `block` saves for backward.
inline std::int64_t block_saved_bytes(const models::Workload& w, int block) {
    std::int64_t total = 0;
    for (const auto& l : w.layers)
        if (l.block == block) total += l.saved_activation_bytes;
    return total;
}

inline const models::Layer& layer_named(const models::Workload& w, const std::string& name) {
    for (const auto& l : w.layers)
        if (l.name == name) return l;
    FAIL("no layer " << name);
    throw;  // unreachable
}

}  // namespace dtsim::test
