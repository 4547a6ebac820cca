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
// NCCL's name of a collective, as its logs print it: "AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce".
std::string_view nccl_function_name(calib::CollectiveKind kind);

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
    // NCCL_MIN_NCHANNELS / NCCL_MIN_CTAS; 0: unset. Above the graph's channels
    // NCCL duplicates rings over the same links: no faster over NVLink or IB,
    // but over sockets each channel brings its own TCP flows.
    int min_channels = 0;
    // NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD; -2: unset, the NIC's
    // auto-detected default (NCCL's own sentinel).
    int socket_threads = -2;
    int socks_per_thread = -2;
    NcclEnv();
};

// The TCP flows of each channel's connection on a socket network, as
// net_socket.cc ncclNetSocketGetNsockNthread sets them: unset variables take
// the NIC's default (AWS ENA 2 threads x 8 sockets, GCP gVNIC 4 x 1, any
// other 0 x 1); NCCL_SOCKET_NTHREADS is clamped to 16 and the product to 64.
// With no sockets (0 threads), the proxy thread moves the data over the
// connection's one control socket.
struct NcclSockets {
    int threads = 0;
    int socks_per_thread = 1;
    bool threads_default = true, socks_default = true;  // from the NIC's auto-detection
    int flows = 1;                                      // TCP flows carrying one channel's data
    double channel_gbps = 0;  // what those flows carry: flows x the calibration's flow rate, GB/s
};
NcclSockets nccl_sockets(const calib::NcclSocketNet& net, const NcclEnv& env);
// NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD whose flows fill a channel's
// share of the NIC: Lightning's 2 x 4 where that suffices, else more sockets
// (up to 4 x 16). The NIC's defaults where they already fill it.
std::pair<int, int> nccl_socket_suggestion(const calib::NcclSocketNet& net);

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
    double time_us = 0;      // dtsim's price: the estimate with the channels actually launched and,
                             // on a socket network, the bandwidth its TCP flows carry
};

// One cell of NCCL's tuning table (ncclTopoTuneModel's comm->latencies and
// comm->bandwidths, what NCCL_DEBUG_SUBSYS=TUNING prints): an algorithm and
// protocol that can run the collective here, its latency and its algorithm
// bandwidth, before ncclTopoGetAlgoTime's tree correction and ring plateau.
struct NcclTableCell {
    NcclAlgo algo = NcclAlgo::ring;
    NcclProto proto = NcclProto::simple;
    double latency_us = 0;
    double algbw_gbps = 0;
    // dtsim's: the share of that bandwidth the channels actually launched carry
    // (NCCL_MAX_NCHANNELS, TCP flows over sockets), and how many are launched.
    double launched_share = 1;
    int launched_channels = 0;
};
std::vector<NcclTableCell> nccl_tuning_table(const calib::NcclTopology& topology, calib::CollectiveKind kind, int ranks,
                                             int nodes, DType dtype, const NcclEnv& env);

// NCCL's choice for one call of `kind` over `bytes` (nccl-tests' size: the
// whole buffer for all-gather and reduce-scatter) on `ranks` ranks spread
// evenly over `nodes` nodes. Throws ConfigError when NCCL_ALGO/NCCL_PROTO
// leave nothing, as NCCL fails ("No algorithm/protocol available").
NcclChoice nccl_choose(const calib::NcclTopology& topology, calib::CollectiveKind kind, std::int64_t bytes, int ranks,
                       int nodes, DType dtype, const NcclEnv& env);

}  // namespace dtsim::sim
