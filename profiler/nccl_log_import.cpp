// NCCL's own INFO output (NCCL 2.21 to 2.30; docs/notes/nccl-tuning.md §7)
// into the graphs of dtsim's NCCL model. Each line NCCL prints is
// "host:pid:tid [dev] NCCL INFO message", often behind a launcher's own
// prefix ("[0] ", "[1,0]<stdout>:"); a thread's lines are told apart by the
// text before " NCCL INFO". Per thread, init prints its graphs
// ("Pattern ...", search.cc ncclTopoPrintGraph) in NCCL's order (ring, tree,
// the two CollNet graphs where CollNet is on, NVLS where NVSwitch multicast
// is), then "comm %p rank %d nRanks %d nNodes %d localRanks %d ...", then on
// rank 0 the tuning table (tuning.cc ncclTopoTuneModel), then "%d coll
// channels, ...". Several communicators (torch's sub-groups) repeat it.
#include "dtsim/profiler/nccl_log_import.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <regex>
#include <sstream>

namespace dtsim::profiler {
namespace {

constexpr const char* kHowToRun =
    "run the job with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING (NCCL 2.21 or later) and give its whole "
    "output";

// topo.cc topoPathTypeStr, nearest first (2.30.7; older releases lack some).
constexpr std::array<std::string_view, 12> kPathTypes = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                                         "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};

int path_rank(std::string_view type) {
    const auto it = std::find(kPathTypes.begin(), kPathTypes.end(), type);
    return it == kPathTypes.end() ? -1 : static_cast<int>(it - kPathTypes.begin());
}

struct Comm {
    std::string thread;
    int rank = -1, ranks = 0, nodes = 0, local_ranks = 0;
    std::vector<NcclLogGraph> graphs;
    int coll_channels = 0, nvls_channels = 0;
    std::vector<NcclLogTuningCell> tuning;
};

struct Thread {
    std::vector<NcclLogGraph> pending;               // graphs printed since this thread's last communicator line
    int comm = -1;                                   // index of its last communicator
    std::vector<std::string> algorithms, protocols;  // the tuning block being printed
};

std::string trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return "";
    const auto e = s.find_last_not_of(" \t\r");
    return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> cells_of(std::string_view row) {
    std::vector<std::string> out;
    std::size_t at = row.find('|');
    while (at != std::string_view::npos) {
        const std::size_t next = row.find('|', at + 1);
        if (next == std::string_view::npos) break;
        out.push_back(trim(row.substr(at + 1, next - at - 1)));
        at = next;
    }
    return out;
}

double number(const std::string& s, const std::string& file, int line, std::string_view what) {
    try {
        std::size_t used = 0;
        const double v = std::stod(s, &used);
        if (used == s.size() && v >= 0 && v < 1e9) return v;
    } catch (const std::exception&) {
    }
    throw ConfigError(fmt::format("{}:{}: {}: expected a number from 0 to 1e9, found '{}'", file, line, what, s));
}

}  // namespace

NcclLog parse_nccl_log(const std::string& text, const std::string& file) {
    static const std::regex graph_re(
        R"(^Pattern (\d+), crossNic (\d+), nChannels (\d+), (?:bw|speed) ([0-9.eE+-]+)/([0-9.eE+-]+), type (\w+)/(\w+), sameChannels (\d+))");
    static const std::regex comm_re(R"(^comm (\S+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank)");
    static const std::regex channels_re(R"(^(\d+) coll channels, (?:(\d+) collnet channels, )?(\d+) nvls channels)");
    static const std::regex version_re(R"(NCCL version (\S+))");
    static const std::regex row_re(R"(^\s*(Broadcast|Reduce|AllGather|ReduceScatter|AllReduce) \|)");
    static const std::regex cell_re(R"(^([0-9.]+)/\s*([0-9.]+)$)");
    static const std::regex thread_re(R"(([A-Za-z0-9_.-]+:\d+:\d+)$)");

    NcclLog log;
    log.file = file;
    std::vector<Comm> comms;
    std::map<std::string, Thread> threads;
    std::istringstream in(text);
    std::string raw;
    int line_no = 0;
    bool any_info = false;
    while (std::getline(in, raw)) {
        ++line_no;
        std::smatch m;
        if (log.nccl_version.empty() && std::regex_search(raw, m, version_re)) log.nccl_version = m[1];
        const auto info = raw.find("NCCL INFO ");
        if (info == std::string::npos) continue;
        any_info = true;
        // The thread: NCCL's "host:pid:tid" before "[dev] NCCL INFO", without a
        // launcher's prefix; where the host part is cut, whatever precedes.
        std::string thread = trim(std::string_view(raw).substr(0, info));
        if (const auto dev = thread.rfind(" ["); dev != std::string::npos) thread.resize(dev);
        if (std::smatch t; std::regex_search(thread, t, thread_re)) thread = t[1];
        Thread& th = threads[thread];
        const std::string message = raw.substr(info + 10);
        const std::string where = fmt::format("{}:{}", file, line_no);

        if (std::regex_search(message, m, graph_re)) {
            NcclLogGraph g;
            g.pattern = static_cast<int>(number(m[1], file, line_no, "the graph's pattern"));
            g.graph.channels = static_cast<int>(number(m[3], file, line_no, "nChannels"));
            g.graph.bw_intra_gbps = number(m[4], file, line_no, "the graph's intra-node bandwidth (bw X/_)");
            g.graph.bw_inter_gbps = number(m[5], file, line_no, "the graph's inter-node bandwidth (bw _/X)");
            g.type_intra = m[6];
            g.type_inter = m[7];
            for (const auto& type : {g.type_intra, g.type_inter})
                if (path_rank(type) < 0)
                    throw ConfigError(fmt::format("{}: path type '{}': expected one of NCCL's {}", where, type,
                                                  fmt::join(kPathTypes, ", ")));
            if (g.graph.channels < 1 || g.graph.channels > 64)
                throw ConfigError(
                    fmt::format("{}: nChannels {}: expected 1 to 64 (MAXCHANNELS)", where, g.graph.channels));
            th.pending.push_back(std::move(g));
        } else if (std::regex_search(message, m, comm_re)) {
            Comm c;
            c.thread = thread;
            c.rank = static_cast<int>(number(m[2], file, line_no, "rank"));
            c.ranks = static_cast<int>(number(m[3], file, line_no, "nRanks"));
            c.nodes = static_cast<int>(number(m[4], file, line_no, "nNodes"));
            c.local_ranks = static_cast<int>(number(m[5], file, line_no, "localRanks"));
            if (c.ranks < 1 || c.nodes < 1 || c.nodes > c.ranks || c.local_ranks < 1 || c.local_ranks > c.ranks)
                throw ConfigError(fmt::format(
                    "{}: nRanks {} nNodes {} localRanks {}: expected 1 <= nNodes <= nRanks and 1 <= localRanks <= "
                    "nRanks",
                    where, c.ranks, c.nodes, c.local_ranks));
            c.graphs = std::move(th.pending);
            th.pending.clear();
            th.comm = static_cast<int>(comms.size());
            comms.push_back(std::move(c));
        } else if (std::regex_search(message, m, channels_re)) {
            if (th.comm >= 0) {
                comms[static_cast<std::size_t>(th.comm)].coll_channels =
                    static_cast<int>(number(m[1], file, line_no, "coll channels"));
                comms[static_cast<std::size_t>(th.comm)].nvls_channels =
                    static_cast<int>(number(m[3], file, line_no, "nvls channels"));
            }
        } else if (message.starts_with("  Algorithm   |")) {
            th.algorithms.clear();
            for (const auto& name : cells_of(message)) th.algorithms.push_back(name);
        } else if (message.starts_with("  Protocol    |")) {
            th.protocols = cells_of(message);
        } else if (std::regex_search(message, m, row_re) && th.comm >= 0 && !th.algorithms.empty()) {
            const std::vector<std::string> cells = cells_of(message);
            for (std::size_t i = 0; i < cells.size() && i / 3 < th.algorithms.size(); ++i) {
                std::smatch cm;
                if (!std::regex_match(cells[i], cm, cell_re))
                    throw ConfigError(fmt::format("{}: {} cell {} '{}': expected latency/bandwidth, e.g. 8.4/ 24.0",
                                                  where, std::string(m[1]), i + 1, cells[i]));
                NcclLogTuningCell cell;
                cell.function = m[1];
                cell.algorithm = th.algorithms[i / 3];
                cell.protocol = i < th.protocols.size() ? th.protocols[i] : std::array{"LL", "LL128", "Simple"}[i % 3];
                cell.latency_us = number(cm[1], file, line_no, "the tuning table's latency");
                cell.algbw_gbps = number(cm[2], file, line_no, "the tuning table's bandwidth");
                comms[static_cast<std::size_t>(th.comm)].tuning.push_back(std::move(cell));
            }
        }
    }
    if (!any_info)
        throw ConfigError(fmt::format("{}: no 'NCCL INFO' line: expected NCCL's debug output; {}", file, kHowToRun));
    // The largest communicator whose ranks printed graphs.
    const Comm* world = nullptr;
    for (const Comm& c : comms)
        if (!c.graphs.empty() && (world == nullptr || c.ranks > world->ranks)) world = &c;
    if (world == nullptr)
        throw ConfigError(fmt::format(
            "{}: no communicator with its graphs: expected 'Pattern N, crossNic N, nChannels N, bw X/Y, ...' lines "
            "(NCCL_DEBUG_SUBSYS GRAPH) before a 'comm 0x... rank R nRanks N nNodes M localRanks L ...' line "
            "(INIT); {}",
            file, kHowToRun));
    log.ranks = world->ranks;
    log.nodes = world->nodes;
    log.local_ranks = world->local_ranks;
    for (const Comm& c : comms) {
        if (c.ranks != world->ranks || c.nodes != world->nodes) continue;
        if (!c.tuning.empty() && log.tuning.empty()) log.tuning = c.tuning;
        if (c.coll_channels > 0)
            log.coll_channels = log.coll_channels == 0 ? c.coll_channels : std::min(log.coll_channels, c.coll_channels);
        if (c.nvls_channels > 0)
            log.nvls_channels = log.nvls_channels == 0 ? c.nvls_channels : std::min(log.nvls_channels, c.nvls_channels);
        if (c.graphs.empty()) continue;
        if (c.graphs.front().pattern != 4)
            throw ConfigError(
                fmt::format("{}: rank {}'s first graph has pattern {}: expected the ring's, 4 (NCCL "
                            "prints the ring graph first)",
                            file, c.rank, c.graphs.front().pattern));
        if (log.graphs.empty()) {
            log.graphs = c.graphs;
        } else if (c.graphs.size() != log.graphs.size()) {
            throw ConfigError(
                fmt::format("{}: rank {} printed {} graphs where another rank of the same {}-rank "
                            "communicator printed {}: expected one init per rank",
                            file, c.rank, c.graphs.size(), c.ranks, log.graphs.size()));
        } else {
            // init.cc: the fewest channels, the lowest bandwidths and the farthest path types over the ranks.
            for (std::size_t i = 0; i < c.graphs.size(); ++i) {
                NcclLogGraph& g = log.graphs[i];
                const NcclLogGraph& r = c.graphs[i];
                g.graph.channels = std::min(g.graph.channels, r.graph.channels);
                g.graph.bw_intra_gbps = std::min(g.graph.bw_intra_gbps, r.graph.bw_intra_gbps);
                g.graph.bw_inter_gbps = std::min(g.graph.bw_inter_gbps, r.graph.bw_inter_gbps);
                if (path_rank(r.type_intra) > path_rank(g.type_intra)) g.type_intra = r.type_intra;
                if (path_rank(r.type_inter) > path_rank(g.type_inter)) g.type_inter = r.type_inter;
            }
        }
        ++log.ranks_seen;
    }
    for (const NcclLogGraph& g : log.graphs)
        if (!(g.graph.bw_intra_gbps > 0) || !(g.graph.bw_inter_gbps > 0))
            throw ConfigError(
                fmt::format("{}: a pattern-{} graph with bandwidth {}/{}: expected both above 0 (NCCL "
                            "found no path for it)",
                            file, g.pattern, g.graph.bw_intra_gbps, g.graph.bw_inter_gbps));
    return log;
}

NcclLog read_nccl_log(const std::string& path) {
    const std::string text = read_config_file(path);
    check_text(text, path, "NCCL's debug output (NCCL_DEBUG=INFO)");
    return parse_nccl_log(text, path);
}

std::string use_nccl_log(calib::Calibration& c, const NcclLog& log) {
    if (!c.nccl.present())
        throw ConfigError(fmt::format(
            "--import-nccl-log {}: the --base calibration '{}' has no NCCL model to take the graphs; use an NVIDIA "
            "preset (h100-sxm, h200-sxm, a100-sxm, a100-40gb, b200) or a calibration made from one",
            log.file, c.name));
    calib::NcclTopology& t = c.nccl;
    const NcclLogGraph& ring = log.graphs.front();
    const calib::NcclGraph tree = log.graphs.size() > 1 ? log.graphs[1].graph : ring.graph;
    calib::NcclGraph nvls;  // none unless NCCL found NVSwitch multicast
    for (const NcclLogGraph& g : log.graphs)
        if (g.pattern == 5) nvls = g.graph;
    t.nvlink = ring.type_intra == "NVL" || ring.type_intra == "NVB";
    if (log.nodes <= 1) {
        t.ring_node = ring.graph;
        t.tree_node = tree;
        t.nvls_node = nvls;
        t.nvls = nvls.channels > 0;
        if (log.coll_channels > 0) t.channels_node = log.coll_channels;
    } else {
        t.ring_nodes = ring.graph;
        t.tree_nodes = tree;
        // Over a socket network dtsim runs no NVLSTree (its graph there is not worked out).
        t.nvls_nodes = t.socket.present() ? calib::NcclGraph{} : nvls;
        if (log.coll_channels > 0) t.channels_nodes = log.coll_channels;
        t.gpus_per_node = log.local_ranks;
        // LL128 crosses nodes only with the NIC beside the GPU (typeInter <= PXN).
        t.nic_near_gpu = path_rank(ring.type_inter) <= path_rank("PXN");
    }
    std::string graphs;
    for (const NcclLogGraph& g : log.graphs)
        graphs +=
            fmt::format("{}pattern {} {} x {:g}/{:g} {}/{}", graphs.empty() ? "" : ", ", g.pattern, g.graph.channels,
                        g.graph.bw_intra_gbps, g.graph.bw_inter_gbps, g.type_intra, g.type_inter);
    const std::string taken =
        fmt::format("NCCL graphs of {} ranks on {} node{} from {}{} ({}; as {} of its ranks printed them)", log.ranks,
                    log.nodes, log.nodes == 1 ? "" : "s", log.file,
                    log.nccl_version.empty() ? "" : ", NCCL " + log.nccl_version, graphs, log.ranks_seen);
    c.provenance.notes += (c.provenance.notes.empty() ? "" : "; ") + taken;
    return taken;
}

}  // namespace dtsim::profiler
