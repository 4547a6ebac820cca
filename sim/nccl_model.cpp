#include "dtsim/sim/nccl_model.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace dtsim::sim {

using calib::CollectiveKind;

namespace {

constexpr int kKinds = 5;
constexpr std::uint8_t kAllAlgos = (1u << kNcclAlgos) - 1;
constexpr std::uint8_t kAllProtos = (1u << kNcclProtos) - 1;

int idx(NcclAlgo a) {
    return static_cast<int>(a);
}

// tuning.cc ncclTunerConstantsDefaults, NCCL 2.30.7 (docs/notes/nccl-tuning.md
// §1.5). Rows: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT;
// columns: LL, LL128, Simple. CollNet, NVLS, NVLSTree and PAT run Simple only.
constexpr double kBaseLat[kNcclAlgos][kNcclProtos] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0},      {0, 0, 0},
                                                      {0, 0, 0},        {0, 0, 0},        {8.0, 8.0, 8.0}};
enum HwPath { kNvlink, kPci, kNet };
constexpr double kHwLat[3][kNcclAlgos][kNcclProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
// Caps in GB/s by GPU generation (0 Ampere, 1 Hopper and later) and node count
// (1 node, 2 nodes, more than 2).
constexpr double kLlMaxOneNode[2] = {87.7, 141.0};
constexpr double kLlMaxNodes[2][2] = {{39.0, 20.4}, {22.5, 19.0}};  // [Intel, AMD][2 nodes, more]
constexpr double kRingLl128Cap[2] = {20.0, 36.7};                   // per channel
constexpr double kTreeLl128Cap[2][3] = {{20, 20, 20}, {36.7, 36.7, 29.0}};
constexpr double kTreeCap[2][3] = {{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
constexpr double kNvlsEfficiency[2] = {0.85, 0.74};  // Hopper, Blackwell
// perChMaxNVLSTreeBws: NVLSTree's bandwidth per channel, Hopper and Blackwell,
// by node count (1 node: unused, NVLSTree needs several).
constexpr double kNvlsTreeCap[2][3] = {{0, 57.7, 45.5}, {0, 96.0, 80.0}};
// treeCorrectionFactor[proto][log2(bytes / 64)], 64 B ... 512 MiB.
constexpr double kTreeCorrection[kNcclProtos][24] = {
    {1, 1, 1, 1, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1, 1, 1, 1, 1},
    {1, 1, 1, 1, 1, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1, 1, 1},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

constexpr std::array<std::string_view, kNcclAlgos> kAlgoNames = {
    "Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr std::array<std::string_view, kNcclProtos> kProtoNames = {"LL", "LL128", "Simple"};
// NCCL's function names, in calib::CollectiveKind order.
constexpr std::array<std::string_view, kKinds> kFunctionNames = {"AllReduce", "ReduceScatter", "AllGather", "Broadcast",
                                                                 "Reduce"};

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return std::string(s);
}

std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t end = s.find(sep, start);
        out.push_back(trim(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
        if (end == std::string_view::npos) return out;
        start = end + 1;
    }
}

template <std::size_t N>
std::string joined(const std::array<std::string_view, N>& names) {
    return fmt::format("{}", fmt::join(names, ", "));
}

// One NCCL_ALGO / NCCL_PROTO list ("ring,tree" or "^nvls"): the mask it leaves.
template <std::size_t N>
std::uint8_t parse_list(const std::string& var, const std::string& list, const std::array<std::string_view, N>& names,
                        std::array<bool, N>& named) {
    std::string_view body = list;
    const bool exclude = body.starts_with('^');
    if (exclude) body.remove_prefix(1);
    std::uint8_t mask = 0;
    for (const std::string& token : split(body, ',')) {
        const auto it =
            std::find_if(names.begin(), names.end(), [&](std::string_view n) { return lower(n) == lower(token); });
        if (it == names.end())
            throw ConfigError(
                fmt::format("--env {}={}: unknown name '{}': expected a comma list of {} (a leading ^ "
                            "excludes them)",
                            var, list, token, joined(names)));
        mask |= static_cast<std::uint8_t>(1u << (it - names.begin()));
        named[static_cast<std::size_t>(it - names.begin())] = true;
    }
    const std::uint8_t all = static_cast<std::uint8_t>((1u << N) - 1);
    return exclude ? static_cast<std::uint8_t>(all & ~mask) : mask;
}

// NCCL_ALGO / NCCL_PROTO: a list for every function, or `function:list`
// entries separated by `;`, of which only the first may omit its function.
template <std::size_t N>
void parse_per_function(const std::string& var, const std::string& value, const std::array<std::string_view, N>& names,
                        std::array<std::uint8_t, kKinds>& masks, std::array<bool, kKinds>* ll128_named) {
    const auto entries = split(value, ';');
    for (std::size_t e = 0; e < entries.size(); ++e) {
        const std::string& entry = entries[e];
        const std::size_t colon = entry.find(':');
        std::array<bool, N> named{};
        if (colon == std::string::npos) {
            if (e != 0)
                throw ConfigError(
                    fmt::format("--env {}={}: entry '{}' names no function; only the first entry may "
                                "omit it (e.g. {}=ring;allreduce:tree,ring)",
                                var, value, entry, var));
            const std::uint8_t mask = parse_list(var, entry, names, named);
            masks.fill(mask);
            if (ll128_named) ll128_named->fill(named[1]);
            continue;
        }
        const std::string function = trim(std::string_view(entry).substr(0, colon));
        const auto it = std::find_if(kFunctionNames.begin(), kFunctionNames.end(),
                                     [&](std::string_view n) { return lower(n) == lower(function); });
        if (it == kFunctionNames.end())
            throw ConfigError(fmt::format("--env {}={}: unknown function '{}': expected one of {}", var, value,
                                          function, joined(kFunctionNames)));
        const auto k = static_cast<std::size_t>(it - kFunctionNames.begin());
        masks[k] = parse_list(var, entry.substr(colon + 1), names, named);
        if (ll128_named) (*ll128_named)[k] = named[1];
    }
}

int parse_channels(const std::string& var, const std::string& value, int max) {
    try {
        std::size_t used = 0;
        const long v = std::stol(value, &used);
        if (used == value.size() && v >= 1 && v <= max) return static_cast<int>(v);
    } catch (const std::exception&) {
    }
    throw ConfigError(fmt::format("--env {}={}: expected a whole number of channels from 1 to {}", var, value, max));
}

// NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD: a whole number >= 0. NCCL
// clamps the threads to 16 (MAX_THREADS) with a warning; dtsim does the same.
int parse_socket_count(const std::string& var, const std::string& value) {
    try {
        std::size_t used = 0;
        const long v = std::stol(value, &used);
        if (used == value.size() && v >= 0 && v <= 1024) return static_cast<int>(v);
    } catch (const std::exception&) {
    }
    throw ConfigError(fmt::format("--env {}={}: expected a whole number from 0 to 1024 (NCCL uses at most {})", var,
                                  value, var == "NCCL_SOCKET_NTHREADS" ? "16 threads" : "64 sockets in all"));
}

constexpr std::array<std::string_view, 10> kModelledVars = {
    "NCCL_ALGO",     "NCCL_PROTO",      "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS",   "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS", "NCCL_MAX_NRINGS", "NCCL_MIN_NRINGS",    "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"};
// net_socket.cc: MAX_THREADS and MAX_SOCKETS.
constexpr int kMaxSocketThreads = 16;
constexpr int kMaxSockets = 64;

}  // namespace

std::string_view to_string(NcclAlgo a) {
    return kAlgoNames[static_cast<std::size_t>(a)];
}
std::string_view to_string(NcclProto p) {
    return kProtoNames[static_cast<std::size_t>(p)];
}
std::string_view nccl_function_name(CollectiveKind kind) {
    return kFunctionNames[static_cast<std::size_t>(kind)];
}

std::string nccl_env_names() {
    return joined(kModelledVars);
}

NcclEnv::NcclEnv() {
    algos.fill(kAllAlgos);
    protos.fill(kAllProtos);
}

NcclEnv parse_nccl_env(const std::vector<std::pair<std::string, std::string>>& env) {
    NcclEnv out;
    // NCCL_MAX_NRINGS is the old name, ignored when NCCL_MAX_NCHANNELS is set;
    // NCCL_MAX_CTAS combines with it, the stricter winning. The same for the
    // minimums, the larger winning.
    int max_nch = 0, max_rings = 0, max_ctas = 0, min_nch = 0, min_rings = 0, min_ctas = 0;
    const std::pair<std::string_view, int*> channel_vars[] = {
        {"NCCL_MAX_NCHANNELS", &max_nch}, {"NCCL_MAX_NRINGS", &max_rings}, {"NCCL_MAX_CTAS", &max_ctas},
        {"NCCL_MIN_NCHANNELS", &min_nch}, {"NCCL_MIN_NRINGS", &min_rings}, {"NCCL_MIN_CTAS", &min_ctas}};
    for (const auto& [name, value] : env) {
        const auto channels = std::find_if(std::begin(channel_vars), std::end(channel_vars),
                                           [&](const auto& v) { return v.first == name; });
        if (name == "NCCL_ALGO")
            parse_per_function(name, value, kAlgoNames, out.algos, nullptr);
        else if (name == "NCCL_PROTO")
            parse_per_function(name, value, kProtoNames, out.protos, &out.ll128_named);
        else if (channels != std::end(channel_vars))
            *channels->second = parse_channels(name, value, 64);
        else if (name == "NCCL_SOCKET_NTHREADS")
            out.socket_threads = parse_socket_count(name, value);
        else if (name == "NCCL_NSOCKS_PERTHREAD")
            out.socks_per_thread = parse_socket_count(name, value);
        else if (name.starts_with("NCCL_"))
            throw ConfigError(
                fmt::format("--env {}: dtsim does not model this NCCL variable; it models {}", name, nccl_env_names()));
        else
            throw ConfigError(
                fmt::format("--env {}: not an NCCL variable; --env sets the NCCL variables dtsim models: {}", name,
                            nccl_env_names()));
    }
    const int max_channels = max_nch ? max_nch : max_rings;
    out.max_channels = max_channels && max_ctas ? std::min(max_channels, max_ctas) : std::max(max_channels, max_ctas);
    out.min_channels = std::max(min_nch ? min_nch : min_rings, min_ctas);
    return out;
}

NcclSockets nccl_sockets(const calib::NcclSocketNet& net, const NcclEnv& env) {
    NcclSockets s;
    // The NIC's defaults: its PCI vendor, 0x1d0f (AWS) or 0x1ae0 (GCP).
    using calib::SocketNic;
    const int auto_threads = net.vendor == SocketNic::aws ? 2 : net.vendor == SocketNic::gcp ? 4 : 0;
    const int auto_socks = net.vendor == SocketNic::aws ? 8 : 1;
    s.threads_default = env.socket_threads == -2;
    s.socks_default = env.socks_per_thread == -2;
    s.threads = std::min(kMaxSocketThreads, s.threads_default ? auto_threads : env.socket_threads);
    s.socks_per_thread = s.socks_default ? auto_socks : env.socks_per_thread;
    if (s.threads > 0 && s.threads * s.socks_per_thread > kMaxSockets) s.socks_per_thread = kMaxSockets / s.threads;
    // Each request is cut into tasks of at least 64 KiB spread over the
    // sockets; with none, the control socket carries the data.
    s.flows = std::max(1, s.threads * s.socks_per_thread);
    s.channel_gbps = s.flows * net.flow_gbps;
    return s;
}

std::pair<int, int> nccl_socket_suggestion(const calib::NcclSocketNet& net) {
    const NcclSockets auto_set = nccl_sockets(net, NcclEnv{});
    if (auto_set.channel_gbps >= net.channel_gbps()) return {auto_set.threads, auto_set.socks_per_thread};
    const int flows = static_cast<int>(std::ceil(net.channel_gbps() / net.flow_gbps));
    const int threads = flows <= 8 ? 2 : 4;
    const int socks = std::min(16, std::max(4, (flows + threads - 1) / threads));
    return {threads, socks};
}

std::vector<NcclTableCell> nccl_tuning_table(const calib::NcclTopology& t, CollectiveKind kind, int ranks, int nodes,
                                             DType dtype, const NcclEnv& env) {
    const int n = ranks, N = std::max(1, nodes), ppn = std::max(1, ranks / std::max(1, nodes));
    const bool allreduce = kind == CollectiveKind::allreduce;
    const bool gather_scatter = kind == CollectiveKind::allgather || kind == CollectiveKind::reduce_scatter;
    const auto k = static_cast<std::size_t>(kind);
    const int gen = t.sm >= 90 ? 1 : 0;
    const int node_idx = N == 1 ? 0 : N == 2 ? 1 : 2;
    const int nsteps = allreduce ? 2 * (n - 1) : gather_scatter ? n - 1 : n;
    const int log2_nodes = static_cast<int>(std::floor(std::log2(static_cast<double>(N))));
    const double ll_max = N == 1 ? kLlMaxOneNode[gen] : kLlMaxNodes[t.amd_cpu ? 1 : 0][N == 2 ? 0 : 1];
    // Channels: NCCL's estimate uses the graphs' channels; the launch uses C,
    // clamped by NCCL_MAX/MIN_NCHANNELS. More than C duplicates the rings over
    // the same links: no faster.
    const int c_default = N == 1 ? t.channels_node : t.channels_nodes;
    const int c_used = env.max_channels > 0 ? std::min(c_default, env.max_channels) : c_default;
    const double channel_share = c_default > 0 ? static_cast<double>(c_used) / c_default : 1.0;
    // Channels launched: NCCL_MIN_NCHANNELS copies rings up to that count
    // (within the maximum), which over sockets adds TCP flows.
    const int c_launched =
        std::max(c_used, env.max_channels > 0 ? std::min(env.min_channels, env.max_channels) : env.min_channels);
    // LL128 runs by default only over NVLink, and across nodes only with the NIC beside the GPU.
    const bool ll128_ok = env.ll128_named[k] || (t.nvlink && (N == 1 || t.nic_near_gpu));
    const bool nvls_dtype = dtype == DType::fp32 || dtype == DType::bf16 || dtype == DType::fp16;
    // Across nodes over TCP, each channel moves what its flows carry; NCCL
    // chose by the NIC's speed, unaware of them.
    const bool sockets = N > 1 && t.socket.present();
    const double socket_channel_gbps = sockets ? nccl_sockets(t.socket, env).channel_gbps : 0.0;

    std::vector<NcclTableCell> cells;
    for (int a = 0; a < kNcclAlgos; ++a) {
        const auto algo = static_cast<NcclAlgo>(a);
        if (!(env.algos[k] & (1u << a))) continue;
        // Which algorithms run this collective here (§2.1-2.2). CollNet needs a
        // SHARP plugin and is off by default; multi-node NVLS needs CollNet too.
        // NVLSTree: allreduce across NVSwitch nodes (ncclTopoTuneModel drops it
        // on one node), sums of the NVLS types, over the NVLS graph's NICs.
        bool available = false;
        switch (algo) {
            case NcclAlgo::ring: available = true; break;
            case NcclAlgo::tree: available = allreduce; break;
            case NcclAlgo::nvls:
                available = t.nvls && gen == 1 && t.nvls_node.channels >= 2 && N == 1 && nvls_dtype &&
                            (allreduce || (gather_scatter && ppn <= 32));
                break;
            case NcclAlgo::nvls_tree:
                // Not over sockets: its graph there is not worked out (use_socket_network drops it too).
                available =
                    allreduce && t.nvls && t.sm >= 90 && N > 1 && !sockets && nvls_dtype && t.nvls_nodes.channels >= 2;
                break;
            case NcclAlgo::pat: available = gather_scatter && ppn == 1 && N > 1; break;
            case NcclAlgo::collnet_direct:
            case NcclAlgo::collnet_chain: available = false; break;
        }
        if (!available) continue;
        const bool simple_only = algo != NcclAlgo::ring && algo != NcclAlgo::tree;
        const calib::NcclGraph& graph = algo == NcclAlgo::tree        ? (N == 1 ? t.tree_node : t.tree_nodes)
                                        : algo == NcclAlgo::nvls      ? t.nvls_node
                                        : algo == NcclAlgo::nvls_tree ? t.nvls_nodes
                                                                      : (N == 1 ? t.ring_node : t.ring_nodes);
        // Across nodes, a job on part of a node reaches only its GPUs' NICs
        // (a socket network's NICs serve the whole node).
        const double nic_share =
            N > 1 && !sockets ? std::min(1.0, static_cast<double>(ppn) / std::max(1, t.gpus_per_node)) : 1.0;
        const double nch =
            algo == NcclAlgo::nvls ? graph.channels : std::max(1.0, std::round(graph.channels * nic_share));
        if (algo == NcclAlgo::nvls_tree && nch < 2) continue;  // ncclTopoTuneModel: NVLS needs 2 channels
        const double channel_bw = N <= 2 ? graph.bw_intra_gbps : graph.bw_inter_gbps;
        const double B = nch * channel_bw;
        // The launched channels' flows against the graph's channels at the NIC's speed.
        const double socket_share =
            sockets && c_default > 0 ? std::min(1.0, c_launched * socket_channel_gbps /
                                                         (static_cast<double>(c_default) * channel_bw) / channel_share)
                                     : 1.0;
        for (int p = 0; p < kNcclProtos; ++p) {
            const auto proto = static_cast<NcclProto>(p);
            if (!(env.protos[k] & (1u << p))) continue;
            if (simple_only && proto != NcclProto::simple) continue;
            if (proto == NcclProto::ll128 && !ll128_ok) continue;
            // Bus bandwidth (§1.2).
            double bus = 0;
            switch (algo) {
                case NcclAlgo::ring:
                    bus = proto == NcclProto::ll      ? std::min(ll_max, 0.5 * B)
                          : proto == NcclProto::ll128 ? std::min(0.92 * B, nch * kRingLl128Cap[gen])
                                                      : B;
                    break;
                case NcclAlgo::tree: {
                    const double b1 = std::min(0.92 * B, nch * kTreeCap[gen][node_idx]);
                    const double f = N == 1 ? 7.0 / 9.0 : 120.0 / 128.0;
                    bus = proto == NcclProto::ll      ? std::min(b1 / 3.8, ll_max)
                          : proto == NcclProto::ll128 ? std::min(b1 * f, nch * kTreeLl128Cap[gen][node_idx])
                                                      : b1;
                    break;
                }
                case NcclAlgo::nvls:
                case NcclAlgo::nvls_tree: {
                    const double eff = kNvlsEfficiency[t.sm >= 100 ? 1 : 0];
                    const double intra = graph.bw_intra_gbps * eff * (nch - 1) / nch *
                                         (allreduce ? 2.0 : static_cast<double>(ppn - 1) / ppn);
                    if (algo == NcclAlgo::nvls) {
                        bus = nch * std::min(intra, graph.bw_inter_gbps);
                    } else {  // the NICs' rate, doubled on two nodes, and a cap per channel
                        const double inter = graph.bw_inter_gbps * (N <= 2 ? 2.0 : 1.0);
                        bus = nch * std::min({intra, inter, kNvlsTreeCap[t.sm >= 100 ? 1 : 0][node_idx]});
                    }
                    break;
                }
                case NcclAlgo::pat: bus = 0.75 * B; break;
                default: break;
            }
            if (bus <= 0) continue;
            // Algorithm bandwidth: ring-like algorithms move nsteps/n of the
            // data per rank; a tree half; gather/scatter off the ring, all of it.
            double algbw = algo == NcclAlgo::tree                     ? 0.5 * bus
                           : gather_scatter && algo != NcclAlgo::ring ? bus
                                                                      : bus * n / nsteps;
            // Latency (§1.3).
            const HwPath intra_path = t.nvlink ? kNvlink : kPci;
            const double base = kBaseLat[a][p];
            const double h_intra = kHwLat[intra_path][a][p];
            const double h_net = kHwLat[kNet][ppn == 1 ? idx(NcclAlgo::tree) : a][p];
            double latency = 0;
            switch (algo) {
                case NcclAlgo::ring:
                    if (allreduce || gather_scatter) {
                        const int n_inter = N == 1 ? 0 : allreduce ? 2 * (N - 1) : N - 1;
                        const double overhead =
                            N == 1 ? 0.0 : (t.amd_cpu ? 2.0 : 1.0) * (proto == NcclProto::simple ? 3.0 : 1.0);
                        latency = base + (nsteps - n_inter) * std::max(h_intra, overhead) + n_inter * h_net;
                    } else {
                        latency = base + (N > 1 ? h_net : h_intra);  // the ring graph has sameChannels (assumed)
                    }
                    break;
                case NcclAlgo::tree: latency = base + 2.0 * ((ppn - 1) * h_intra + log2_nodes * h_net); break;
                case NcclAlgo::nvls: latency = h_intra; break;
                case NcclAlgo::nvls_tree: latency = base + h_intra + 2.0 * log2_nodes * h_net; break;
                case NcclAlgo::pat: latency = base + log2_nodes * h_net / 3.5 + 2.8 * n; break;
                default: break;
            }
            // NVLS launches its own channel count (NCCL_NVLS_NCHANNELS), not NCCL_MAX_NCHANNELS's.
            const bool own_channels = algo == NcclAlgo::nvls || algo == NcclAlgo::nvls_tree;
            cells.push_back({algo, proto, latency, algbw, own_channels ? 1.0 : channel_share * socket_share,
                             own_channels ? c_default : c_used});
        }
    }
    return cells;
}

NcclChoice nccl_choose(const calib::NcclTopology& t, CollectiveKind kind, std::int64_t bytes, int ranks, int nodes,
                       DType dtype, const NcclEnv& env) {
    const int n = ranks, N = std::max(1, nodes);
    const bool allreduce = kind == CollectiveKind::allreduce;
    const bool gather_scatter = kind == CollectiveKind::allgather || kind == CollectiveKind::reduce_scatter;
    const auto k = static_cast<std::size_t>(kind);
    const int c_default = N == 1 ? t.channels_node : t.channels_nodes;
    const double S = static_cast<double>(bytes);
    NcclChoice best;
    double best_estimate = std::numeric_limits<double>::infinity();
    for (const NcclTableCell& cell : nccl_tuning_table(t, kind, ranks, nodes, dtype, env)) {
        // Time (§1.4): ncclTopoGetAlgoTime's corrections, which the table leaves out.
        double algbw = cell.algbw_gbps;
        if (cell.algo == NcclAlgo::tree && allreduce && S >= 64) {
            const int i = static_cast<int>(std::floor(std::log2(S / 64)));
            if (i >= 0 && i <= 22) algbw *= kTreeCorrection[static_cast<int>(cell.proto)][i];
        }
        const auto ring_plateau = [&](int channels) {
            return cell.algo == NcclAlgo::ring && cell.proto == NcclProto::simple && allreduce && N > 1 &&
                           S / (static_cast<double>(channels) * n) >= 64
                       ? 1.4
                       : 1.0;
        };
        const double estimate = cell.latency_us * ring_plateau(c_default) + S / (1000.0 * algbw);
        if (estimate < best_estimate) {
            best_estimate = estimate;
            const double launched_bw = algbw * cell.launched_share;
            best = {cell.algo,
                    cell.proto,
                    cell.latency_us * ring_plateau(c_default),
                    algbw,
                    estimate,
                    cell.latency_us * ring_plateau(cell.launched_channels) + S / (1000.0 * launched_bw)};
        }
    }
    if (!std::isfinite(best_estimate))
        throw ConfigError(fmt::format(
            "--env NCCL_ALGO/NCCL_PROTO leave no algorithm and protocol for {} on {} ranks over {} node(s); NCCL "
            "fails so at init (\"No algorithm/protocol available\"). Here {} can run {}",
            kFunctionNames[k], n, N, kFunctionNames[k],
            allreduce ? "Ring and Tree (LL, LL128, Simple), NVLS (Simple) on one node with NVLink SHARP (H100, H200) "
                        "and NVLSTree (Simple) across such nodes with 2 or more GPUs and NICs a node"
            : gather_scatter ? "Ring (LL, LL128, Simple), NVLS on one NVSwitch node and PAT with one GPU per node"
                             : "Ring only"));
    return best;
}

}  // namespace dtsim::sim
