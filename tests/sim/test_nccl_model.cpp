// NCCL's algorithm and protocol choice (sim/nccl_model) against NCCL 2.30.7's
// tuning formulas, worked out here from the constants of
// src/graph/tuning.cc as docs/notes/nccl-tuning.md states them, and against
// published nccl-tests results (bench/published/nccl-tests.md cites each).
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/cost_model.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::sim;
using calib::CollectiveKind;

namespace {

constexpr std::int64_t MiB = 1024 * 1024;
constexpr std::int64_t GiB = 1024 * MiB;

const calib::NcclTopology& h100() {
    static const calib::Calibration c = calib::load_hardware("h100-sxm");
    return c.nccl;
}
const calib::NcclTopology& a100() {
    static const calib::Calibration c = calib::load_hardware("a100-sxm");
    return c.nccl;
}

NcclChoice choose(const calib::NcclTopology& t, CollectiveKind kind, std::int64_t bytes, int ranks, int nodes,
                  const std::vector<std::pair<std::string, std::string>>& env = {}) {
    return nccl_choose(t, kind, bytes, ranks, nodes, DType::bf16, parse_nccl_env(env));
}

// nccl-tests' bus bandwidth of a call that took `us`.
double busbw(CollectiveKind kind, std::int64_t bytes, int n, double us) {
    const double algbw = static_cast<double>(bytes) / (us * 1e3);  // GB/s
    return algbw * calib::busbw_factor(kind, n);
}

}  // namespace

TEST_CASE("NCCL model: a tiny allreduce in one H100 node is Ring/LL at base + 2(n-1) NVLink hops") {
    const auto c = choose(h100(), CollectiveKind::allreduce, 8, 8, 1);
    CHECK(c.algo == NcclAlgo::ring);
    CHECK(c.proto == NcclProto::ll);
    // baseLat Ring/LL 6.6 us; hwLat NVLink Ring/LL 0.6 us per step; 14 steps.
    CHECK(c.latency_us == Approx(6.6 + 14 * 0.6));
    // Bandwidth: LL caps at min(llMax 141, B/2) with B = 12 channels x 30 GB/s.
    const double algbw = std::min(141.0, 0.5 * 12 * 30) * 8 / 14;
    CHECK(c.time_us == Approx(6.6 + 14 * 0.6 + 8 / (1000 * algbw)));
}

TEST_CASE("NCCL model: across nodes a small allreduce takes the tree, whose latency grows with log2 of the nodes") {
    // Tree/LL: base 6.8 + 2 ((ppn - 1) NVLink 0.6 + log2(N) NET 5.0).
    for (int nodes : {2, 4, 64, 512}) {
        INFO(nodes << " nodes");
        const auto c = choose(h100(), CollectiveKind::allreduce, 8, nodes * 8, nodes);
        CHECK(c.algo == NcclAlgo::tree);
        CHECK(c.proto == NcclProto::ll);
        CHECK(c.latency_us == Approx(6.8 + 2 * (7 * 0.6 + std::log2(nodes) * 5.0)));
    }
    // The scale test: each doubling of the nodes adds the same time (2 x 5 us), from 16 to 4096 GPUs.
    std::vector<double> t;
    for (int gpus = 16; gpus <= 4096; gpus *= 2)
        t.push_back(choose(h100(), CollectiveKind::allreduce, 8, gpus, gpus / 8).time_us);
    for (std::size_t i = 1; i < t.size(); ++i) CHECK(t[i] - t[i - 1] == Approx(10.0).margin(0.01));
}

TEST_CASE("NCCL model: large allreduce busbw stays flat with scale (ring, then tree), 16 to 4096 GPUs") {
    // Without NVSwitch multicast (NCCL_ALGO=^NVLSTree; A100s have none): the ring, then the tree.
    const std::vector<std::pair<std::string, std::string>> no_nvls = {{"NCCL_ALGO", "^nvlstree"}};
    const double at16 = busbw(CollectiveKind::allreduce, 16 * GiB, 16,
                              choose(h100(), CollectiveKind::allreduce, 16 * GiB, 16, 2, no_nvls).time_us);
    // A ring of 8 channels x 48 GB/s: 384 GB/s busbw, less its latency.
    CHECK(at16 == Approx(384).epsilon(0.02));
    const auto big = choose(h100(), CollectiveKind::allreduce, 16 * GiB, 4096, 512, no_nvls);
    CHECK(big.algo ==
          NcclAlgo::tree);  // the ring's latency (2 x 4095 steps, x 1.4) costs more than the tree's bandwidth
    const double at4096 = busbw(CollectiveKind::allreduce, 16 * GiB, 4096, big.time_us);
    CHECK(at4096 >= 0.74 * at16);  // NCCL's own tables: 383 -> 287 GB/s (docs/notes/nccl-tuning.md §4)
    CHECK(at4096 < at16);
    // With it, NVLSTree: 8 x 45.5 = 364 GB/s from 3 nodes on, less a latency that grows with log2 of the nodes.
    const auto nvls = choose(h100(), CollectiveKind::allreduce, 16 * GiB, 4096, 512);
    CHECK(nvls.algo == NcclAlgo::nvls_tree);
    CHECK(busbw(CollectiveKind::allreduce, 16 * GiB, 4096, nvls.time_us) == Approx(364).epsilon(0.02));
}

TEST_CASE("NCCL model: NVLSTree across DGX H100 nodes, as tuning.cc prices it and NCCL picks it") {
    // The NVLS graph across nodes: 8 channels (a NIC each), 40 GB/s inside, 48 across. Bus bandwidth,
    // worked by hand in docs/notes/nccl-tuning.md §1.1.1: 8 x min(intra 40 x 0.85 x 7/8 x 2 = 59.5, inter 48
    // (96 on two nodes), Hopper's cap 57.7 on two nodes, 45.5 beyond) = 461.6 and 364 GB/s; algorithm
    // bandwidth x n / 2(n - 1) as a ring's; latency NVLink 25 + 2 log2(N) x NET 20.9 us.
    struct Case {
        int nodes;
        double bus;
    };
    for (const Case k : {Case{2, 461.6}, Case{16, 364.0}}) {
        INFO(k.nodes << " nodes");
        const int n = 8 * k.nodes;
        const auto c = choose(h100(), CollectiveKind::allreduce, GiB, n, k.nodes);
        CHECK(c.algo == NcclAlgo::nvls_tree);
        CHECK(c.proto == NcclProto::simple);
        const double latency = 25 + 2 * std::floor(std::log2(k.nodes)) * 20.9;
        CHECK(c.latency_us == Approx(latency));
        CHECK(c.time_us == Approx(latency + GiB / (1000 * k.bus * n / (2.0 * (n - 1)))));
    }
    // On 4 nodes the ring (8 x 48 = 384 GB/s, latency x 1.4) still wins 1 GiB, by about 10 us.
    const auto four = choose(h100(), CollectiveKind::allreduce, GiB, 32, 4);
    CHECK(four.algo == NcclAlgo::ring);
    NcclEnv only = parse_nccl_env({{"NCCL_ALGO", "nvlstree"}});
    const auto forced = nccl_choose(h100(), CollectiveKind::allreduce, GiB, 32, 4, DType::bf16, only);
    CHECK(forced.estimate_us - four.estimate_us == Approx(10).margin(2));
    // Not on one node (NVLS there), not for other collectives, not with one GPU a node (nvls.cc: gpuCount < 2),
    // not over sockets.
    CHECK_THROWS_AS(nccl_choose(h100(), CollectiveKind::allreduce, GiB, 8, 1, DType::bf16, only), ConfigError);
    CHECK_THROWS_AS(nccl_choose(h100(), CollectiveKind::allgather, GiB, 16, 2, DType::bf16, only), ConfigError);
    CHECK_THROWS_AS(nccl_choose(h100(), CollectiveKind::allreduce, GiB, 16, 16, DType::bf16, only), ConfigError);
    // Four GPUs a node reach four NICs: 4 channels, 4 x min(40 x 0.85 x 3/4 x 2 = 51, 96, 57.7) = 204 GB/s on two
    // nodes (the full node's 40 GB/s inside: an assumption, §1.1.1).
    const auto half = nccl_choose(h100(), CollectiveKind::allreduce, GiB, 8, 2, DType::bf16, only);
    CHECK(half.time_us == Approx(66.8 + GiB / (1000 * 204.0 * 8 / 14)));
    calib::Calibration tcp = calib::load_hardware("h100-sxm");
    calib::use_socket_network(tcp, calib::parse_socket_network("ethernet:1x100"));
    CHECK(nccl_choose(tcp.nccl, CollectiveKind::allreduce, GiB, 16, 2, DType::bf16, {}).algo != NcclAlgo::nvls_tree);
    // A100s have no NVSwitch multicast.
    CHECK(choose(a100(), CollectiveKind::allreduce, GiB, 16, 2).algo != NcclAlgo::nvls_tree);
    // --inter-node-gbps slows its NICs too: 12.5 GB/s a GPU is 12.5 a channel.
    calib::Calibration slow = calib::load_hardware("h100-sxm");
    calib::use_inter_node_bandwidth(slow, 12.5, "h100-sxm");
    CHECK(slow.nccl.nvls_nodes.bw_inter_gbps == Approx(12.5));
    CHECK(slow.nccl.nvls_nodes.bw_intra_gbps == Approx(12.5));
    // Applied again at a faster rate, inside goes back to the search's 40, not what the first call left.
    calib::use_inter_node_bandwidth(slow, 100, "h100-sxm");
    CHECK(slow.nccl.nvls_nodes.bw_intra_gbps == Approx(40));
    CHECK(slow.nccl.nvls_nodes.bw_inter_gbps == Approx(100));
}

TEST_CASE("NCCL model: a large allreduce in one H100 node is NVLS at 476 GB/s busbw, and NCCL_ALGO=ring gives 360") {
    const auto c = choose(h100(), CollectiveKind::allreduce, 4 * GiB, 8, 1);
    CHECK(c.algo == NcclAlgo::nvls);
    CHECK(c.proto == NcclProto::simple);
    // 8 NVLS channels: min(40 GB/s x 0.85 x 7/8 x 2, 60) each, over n/nsteps = 8/14; latency 25 us.
    const double bus = 8 * std::min(40 * 0.85 * 7.0 / 8.0 * 2, 60.0);
    CHECK(c.time_us == Approx(25 + 4.0 * GiB / (1000 * bus * 8 / 14)));
    CHECK(busbw(CollectiveKind::allreduce, 4 * GiB, 8, c.time_us) == Approx(476).epsilon(0.01));
    const auto ring = choose(h100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, {{"NCCL_ALGO", "ring"}});
    CHECK(ring.algo == NcclAlgo::ring);
    CHECK(busbw(CollectiveKind::allreduce, 4 * GiB, 8, ring.time_us) == Approx(360).epsilon(0.01));
    // A100s have no NVLS: the ring, 12 x 20 GB/s.
    const auto amp = choose(a100(), CollectiveKind::allreduce, 4 * GiB, 8, 1);
    CHECK(amp.algo == NcclAlgo::ring);
    CHECK(busbw(CollectiveKind::allreduce, 4 * GiB, 8, amp.time_us) == Approx(240).epsilon(0.01));
}

TEST_CASE("NCCL model: a multi-node Simple ring pays 1.4x latency and the host's network overhead") {
    // DGX A100 (AMD hosts), 2 nodes, allreduce forced to Ring/Simple: nInter = 2 (N - 1) = 2 steps on NET (14 us),
    // the other 28 at max(NVLink 3.4, AMD overhead 2 x 3); x 1.4 once a channel's share is >= 64 B.
    const auto c =
        choose(a100(), CollectiveKind::allreduce, 64 * MiB, 16, 2, {{"NCCL_ALGO", "ring"}, {"NCCL_PROTO", "simple"}});
    const double latency = 8.4 + 28 * std::max(3.4, 6.0) + 2 * 14.0;
    CHECK(c.latency_us == Approx(1.4 * latency));
    // N <= 2 uses the graph's intra bandwidth: 8 x 24 GB/s.
    CHECK(c.time_us == Approx(1.4 * latency + 64.0 * MiB / (1000 * 8 * 24.0 * 16 / 30)));
}

TEST_CASE("NCCL model: a job on half of each node reaches half of its NICs across nodes") {
    // 2 nodes x 4 of the DGX A100's 8 GPUs: 4 of the 8 channels x 24 GB/s; inside one node all 12 x 20.
    const auto half = choose(a100(), CollectiveKind::allreduce, 16 * GiB, 8, 2, {{"NCCL_ALGO", "ring"}});
    CHECK(busbw(CollectiveKind::allreduce, 16 * GiB, 8, half.time_us) == Approx(4 * 24.0).epsilon(0.01));
    const auto one_node = choose(a100(), CollectiveKind::allreduce, 16 * GiB, 4, 1, {{"NCCL_ALGO", "ring"}});
    CHECK(busbw(CollectiveKind::allreduce, 16 * GiB, 4, one_node.time_us) == Approx(12 * 20.0).epsilon(0.01));
}

TEST_CASE("NCCL model: all-gather and reduce-scatter stay rings at 8 GPUs a node, and PAT with one GPU a node") {
    const auto ring = choose(h100(), CollectiveKind::allgather, 8, 64, 8);
    CHECK(ring.algo == NcclAlgo::ring);
    // One GPU per node: PAT, latency 8 + log2(N) x 14 / 3.5 + 2.8 n.
    const auto pat = choose(h100(), CollectiveKind::allgather, 8, 64, 64);
    CHECK(pat.algo == NcclAlgo::pat);
    CHECK(pat.latency_us == Approx(8 + 6 * 14 / 3.5 + 2.8 * 64));
    // Broadcast runs on the ring only.
    CHECK(choose(h100(), CollectiveKind::broadcast, GiB, 4096, 512).algo == NcclAlgo::ring);
}

TEST_CASE("NCCL model: LL128 needs NVLink, and across nodes a NIC beside the GPU, unless NCCL_PROTO names it") {
    calib::NcclTopology far = h100();
    far.nic_near_gpu = false;
    for (std::int64_t bytes : {std::int64_t{4096}, MiB, 64 * MiB}) {
        INFO(bytes << " bytes");
        CHECK(choose(far, CollectiveKind::allreduce, bytes, 64, 8).proto != NcclProto::ll128);
    }
    CHECK(choose(far, CollectiveKind::allreduce, MiB, 64, 8, {{"NCCL_PROTO", "ll128"}}).proto == NcclProto::ll128);
    CHECK(choose(h100(), CollectiveKind::allreduce, MiB, 64, 8).proto == NcclProto::ll128);
}

TEST_CASE("NCCL model: NCCL_ALGO and NCCL_PROTO as NCCL parses them") {
    // Per-function entries: allreduce may use the tree, the rest only the ring.
    const NcclEnv env = parse_nccl_env({{"NCCL_ALGO", "ring;allreduce:tree"}});
    CHECK(env.algos[static_cast<int>(CollectiveKind::allreduce)] == (1u << static_cast<int>(NcclAlgo::tree)));
    CHECK(env.algos[static_cast<int>(CollectiveKind::allgather)] == (1u << static_cast<int>(NcclAlgo::ring)));
    CHECK(choose(h100(), CollectiveKind::allreduce, GiB, 8, 1, {{"NCCL_ALGO", "ring;allreduce:tree"}}).algo ==
          NcclAlgo::tree);
    // ^ excludes; names are case-insensitive.
    CHECK(choose(h100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, {{"NCCL_ALGO", "^NVLS"}}).algo == NcclAlgo::ring);
    CHECK(choose(h100(), CollectiveKind::allreduce, 8, 8, 1, {{"NCCL_PROTO", "^ll"}}).proto != NcclProto::ll);
    // Nothing left: NCCL fails at init, so does dtsim, naming the variables.
    CHECK_THROWS_WITH(choose(h100(), CollectiveKind::broadcast, MiB, 16, 2, {{"NCCL_ALGO", "tree"}}),
                      Catch::Contains("NCCL_ALGO") && Catch::Contains("Broadcast"));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_ALGO", "ring,fastest"}}),
                      Catch::Contains("NCCL_ALGO") && Catch::Contains("'fastest'") && Catch::Contains("NVLSTree"));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_ALGO", "allreduce:ring;tree"}}), Catch::Contains("only the first entry"));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_PROTO", "allgatherv:ll"}}), Catch::Contains("unknown function"));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_MAX_NCHANNELS", "0"}}), Catch::Contains("from 1 to 64"));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_BUFFSIZE", "1"}}), Catch::Contains("does not model"));
    CHECK_THROWS_WITH(parse_nccl_env({{"OMP_NUM_THREADS", "1"}}), Catch::Contains("not an NCCL variable"));
}

TEST_CASE(
    "NCCL model: NCCL_MAX_NCHANNELS slows the ring by the channels it removes, not NCCL's choice, and NVLS ignores "
    "it") {
    const auto full = choose(a100(), CollectiveKind::allreduce, 4 * GiB, 8, 1);
    const auto half = choose(a100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, {{"NCCL_MAX_NCHANNELS", "12"}});
    CHECK(half.algo == full.algo);
    CHECK(half.estimate_us == Approx(full.estimate_us));
    // 12 of 24 channels: the bandwidth term doubles.
    CHECK(half.time_us - half.latency_us == Approx(2 * (full.time_us - full.latency_us)));
    // More than launched by default: duplicated rings over the same links, no faster.
    CHECK(choose(a100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, {{"NCCL_MIN_NCHANNELS", "32"}}).time_us ==
          Approx(full.time_us));
    // The stricter of *_NCHANNELS and *_CTAS wins.
    CHECK(parse_nccl_env({{"NCCL_MAX_NCHANNELS", "16"}, {"NCCL_MAX_CTAS", "8"}}).max_channels == 8);
    const auto nvls = choose(h100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, {{"NCCL_MAX_NCHANNELS", "4"}});
    CHECK(nvls.algo == NcclAlgo::nvls);
    CHECK(nvls.time_us == Approx(nvls.estimate_us));
}

TEST_CASE("NCCL model agrees with published nccl-tests bus bandwidths within 5 %") {
    struct Row {
        const char* what;
        const calib::NcclTopology* topology;
        int ranks, nodes;
        std::int64_t bytes;
        double published_gbps;
    };
    calib::NcclTopology h100_4nic = h100();  // 4 x 400G RoCE per node (nccl#1368)
    h100_4nic.ring_nodes.channels = 4;
    h100_4nic.tree_nodes.channels = 4;
    h100_4nic.nvls_nodes.channels = 4;  // NVLSTree: a channel per NIC
    const Row rows[] = {
        {"8x A100 SXM, 1 node, 8 GB (nccl-tests#149)", &a100(), 8, 1, 8'000'000'000, 230},
        {"HGX A100 80GB, 1 node, 4 GB (nccl-tests#175)", &a100(), 8, 1, 4 * GiB, 232.54},
        {"DGX A100, 8x HDR, multi-node (nccl#812)", &a100(), 16, 2, GiB, 192},
        {"8x H100 SXM, NVLS, 4 GB (nccl#1455)", &h100(), 8, 1, 4 * GiB, 480},
        {"8x H100, NVLS peak (nccl-tests#212, #290)", &h100(), 8, 1, 8 * GiB, 476},
        {"8x H200, 4 GB (nccl-tests#272)", &h100(), 8, 1, 4 * GiB, 475},
        {"5 nodes x 8 H100, 4x 400G RoCE, 1 GB (nccl#1368)", &h100_4nic, 40, 5, GiB, 190},
    };
    for (const Row& r : rows) {
        INFO(r.what);
        const auto c = nccl_choose(*r.topology, CollectiveKind::allreduce, r.bytes, r.ranks, r.nodes, DType::bf16, {});
        CHECK(busbw(CollectiveKind::allreduce, r.bytes, r.ranks, c.time_us) == Approx(r.published_gbps).epsilon(0.05));
    }
    // 8x H100 ring, 365-370 published for 2-8 GPUs (nccl#1455).
    const auto ring = nccl_choose(h100(), CollectiveKind::allreduce, 4 * GiB, 8, 1, DType::bf16,
                                  parse_nccl_env({{"NCCL_ALGO", "ring"}}));
    CHECK(busbw(CollectiveKind::allreduce, 4 * GiB, 8, ring.time_us) == Approx(367).epsilon(0.05));
}

TEST_CASE("cost model: a measured table prices what it covers, and beyond it the NCCL model meets it at its end") {
    calib::Calibration c = calib::load_hardware("h100-sxm");
    calib::CollectiveCurve table;
    table.kind = CollectiveKind::allreduce;
    table.group_size = 8;
    table.bus_bw_gbps = 300;
    table.points = {{MiB, 60.0}, {16 * MiB, 200.0}, {256 * MiB, 2000.0}};
    c.collectives.push_back(table);
    const CostModel cost(c);
    const CommGroup node{8, 1};
    CHECK(cost.collective_ns(CollectiveKind::allreduce, 16 * MiB, node) == Approx(200e3));
    // At the table's ends the prices meet; beyond, they follow the model's shape.
    auto model = [&](std::int64_t b) {
        return nccl_choose(c.nccl, CollectiveKind::allreduce, b, 8, 1, DType::fp32, {}).time_us * 1e3;
    };
    CHECK(cost.collective_ns(CollectiveKind::allreduce, GiB, node) == Approx(2000e3 * model(GiB) / model(256 * MiB)));
    CHECK(cost.collective_ns(CollectiveKind::allreduce, 1024, node) == Approx(60e3 * model(1024) / model(MiB)));
    // Other groups and other nodes: the model alone.
    CHECK(cost.collective_ns(CollectiveKind::allreduce, 16 * MiB, CommGroup{16, 2}) ==
          Approx(nccl_choose(c.nccl, CollectiveKind::allreduce, 16 * MiB, 16, 2, DType::fp32, {}).time_us * 1e3));
    // --env reaches the price.
    const CostModel ring(c, parse_nccl_env({{"NCCL_ALGO", "ring"}}));
    CHECK(ring.collective_ns(CollectiveKind::allreduce, 8, CommGroup{4096, 512}) >
          10 * cost.collective_ns(CollectiveKind::allreduce, 8, CommGroup{4096, 512}));
}

TEST_CASE("gpt2 DDP communication no longer grows linearly from 1024 to 4096 GPUs (issue 13 item 1)") {
    const calib::Calibration cal = calib::load_hardware("h100-sxm");
    auto comm_s = [&](int nodes, const std::vector<std::pair<std::string, std::string>>& env) {
        Config c;
        c.model = "gpt2";
        c.topology = {nodes, 8};
        c.micro_batch = 1;
        c.precision = Precision::bf16_mixed;
        c.env = env;
        return simulate(c, cal).metrics.comm_s;
    };
    const double at1024 = comm_s(128, {}), at4096 = comm_s(512, {});
    CHECK(at4096 < 1.3 * at1024);
    // Forced onto the ring, as dtsim priced every multi-node collective before, it grows about with the ranks.
    CHECK(comm_s(512, {{"NCCL_ALGO", "ring"}}) > 2 * comm_s(128, {{"NCCL_ALGO", "ring"}}));
}

TEST_CASE("a calibration's NCCL topology survives its JSON file, and a bad field is named") {
    const calib::Calibration preset = calib::load_hardware("h100-sxm");
    const std::string text = calib::to_json_text(preset);
    const calib::Calibration back = calib::calibration_from_json_text(text, "h100.json");
    CHECK(back.nccl.sm == 90);
    CHECK(back.nccl.nvls);
    CHECK(back.nccl.nvls_node.channels == preset.nccl.nvls_node.channels);
    CHECK(back.nccl.ring_nodes.bw_inter_gbps == preset.nccl.ring_nodes.bw_inter_gbps);
    CHECK(back.nccl.channels_nodes == preset.nccl.channels_nodes);
    CHECK(calib::to_json_text(back) == text);
    // CPU calibrations and RCCL presets have none, and their files no "nccl".
    CHECK(calib::to_json_text(calib::load_hardware("mi300x")).find("\"nccl\"") == std::string::npos);
    std::string bad = text;
    const auto at = bad.find("\"sm\": 90");
    REQUIRE(at != std::string::npos);
    bad.replace(at, 8, "\"sm\": 7");
    CHECK_THROWS_WITH(calib::calibration_from_json_text(bad, "h100.json"),
                      Catch::Contains("h100.json") && Catch::Contains("sm") && Catch::Contains("compute capability"));
    // NVLSTree's graph: kept; a file from before it (no nvls_nodes) loads with NVLSTree off; one that
    // contradicts itself (no NVLink SHARP, or sockets between the nodes) is refused, naming the field.
    CHECK(back.nccl.nvls_nodes.channels == 8);
    nlohmann::json j = nlohmann::json::parse(text);
    j["nccl"].erase("nvls_nodes");
    const auto old = calib::calibration_from_json_text(j.dump(), "old.json");
    CHECK(old.nccl.nvls_nodes.channels == 0);
    CHECK(nccl_choose(old.nccl, CollectiveKind::allreduce, GiB, 16, 2, DType::bf16, {}).algo != NcclAlgo::nvls_tree);
    j = nlohmann::json::parse(text);
    j["nccl"]["nvls"] = false;
    j["nccl"]["nvls_node"] = {{"channels", 0}, {"bw_intra_gbps", 0}, {"bw_inter_gbps", 0}};
    CHECK_THROWS_WITH(calib::calibration_from_json_text(j.dump(), "x.json"),
                      Catch::Contains("nvls_nodes") && Catch::Contains("nvls is false"));
    j = nlohmann::json::parse(text);
    j["nccl"]["socket"] = {{"vendor", "generic"}, {"nics", 1}, {"nic_gbps", 12.5}, {"flow_gbps", 1.25}};
    CHECK_THROWS_WITH(calib::calibration_from_json_text(j.dump(), "x.json"),
                      Catch::Contains("nvls_nodes") && Catch::Contains("sockets"));
}

TEST_CASE("the predicted timeline carries NCCL's choice on each collective the NCCL model prices") {
    Config c;
    c.model = "gpt2";
    c.topology = {64, 8};
    c.precision = Precision::bf16_mixed;
    const calib::Calibration cal = calib::load_hardware("h100-sxm");
    const SimResult r = simulate(c, cal);
    const Timeline tl = make_timeline(r, c, cal);
    int collectives = 0, labelled = 0;
    for (std::size_t i = 0; i < tl.events.size(); ++i) {
        if (r.plan.tasks[i].kind != TaskKind::collective) continue;
        ++collectives;
        for (const auto& arg : tl.events[i].args)
            if (arg.key == "nccl") {
                const auto& g = r.plan.groups[static_cast<std::size_t>(r.plan.tasks[i].group)];
                const auto choice = nccl_choose(cal.nccl, r.plan.tasks[i].collective, r.plan.tasks[i].bytes, g.size,
                                                g.nodes, r.plan.tasks[i].dtype, {});
                CHECK(std::get<std::string>(arg.value) ==
                      std::string(to_string(choice.algo)) + "/" + std::string(to_string(choice.proto)));
                ++labelled;
            }
    }
    CHECK(collectives > 0);
    CHECK(labelled == collectives);
    // Without an NCCL model (RCCL), no label.
    const calib::Calibration amd = calib::load_hardware("mi300x");
    for (const auto& e : make_timeline(simulate(c, amd), c, amd).events)
        for (const auto& arg : e.args) CHECK(arg.key != "nccl");
}

namespace {

// h100-sxm nodes joined by TCP (--network KIND:NxG).
calib::Calibration over_sockets(std::string_view spec) {
    calib::Calibration c = calib::load_hardware("h100-sxm");
    calib::use_socket_network(c, calib::parse_socket_network(spec));
    return c;
}

NcclSockets sockets(calib::SocketNic vendor, const std::vector<std::pair<std::string, std::string>>& env = {}) {
    calib::NcclSocketNet net;
    net.vendor = vendor;
    net.nics = 1;
    net.nic_gbps = 12.5;
    net.flow_gbps = 1.25;
    return nccl_sockets(net, parse_nccl_env(env));
}

}  // namespace

TEST_CASE("NCCL sockets: threads and sockets per connection as net_socket.cc sets them") {
    using calib::SocketNic;
    // Unset on a generic NIC: no helper threads, the control socket carries the data.
    CHECK(sockets(SocketNic::generic).threads == 0);
    CHECK(sockets(SocketNic::generic).flows == 1);
    // The NIC's auto-detected defaults: AWS ENA 2 x 8, GCP gVNIC 4 x 1.
    CHECK(sockets(SocketNic::aws).flows == 16);
    CHECK(sockets(SocketNic::gcp).flows == 4);
    // Lightning's DDP guide: 2 threads x 4 sockets.
    const auto lightning = sockets(SocketNic::generic, {{"NCCL_SOCKET_NTHREADS", "2"}, {"NCCL_NSOCKS_PERTHREAD", "4"}});
    CHECK(lightning.flows == 8);
    CHECK(!lightning.threads_default);
    CHECK(lightning.channel_gbps == Approx(8 * 1.25));
    // Only the sockets set: the threads stay the generic NIC's 0, so still one flow.
    CHECK(sockets(SocketNic::generic, {{"NCCL_NSOCKS_PERTHREAD", "4"}}).flows == 1);
    // MAX_THREADS 16; a product above MAX_SOCKETS 64 becomes floor(64 / threads) per thread.
    CHECK(sockets(SocketNic::generic, {{"NCCL_SOCKET_NTHREADS", "20"}, {"NCCL_NSOCKS_PERTHREAD", "1"}}).threads == 16);
    const auto many = sockets(SocketNic::generic, {{"NCCL_SOCKET_NTHREADS", "6"}, {"NCCL_NSOCKS_PERTHREAD", "16"}});
    CHECK(many.socks_per_thread == 64 / 6);
    CHECK(many.flows == 6 * (64 / 6));
    CHECK_THROWS_WITH(parse_nccl_env({{"NCCL_SOCKET_NTHREADS", "-1"}}),
                      Catch::Contains("NCCL_SOCKET_NTHREADS") && Catch::Contains("whole number"));
}

TEST_CASE("NCCL sockets: NCCL chooses by the NIC, and the price moves with the TCP flows that carry each channel") {
    const calib::Calibration eth = over_sockets("ethernet:1x100");
    // Two channels per NIC at half its 12.5 GB/s; LL128 off across nodes.
    CHECK(eth.nccl.ring_nodes.channels == 2);
    CHECK(eth.nccl.ring_nodes.bw_inter_gbps == Approx(6.25));
    CHECK(!eth.nccl.nic_near_gpu);
    const auto one_flow = choose(eth.nccl, CollectiveKind::allreduce, GiB, 32, 4);
    const auto lightning = choose(eth.nccl, CollectiveKind::allreduce, GiB, 32, 4,
                                  {{"NCCL_SOCKET_NTHREADS", "2"}, {"NCCL_NSOCKS_PERTHREAD", "4"}});
    CHECK(lightning.algo == one_flow.algo);
    CHECK(lightning.proto == one_flow.proto);
    CHECK(lightning.estimate_us == Approx(one_flow.estimate_us));
    // 8 flows x 1.25 GB/s fill the 6.25 GB/s channel: NCCL's own estimate.
    CHECK(lightning.time_us == Approx(lightning.estimate_us));
    // One flow carries 1.25 of 6.25 GB/s: the bandwidth term is 5 times longer.
    CHECK(one_flow.time_us - one_flow.latency_us == Approx(5 * (lightning.time_us - lightning.latency_us)));
    // NCCL_MIN_NCHANNELS=4 copies the two rings: over NVLink or IB no faster,
    // over sockets each copy brings its flow: 4 x 1.25 of the NIC's 12.5 GB/s.
    const auto four = choose(eth.nccl, CollectiveKind::allreduce, GiB, 32, 4, {{"NCCL_MIN_NCHANNELS", "4"}});
    CHECK(four.estimate_us == Approx(one_flow.estimate_us));
    CHECK(four.time_us - four.latency_us == Approx(2.5 * (lightning.time_us - lightning.latency_us)));
    // Inside one node the sockets play no part.
    const auto node = choose(eth.nccl, CollectiveKind::allreduce, GiB, 8, 1);
    CHECK(node.time_us == Approx(choose(h100(), CollectiveKind::allreduce, GiB, 8, 1).time_us));
    // A socket NIC serves the whole node: half a node's GPUs keep both
    // channels, so a ring's bus bandwidth stays 2 x 6.25 GB/s.
    for (int ranks : {32, 16}) {
        const auto ring =
            choose(eth.nccl, CollectiveKind::allreduce, 16 * GiB, ranks, 4,
                   {{"NCCL_ALGO", "ring"}, {"NCCL_SOCKET_NTHREADS", "2"}, {"NCCL_NSOCKS_PERTHREAD", "4"}});
        CHECK(busbw(CollectiveKind::allreduce, 16 * GiB, ranks, ring.time_us) == Approx(2 * 6.25).epsilon(0.01));
    }
}

TEST_CASE("NCCL sockets: --network parses KIND:NxGBIT[:FLOW], names the bad part, and survives the JSON file") {
    const calib::NcclSocketNet net = calib::parse_socket_network("aws:4x100:2.5");
    CHECK(net.vendor == calib::SocketNic::aws);
    CHECK(net.nics == 4);
    CHECK(net.nic_gbps == Approx(12.5));
    CHECK(net.flow_gbps == Approx(2.5));
    CHECK(calib::parse_socket_network("gcp:1x200").flow_gbps == Approx(1.25));
    CHECK_THROWS_WITH(calib::parse_socket_network("ethernet"), Catch::Contains("KIND:NxGBIT"));
    CHECK_THROWS_WITH(calib::parse_socket_network("ib:8x400"), Catch::Contains("unknown kind 'ib'"));
    CHECK_THROWS_WITH(calib::parse_socket_network("ethernet:0x100"), Catch::Contains("NIC count '0'"));
    CHECK_THROWS_WITH(calib::parse_socket_network("ethernet:1.5x100"), Catch::Contains("whole number"));
    CHECK_THROWS_WITH(calib::parse_socket_network("ethernet:1x100:fast"), Catch::Contains("flow rate 'fast'"));
    calib::Calibration mi300x = calib::load_hardware("mi300x");
    CHECK_THROWS_WITH(calib::use_socket_network(mi300x, net), Catch::Contains("no NCCL model"));

    const calib::Calibration c = over_sockets("aws:2x100:2.5");
    const std::string text = calib::to_json_text(c);
    const calib::Calibration back = calib::calibration_from_json_text(text, "eth.json");
    CHECK(back.nccl.socket.vendor == calib::SocketNic::aws);
    CHECK(back.nccl.socket.nics == 2);
    CHECK(back.nccl.socket.flow_gbps == Approx(2.5));
    CHECK(calib::to_json_text(back) == text);
    std::string bad = text;
    const auto at = bad.find("\"aws\"");
    REQUIRE(at != std::string::npos);
    bad.replace(at, 5, "\"azure\"");
    CHECK_THROWS_WITH(calib::calibration_from_json_text(bad, "eth.json"),
                      Catch::Contains("eth.json") && Catch::Contains("vendor") && Catch::Contains("'azure'"));
}
