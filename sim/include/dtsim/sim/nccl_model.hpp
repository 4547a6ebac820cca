// NCCL's own choice of algorithm and protocol per collective call, and the
// time its cost model gives that choice: src/graph/tuning.cc
// (ncclTopoTuneModel, ncclTopoGetAlgoTime) and src/enqueue.cc
// (topoGetAlgoInfo) of NCCL 2.30.7, as docs/notes/nccl-tuning.md derives them.
// The CostModel prices a collective with it wherever a calibration has an
// NcclTopology and no measured table covers the call.
#pragma once

#include "dtsim/common/dtype.hpp"
#include "dtsim/profiler/calibration.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtsim::sim {

// In NCCL's order, which breaks ties (the earlier wins).
enum class NcclAlgo : std::uint8_t { tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat };
enum class NcclProto : std::uint8_t { ll, ll128, simple };
inline constexpr int kNcclAlgos = 7;
inline constexpr int kNcclProtos = 3;
std::string_view to_string(NcclAlgo a);   // NCCL's spelling: "Tree", "Ring", "NVLS", ...
std::string_view to_string(NcclProto p);  // "LL", "LL128", "Simple"

// The NCCL environment variables dtsim models, as `--env NAME=VALUE` gives them.
struct NcclEnv {
    // Per collective kind (calib::CollectiveKind order): the algorithms and
    // protocols NCCL_ALGO and NCCL_PROTO leave, as bit masks.
    std::array<std::uint8_t, 5> algos{};
    std::array<std::uint8_t, 5> protos{};
    // NCCL_PROTO named LL128 for that kind: on even where NCCL's rules would
    // leave it off (the docs warn this "can lead to data corruption").
    std::array<bool, 5> ll128_named{};
    int max_channels = 0;  // NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS; 0: unset
    NcclEnv();
};

// The variables as NCCL reads them: NCCL_ALGO and NCCL_PROTO take a comma list
// (a leading ^ excludes), or since 2.24 `;`-separated `function:list` entries;
// names are case-insensitive. Throws ConfigError naming the variable and what
// was expected; a variable dtsim does not model is refused, not ignored.
NcclEnv parse_nccl_env(const std::vector<std::pair<std::string, std::string>>& env);
// The variables dtsim models, for --help and errors.
std::string nccl_env_names();

struct NcclChoice {
    NcclAlgo algo = NcclAlgo::ring;
    NcclProto proto = NcclProto::simple;
    double latency_us = 0;   // NCCL's latency term
    double algbw_gbps = 0;   // NCCL's algorithm bandwidth, bytes / (time - latency)
    double estimate_us = 0;  // NCCL's own estimate: what it chose by
    double time_us = 0;      // dtsim's price: the estimate with the channels actually launched
};

// NCCL's choice for one call of `kind` over `bytes` (nccl-tests' size: the
// whole buffer for all-gather and reduce-scatter) on `ranks` ranks spread
// evenly over `nodes` nodes. Throws ConfigError when NCCL_ALGO/NCCL_PROTO
// leave nothing, as NCCL fails ("No algorithm/protocol available").
NcclChoice nccl_choose(const calib::NcclTopology& topology, calib::CollectiveKind kind, std::int64_t bytes, int ranks,
                       int nodes, DType dtype, const NcclEnv& env);

}  // namespace dtsim::sim
