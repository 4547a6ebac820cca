// Reads what NCCL prints at init with NCCL_DEBUG=INFO and
// NCCL_DEBUG_SUBSYS=INIT,GRAPH[,TUNING] (docs/notes/nccl-tuning.md §7): the
// graphs its topology search found, the communicator's shape and channels,
// and its own tuning table. The graphs replace the ones dtsim's presets
// derive by hand; the table checks dtsim's NCCL model against NCCL's.
#pragma once

#include "dtsim/profiler/calibration.hpp"

#include <string>
#include <vector>

namespace dtsim::profiler {

// One "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s,
// sameChannels %d" line (search.cc ncclTopoPrintGraph), reduced over the
// ranks that printed it as NCCL reduces it (init.cc: the fewest channels and
// the lowest bandwidths, the farthest path types).
struct NcclLogGraph {
    int pattern = 0;  // 4 ring, 1-3 trees, 5 NVLS (and NVLSTree), 6 CollNet direct
    calib::NcclGraph graph;
    std::string type_intra, type_inter;  // NVL, PIX, PXB, PXN, PHB, SYS, NET, ...
};

// One cell of the table NCCL_DEBUG_SUBSYS=TUNING prints (tuning.cc).
struct NcclLogTuningCell {
    std::string function;   // Broadcast, Reduce, AllGather, ReduceScatter, AllReduce
    std::string algorithm;  // Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
    std::string protocol;   // LL, LL128, Simple
    double latency_us = 0;
    double algbw_gbps = 0;  // 0: NCCL has this one off here
};

// The largest communicator the log describes (a training job's world; torch's
// sub-groups print their own, smaller ones).
struct NcclLog {
    std::string file;
    std::string nccl_version;  // "2.21.5+cuda12.4", when printed
    int ranks = 0, nodes = 0, local_ranks = 0;
    int ranks_seen = 0;                // how many of its ranks printed their graphs
    std::vector<NcclLogGraph> graphs;  // in NCCL's order: ring, tree, [CollNet chain, direct], [NVLS]
    int coll_channels = 0;             // "%d coll channels, ...": the runtime ring/tree channels (0: not printed)
    int nvls_channels = 0;
    std::vector<NcclLogTuningCell> tuning;  // rank 0's table, when printed
};

// Errors name the file, the line and what was expected, or what to run NCCL
// with when the log lacks the lines dtsim needs.
NcclLog parse_nccl_log(const std::string& text, const std::string& file);
NcclLog read_nccl_log(const std::string& path);

// The calibration's NCCL model with the log's graphs in place of the derived
// ones: the one-node graphs for a one-node log, the multi-node ones (and the
// GPUs per node) otherwise; an NVLS graph where NCCL found one, none where it
// did not. Returns what it took, in words (also added to the provenance's
// notes). Throws ConfigError where the calibration has no NCCL model.
std::string use_nccl_log(calib::Calibration& c, const NcclLog& log);

}  // namespace dtsim::profiler
