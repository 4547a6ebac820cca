// NCCL's own debug output (NCCL_DEBUG=INFO, SUBSYS INIT,GRAPH,TUNING) read
// into the graphs of dtsim's NCCL model (profiler/nccl_log_import).
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/nccl_log_import.hpp"
#include "dtsim/profiler/presets.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace dtsim;
using profiler::parse_nccl_log;

namespace {

std::string fixture() {
    return std::string(DTSIM_SOURCE_DIR) + "/tests/data/nccl_log/h100_2nodes.log";
}

// One rank's init lines as NCCL 2.30.7 prints them.
std::string rank_lines(const std::string& host, int rank, int ranks, int nodes, int local,
                       const std::vector<std::string>& graphs) {
    std::string out;
    for (const auto& g : graphs) out += fmt::format("{}:1:2 [0] NCCL INFO {}\n", host, g);
    out += fmt::format("{}:1:2 [0] NCCL INFO comm 0x5 rank {} nRanks {} nNodes {} localRanks {} localRank 0 MNNVL 0\n",
                       host, rank, ranks, nodes, local);
    return out;
}

std::string pattern(int p, int channels, double intra, double inter, const char* types = "NVL/PIX") {
    return fmt::format("Pattern {}, crossNic 0, nChannels {}, bw {:.6f}/{:.6f}, type {}, sameChannels 0", p, channels,
                       intra, inter, types);
}

}  // namespace

TEST_CASE("NCCL log: the graphs, shape and channels of a 2-node DGX H100 init are read as printed") {
    const auto log = profiler::read_nccl_log(fixture());
    CHECK(log.nccl_version == "2.30.7+cuda13.0");
    CHECK(log.ranks == 16);
    CHECK(log.nodes == 2);
    CHECK(log.local_ranks == 8);
    CHECK(log.ranks_seen == 2);
    REQUIRE(log.graphs.size() == 3);
    CHECK(log.graphs[0].pattern == 4);
    CHECK(log.graphs[0].graph.channels == 8);
    CHECK(log.graphs[0].graph.bw_inter_gbps == 48.0);
    CHECK(log.graphs[1].pattern == 1);
    CHECK(log.graphs[2].pattern == 5);
    CHECK(log.graphs[2].graph.bw_intra_gbps == 40.0);
    CHECK(log.graphs[2].graph.bw_inter_gbps == 48.0);
    CHECK(log.graphs[2].type_inter == "PIX");
    CHECK(log.coll_channels == 16);
    CHECK(log.nvls_channels == 16);
    CHECK(log.tuning.empty());
}

TEST_CASE("NCCL log: ranks are reduced as NCCL reduces them, and a smaller sub-communicator is not the world") {
    // Rank 8 found fewer, slower ring channels behind a farther NIC; NCCL runs the
    // fewest channels, the lowest bandwidths and the farthest path types (init.cc).
    std::string text = rank_lines("hostA", 0, 16, 2, 8, {pattern(4, 8, 48, 48), pattern(1, 8, 48, 48)});
    text += rank_lines("hostB", 8, 16, 2, 8, {pattern(4, 7, 45, 42, "NVL/PXB"), pattern(1, 8, 48, 48)});
    // A torch sub-group of 2 ranks, printed after the world.
    text += rank_lines("hostA", 0, 2, 1, 2, {pattern(4, 24, 20, 20), pattern(1, 24, 20, 20)});
    // A launcher's prefix before NCCL's and a bare version line.
    text = "NCCL version 2.21.5+cuda12.4\n[1,0]<stdout>:" + text;
    const auto log = parse_nccl_log(text, "two.log");
    CHECK(log.nccl_version == "2.21.5+cuda12.4");
    CHECK(log.ranks == 16);
    REQUIRE(log.graphs.size() == 2);
    CHECK(log.graphs[0].graph.channels == 7);
    CHECK(log.graphs[0].graph.bw_intra_gbps == 45.0);
    CHECK(log.graphs[0].graph.bw_inter_gbps == 42.0);
    CHECK(log.graphs[0].type_inter == "PXB");
    CHECK(log.graphs[1].graph.channels == 8);
    // NCCL before 2.14 printed "speed" for "bw".
    const auto old = parse_nccl_log(
        rank_lines("h", 0, 2, 2, 1,
                   {"Pattern 4, crossNic 0, nChannels 4, speed 1.200000/1.200000, type SYS/SYS, sameChannels 0",
                    pattern(1, 4, 1.2, 1.2, "SYS/SYS")}),
        "old.log");
    CHECK(old.graphs[0].graph.bw_intra_gbps == 1.2);
}

TEST_CASE("NCCL log: rank 0's tuning table is read cell by cell, algorithm and protocol from its header rows") {
    // tuning.cc's rows: "  Algorithm   |" + " %14s   %14s   %14s |" per algorithm, "  Protocol    |" + " %14s |",
    // then "%13s |" + "%8.1f/%6.1f |" per algorithm and protocol.
    std::string table = "h:1:2 [0] NCCL INFO   Algorithm   |";
    for (const char* a : {"Tree", "Ring", "CollNetDirect"})
        table += fmt::format(" {:>14}   {:>14}   {:>14} |", "", a, "");
    table += "\nh:1:2 [0] NCCL INFO   Protocol    |";
    for (int i = 0; i < 3; ++i)
        for (const char* p : {"LL", "LL128", "Simple"}) table += fmt::format(" {:>14} |", p);
    table += "\nh:1:2 [0] NCCL INFO     AllReduce |";
    const double cells[9][2] = {{6.8, 7.1},  {14.0, 21.3}, {8.4, 0.0}, {6.6, 9.2}, {14.0, 30.5},
                                {8.4, 40.0}, {0, 0},       {0, 0},     {0, 0}};
    for (const auto& c : cells) table += fmt::format("{:8.1f}/{:6.1f} |", c[0], c[1]);
    table += "\n";
    const std::string text = rank_lines("h", 0, 8, 1, 8, {pattern(4, 12, 30, 30), pattern(1, 12, 30, 30)}) + table;
    const auto log = parse_nccl_log(text, "t.log");
    REQUIRE(log.tuning.size() == 9);
    CHECK(log.tuning[4].function == "AllReduce");
    CHECK(log.tuning[4].algorithm == "Ring");
    CHECK(log.tuning[4].protocol == "LL128");
    CHECK(log.tuning[4].latency_us == 14.0);
    CHECK(log.tuning[4].algbw_gbps == 30.5);
    CHECK(log.tuning[8].algorithm == "CollNetDirect");
    CHECK(log.tuning[8].algbw_gbps == 0.0);
}

TEST_CASE("NCCL log: the graphs replace the preset's, one-node and multi-node, and NVLS only where NCCL found it") {
    calib::Calibration h100 = calib::load_hardware("h100-sxm");
    const auto two_nodes = profiler::read_nccl_log(fixture());
    calib::Calibration c = h100;
    profiler::use_nccl_log(c, two_nodes);
    CHECK(c.nccl.ring_nodes.channels == 8);
    CHECK(c.nccl.nvls_nodes.bw_intra_gbps == 40.0);
    CHECK(c.nccl.channels_nodes == 16);
    CHECK(c.nccl.gpus_per_node == 8);
    CHECK(c.nccl.nic_near_gpu);
    CHECK_THAT(c.provenance.notes, Catch::Contains("NCCL graphs of 16 ranks on 2 nodes from"));
    // Four NICs a node, no NVLS, the NIC behind the CPU: half the ring, no NVLSTree, no LL128 across nodes.
    const auto four_nics = parse_nccl_log(
        rank_lines("h", 0, 16, 2, 8, {pattern(4, 4, 48, 48, "NVL/PHB"), pattern(1, 4, 48, 48, "NVL/PHB")}), "4.log");
    c = h100;
    profiler::use_nccl_log(c, four_nics);
    CHECK(c.nccl.ring_nodes.channels == 4);
    CHECK(c.nccl.nvls_nodes.channels == 0);
    CHECK_FALSE(c.nccl.nic_near_gpu);
    CHECK(c.nccl.ring_node.channels == h100.nccl.ring_node.channels);  // the one-node graphs stay
    // One node over PCIe: the one-node graphs, no NVLink, no NVLS.
    const auto pcie = parse_nccl_log(
        rank_lines("h", 0, 8, 1, 8, {pattern(4, 2, 12, 12, "PHB/PIX"), pattern(1, 2, 12, 12, "PHB/PIX")}), "p.log");
    c = h100;
    profiler::use_nccl_log(c, pcie);
    CHECK(c.nccl.ring_node.channels == 2);
    CHECK_FALSE(c.nccl.nvlink);
    CHECK_FALSE(c.nccl.nvls);
    CHECK(c.nccl.ring_nodes.channels == h100.nccl.ring_nodes.channels);
    // A calibration whose nodes talk over sockets keeps no NVLSTree graph (its file would be refused).
    calib::Calibration tcp = h100;
    calib::use_socket_network(tcp, calib::parse_socket_network("ethernet:1x100"));
    profiler::use_nccl_log(tcp, two_nodes);
    CHECK(tcp.nccl.nvls_nodes.channels == 0);
    CHECK(tcp.nccl.ring_nodes.channels == 8);
    // A calibration without an NCCL model cannot take them.
    calib::Calibration cpu = calib::load_hardware("h100-sxm");
    cpu.nccl = {};
    try {
        profiler::use_nccl_log(cpu, two_nodes);
        FAIL("expected a ConfigError");
    } catch (const ConfigError& e) {
        CHECK_THAT(std::string(e.what()), Catch::StartsWith("--import-nccl-log") && Catch::Contains("no NCCL model"));
    }
}

TEST_CASE("NCCL log: what is missing or malformed is one line naming the file, the line and what was expected") {
    const auto error_of = [](const std::string& text) {
        try {
            parse_nccl_log(text, "run.log");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string ring = pattern(4, 8, 48, 48), tree = pattern(1, 8, 48, 48);
    CHECK_THAT(error_of("step 1 loss 2.3\n"), Catch::StartsWith("run.log: no 'NCCL INFO' line") &&
                                                  Catch::Contains("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH"));
    // Graphs but no communicator line (NCCL before 2.21, or INIT not in NCCL_DEBUG_SUBSYS).
    CHECK_THAT(error_of("h:1:2 [0] NCCL INFO " + ring + "\n"),
               Catch::StartsWith("run.log: no communicator with its graphs") && Catch::Contains("nRanks N nNodes M"));
    CHECK_THAT(error_of(rank_lines("h", 0, 8, 1, 8, {pattern(4, 8, 48, 48, "NVL/WIFI"), tree})),
               Catch::StartsWith("run.log:1: path type 'WIFI': expected one of NCCL's LOC, NVL"));
    CHECK_THAT(error_of(rank_lines("h", 0, 8, 1, 8, {pattern(4, 0, 48, 48), tree})),
               Catch::StartsWith("run.log:1: nChannels 0: expected 1 to 64"));
    CHECK_THAT(error_of(rank_lines("h", 0, 8, 1, 8, {tree, ring})),
               Catch::StartsWith("run.log: rank 0's first graph has pattern 1: expected the ring's, 4"));
    CHECK_THAT(error_of(rank_lines("h", 0, 8, 9, 8, {ring, tree})),
               Catch::StartsWith("run.log:3: nRanks 8 nNodes 9 localRanks 8: expected 1 <= nNodes <= nRanks"));
    CHECK_THAT(error_of(rank_lines("h", 0, 8, 1, 8, {pattern(4, 8, 0, 48), tree})),
               Catch::StartsWith("run.log: a pattern-4 graph with bandwidth 0/48: expected both above 0"));
    std::string text = rank_lines("h", 0, 8, 1, 8, {ring, tree});
    text += "h:1:2 [0] NCCL INFO   Algorithm   |                           Tree                  |\n";
    text += "h:1:2 [0] NCCL INFO     AllReduce |     6.8/  x.1 |\n";
    CHECK_THAT(error_of(text),
               Catch::StartsWith("run.log:5: AllReduce cell 1 '6.8/  x.1': expected latency/bandwidth"));
    for (const auto& e : {error_of("step 1\n"), error_of(text)}) CHECK(e.find('\n') == std::string::npos);
}
