// The Calibration's JSON form. Versioned; every read error names the field.
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/profiler/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::calib {
namespace {

Json gemm_curve_json(const GemmCurve& c) {
    Json j = {{"dtype", to_string(c.dtype)}, {"peak_tflops", c.peak_tflops}, {"max_efficiency", c.max_efficiency},
              {"half_m", c.half_m},          {"half_n", c.half_n},           {"half_k", c.half_k},
              {"fit_error", c.fit_error},    {"align4_ratio", c.align4_ratio}, {"align2_ratio", c.align2_ratio}};
    // Absent: as fast as NN (files before the layouts, and unmeasured presets).
    if (c.nt_ratio != 1) j["nt_ratio"] = c.nt_ratio;
    if (c.tn_ratio != 1) j["tn_ratio"] = c.tn_ratio;
    return j;
}

GemmLayout layout_from_json(std::string_view name) {
    if (auto l = gemm_layout_from_string(name)) return *l;
    throw ConfigError(fmt::format("unknown GEMM layout '{}': expected nn, nt or tn", name));
}

Json collective_json(const CollectiveCurve& c) {
    Json points = Json::array(), spread = Json::array();
    bool any_spread = false;
    for (const auto& p : c.points) {
        points.push_back({p.size_bytes, p.time_us});
        spread.push_back(p.spread);
        any_spread = any_spread || p.spread > 0;
    }
    Json j = {{"kind", to_string(c.kind)},  {"scope", to_string(c.scope)},          {"group_size", c.group_size},
              {"latency_us", c.latency_us}, {"step_latency_us", c.step_latency_us}, {"bus_bw_gbps", c.bus_bw_gbps},
              {"fit_error", c.fit_error},   {"points_size_bytes_time_us", points}};
    if (any_spread) j["points_spread"] = spread;  // one per point: (p90 - p10) / median
    if (c.dtype != DType::fp32) j["dtype"] = to_string(c.dtype);  // absent: fp32 (files before it)
    return j;
}

Json nccl_graph_json(const NcclGraph& g) {
    return {{"channels", g.channels}, {"bw_intra_gbps", g.bw_intra_gbps}, {"bw_inter_gbps", g.bw_inter_gbps}};
}

// SocketNic's names, in its order.
constexpr std::string_view kSocketNicNames[] = {"generic", "aws", "gcp"};

Json nccl_json(const NcclTopology& t) {
    Json j = {{"sm", t.sm},
              {"amd_cpu", t.amd_cpu},
              {"nvlink", t.nvlink},
              {"nvls", t.nvls},
              {"nic_near_gpu", t.nic_near_gpu},
              {"ring_node", nccl_graph_json(t.ring_node)},
              {"tree_node", nccl_graph_json(t.tree_node)},
              {"nvls_node", nccl_graph_json(t.nvls_node)},
              {"ring_nodes", nccl_graph_json(t.ring_nodes)},
              {"tree_nodes", nccl_graph_json(t.tree_nodes)},
              {"nvls_nodes", nccl_graph_json(t.nvls_nodes)},
              {"channels_node", t.channels_node},
              {"channels_nodes", t.channels_nodes},
              {"gpus_per_node", t.gpus_per_node}};
    if (t.socket.present())
        j["socket"] = {{"vendor", kSocketNicNames[static_cast<std::size_t>(t.socket.vendor)]},
                       {"nics", t.socket.nics},
                       {"nic_gbps", t.socket.nic_gbps},
                       {"flow_gbps", t.socket.flow_gbps}};
    return j;
}

// The ranges of a calibration's numbers. Each upper bound lies far beyond any
// real machine, so it refuses only a wrong unit or a corrupt file, and keeps
// the cost model's arithmetic finite.
constexpr Bounds kRateGbps{.min = 0, .min_exclusive = true, .max = 1e6, .why_max = "no memory or link reaches 1 PB/s"};
constexpr Bounds kOptionalRateGbps{.min = 0, .max = 1e6, .why_max = "no memory or link reaches 1 PB/s; 0: not measured"};
constexpr Bounds kTimeUs{.min = 0, .min_exclusive = true, .max = 1e9,
                         .why_max = "a kernel or collective measured over 1,000 s is a broken measurement"};
constexpr Bounds kLatencyUs{.min = 0, .max = 1e9, .why_max = "a latency over 1,000 s is a broken measurement"};
constexpr Bounds kTflops{.min = 0, .min_exclusive = true, .max = 1e6, .why_max = "1 EFLOP/s, beyond any one device"};
constexpr Bounds kEfficiency{.min = 0, .min_exclusive = true, .max = 1, .why_max = "a fraction of the peak"};
constexpr Bounds kInPlaceSpeedup{
    .min = 0,
    .min_exclusive = true,
    .max = 4,
    .why_max = "an in-place pass 4x as fast as an out-of-place one is a broken measurement"};
constexpr Bounds kHalfDim{.min = 0, .max = 1e9, .why_max = "a GEMM dimension of 1e9 never occurs in a model"};
constexpr Bounds kFitError{.min = 0, .max = 1e6, .why_max = "a relative error"};
constexpr Bounds kLayoutRatio{.min = 0, .min_exclusive = true, .max = 10,
                              .why_max = "a transposed layout 10x faster than NN is a broken measurement"};
constexpr Bounds kSpread{.min = 0, .max = 1e6, .why_max = "(p90 - p10) / median of the repeats"};
constexpr Bounds kStragglerRanks{.min = 2, .max = 1 << 20, .why_max = "more ranks than any machine has"};
constexpr Bounds kSlowdown{.min = 1, .max = 100, .why_max = "a slowdown over 100x is a broken measurement"};
constexpr Bounds kElementsPerS{.min = 0, .max = 1e15, .why_max = "no device touches 1e15 elements a second; 0: not limiting"};
constexpr Bounds kParamsPerS{.min = 0, .max = 1e13, .why_max = "no CPU updates 1e13 parameters per second"};
constexpr Bounds kGemmDim{.min = 1, .max = 16777216, .why_max = "2^24; no model's GEMM is larger"};
constexpr Bounds kMemoryBytes{.min = 0, .min_exclusive = true, .max = 1125899906842624.0,
                              .why_max = "1 PiB, beyond any one device"};
constexpr Bounds kWorldSize{.min = 0, .max = 1048576, .why_max = "2^20 ranks, more than any cluster built"};
constexpr Bounds kGpusPerNode{.min = 1, .max = 4096, .why_max = "no node has more ranks"};
constexpr Bounds kSocketNics{
    .min = 1, .max = 16, .why_max = "NCCL's socket transport uses at most 16 interfaces (socket.h MAX_IFS)"};
constexpr Bounds kGroupSize{.min = 0, .max = 1048576, .why_max = "2^20 ranks, more than any cluster built"};
constexpr Bounds kSizeBytes{.min = 0, .min_exclusive = true, .max = 1125899906842624.0,
                            .why_max = "1 PiB; nccl-tests sweeps up to a few GiB"};

// Array lengths: `dtsim calibrate` writes a few hundred GEMM points and a few
// dozen sizes per collective; the cost model searches them per task.
constexpr std::size_t kMaxGemmCurves = 64;
constexpr std::size_t kMaxGemmPoints = 100000;
constexpr std::size_t kMaxCollectives = 10000;
constexpr std::size_t kMaxPointsPerCurve = 10000;
constexpr Bounds kNcclSm{
    .min = 60, .max = 200, .why_max = "compute capability x 10: 80 Ampere, 90 Hopper, 100 Blackwell"};
constexpr Bounds kNcclChannels{.min = 0, .max = 64, .why_max = "NCCL launches at most 64 channels (MAXCHANNELS)"};

template <class F>
auto enum_field(const JsonView& v, const std::string& key, F parse) {
    std::string s = v.string(key);
    try {
        return parse(s);
    } catch (const ConfigError& e) {
        v.fail(key, e.what());
    }
}

GemmCurve read_gemm_curve(const JsonView& v) {
    GemmCurve c;
    c.dtype = enum_field(v, "dtype", dtype_from_string);
    c.peak_tflops = v.number_within("peak_tflops", kTflops);
    c.max_efficiency = v.number_within("max_efficiency", kEfficiency);
    c.half_m = v.number_within("half_m", kHalfDim);
    c.half_n = v.number_within("half_n", kHalfDim);
    c.half_k = v.number_within("half_k", kHalfDim);
    c.fit_error = v.has("fit_error") ? v.number_within("fit_error", kFitError) : 0;
    // Optional: files from before the alignment classes read as unpenalised.
    c.align4_ratio = v.has("align4_ratio") ? v.number_within("align4_ratio", kEfficiency) : 1;
    c.align2_ratio = v.has("align2_ratio") ? v.number_within("align2_ratio", kEfficiency) : 1;
    c.nt_ratio = v.has("nt_ratio") ? v.number_within("nt_ratio", kLayoutRatio) : 1;
    c.tn_ratio = v.has("tn_ratio") ? v.number_within("tn_ratio", kLayoutRatio) : 1;
    return c;
}

GemmPoint read_gemm_point(const JsonView& v) {
    GemmPoint p;
    p.dtype = enum_field(v, "dtype", dtype_from_string);
    p.m = v.integer_within("m", kGemmDim);
    p.n = v.integer_within("n", kGemmDim);
    p.k = v.integer_within("k", kGemmDim);
    p.batch = v.has("batch") ? v.integer_within("batch", kGemmDim) : 1;
    p.time_us = v.number_within("time_us", kTimeUs);
    p.spread = v.has("spread") ? v.number_within("spread", kSpread) : 0;
    if (v.has("layout")) p.layout = enum_field(v, "layout", layout_from_json);  // absent: nn
    return p;
}

// One [size_bytes, time_us] pair of a collective's measured points.
CollectivePoint read_collective_point(const JsonView& p) {
    const Json& x = p.value();
    if (!x.is_array() || x.size() != 2) p.fail("", "expected a pair [size_bytes, time_us]");
    const JsonView size(x[0], p.file(), p.path() + "/0");
    const JsonView time(x[1], p.file(), p.path() + "/1");
    if (!x[0].is_number_integer()) size.fail("", fmt::format("expected a size in bytes (an integer), found {}", json_excerpt(x[0])));
    if (x[0].is_number_unsigned() ? x[0].get<std::uint64_t>() > static_cast<std::uint64_t>(kSizeBytes.max)
                                  : !check_bounds(x[0].get<double>(), kSizeBytes).empty())
        size.fail("", fmt::format("expected {}, found {}", describe_bounds(kSizeBytes), json_excerpt(x[0])));
    if (!x[1].is_number()) time.fail("", fmt::format("expected a time in microseconds, found {}", json_excerpt(x[1])));
    if (std::string why = check_bounds(x[1].get<double>(), kTimeUs); !why.empty()) time.fail("", why);
    return CollectivePoint{.size_bytes = x[0].get<std::int64_t>(), .time_us = x[1].get<double>()};
}

NcclGraph read_nccl_graph(const JsonView& v) {
    NcclGraph g;
    g.channels = static_cast<int>(v.integer_within("channels", kNcclChannels));
    g.bw_intra_gbps = v.number_within("bw_intra_gbps", kOptionalRateGbps);
    g.bw_inter_gbps = v.number_within("bw_inter_gbps", kOptionalRateGbps);
    return g;
}

NcclTopology read_nccl(const JsonView& v) {
    NcclTopology t;
    t.sm = static_cast<int>(v.integer_within("sm", kNcclSm));
    t.amd_cpu = v.boolean_or("amd_cpu", false);
    t.nvlink = v.boolean_or("nvlink", true);
    t.nvls = v.boolean_or("nvls", false);
    t.nic_near_gpu = v.boolean_or("nic_near_gpu", true);
    t.ring_node = read_nccl_graph(v.at("ring_node"));
    t.tree_node = read_nccl_graph(v.at("tree_node"));
    t.ring_nodes = read_nccl_graph(v.at("ring_nodes"));
    t.tree_nodes = read_nccl_graph(v.at("tree_nodes"));
    if (v.has("nvls_node")) t.nvls_node = read_nccl_graph(v.at("nvls_node"));
    if (v.has("nvls_nodes")) t.nvls_nodes = read_nccl_graph(v.at("nvls_nodes"));
    for (auto [key, graph] : {std::pair{"ring_node", &t.ring_node}, std::pair{"tree_node", &t.tree_node},
                              std::pair{"ring_nodes", &t.ring_nodes}, std::pair{"tree_nodes", &t.tree_nodes}})
        if (graph->channels < 1 || graph->bw_intra_gbps <= 0 || graph->bw_inter_gbps <= 0)
            v.fail(key, "expected a graph of at least 1 channel with positive bandwidths");
    if (t.nvls && (t.nvls_node.channels < 2 || t.nvls_node.bw_intra_gbps <= 0 || t.nvls_node.bw_inter_gbps <= 0))
        v.fail("nvls_node", "nvls is true: expected a graph of at least 2 channels with positive bandwidths");
    if (t.nvls_nodes.channels != 0 &&
        (t.nvls_nodes.channels < 2 || t.nvls_nodes.bw_intra_gbps <= 0 || t.nvls_nodes.bw_inter_gbps <= 0))
        v.fail("nvls_nodes", "expected no graph (0 channels) or one of at least 2 channels with positive bandwidths");
    if (t.nvls_nodes.channels != 0 && !t.nvls)
        v.fail("nvls_nodes", "nvls is false (no NVLink SHARP): expected no graph (0 channels)");
    t.channels_node = static_cast<int>(v.integer_within("channels_node", kNcclChannels));
    t.channels_nodes = static_cast<int>(v.integer_within("channels_nodes", kNcclChannels));
    t.gpus_per_node = v.has("gpus_per_node") ? static_cast<int>(v.integer_within("gpus_per_node", kGpusPerNode)) : 8;
    if (v.has("socket")) {
        const JsonView s = v.at("socket");
        const std::string vendor = s.string_or("vendor", "generic");
        const auto* it = std::find(std::begin(kSocketNicNames), std::end(kSocketNicNames), vendor);
        if (it == std::end(kSocketNicNames))
            s.fail("vendor",
                   fmt::format("expected generic, aws or gcp (NCCL's NIC auto-detection), found '{}'", vendor));
        t.socket.vendor = static_cast<SocketNic>(it - std::begin(kSocketNicNames));
        t.socket.nics = static_cast<int>(s.integer_within("nics", kSocketNics));
        t.socket.nic_gbps = s.number_within("nic_gbps", kRateGbps);
        t.socket.flow_gbps = s.number_within("flow_gbps", kRateGbps);
        if (t.nvls_nodes.channels != 0)
            v.fail("nvls_nodes", "the nodes talk over sockets (socket): expected no NVLSTree graph (0 channels)");
    }
    return t;
}

CollectiveCurve read_collective(const JsonView& v) {
    CollectiveCurve c;
    c.kind = enum_field(v, "kind", collective_kind_from_string);
    c.scope = enum_field(v, "scope", link_scope_from_string);
    c.group_size = static_cast<int>(v.integer_within("group_size", kGroupSize));
    if (c.group_size == 1) v.fail("group_size", "expected 0 (any) or a group of >= 2 ranks, found 1");
    if (v.has("dtype")) c.dtype = enum_field(v, "dtype", dtype_from_string);
    c.latency_us = v.number_within("latency_us", kLatencyUs);
    c.step_latency_us = v.has("step_latency_us") ? v.number_within("step_latency_us", kLatencyUs) : 0;
    c.bus_bw_gbps = v.number_within("bus_bw_gbps", kRateGbps);
    c.fit_error = v.has("fit_error") ? v.number_within("fit_error", kFitError) : 0;
    if (v.has("points_size_bytes_time_us")) {
        JsonView pts = v.at("points_size_bytes_time_us");
        const std::size_t n = pts.size_at_most(kMaxPointsPerCurve, "points per curve (nccl-tests sweeps a few dozen sizes)");
        for (std::size_t i = 0; i < n; ++i) {
            JsonView p = pts.at(i);
            CollectivePoint cp = read_collective_point(p);
            if (!c.points.empty() && cp.size_bytes <= c.points.back().size_bytes)
                p.fail("", fmt::format("points must be sorted by increasing size ({} follows {})", cp.size_bytes,
                                       c.points.back().size_bytes));
            c.points.push_back(cp);
        }
    }
    if (v.has("points_spread")) {
        JsonView spreads = v.at("points_spread");
        if (spreads.size() != c.points.size())
            spreads.fail("", fmt::format("expected one spread per point of points_size_bytes_time_us ({}), found {}",
                                         c.points.size(), spreads.size()));
        for (std::size_t i = 0; i < spreads.size(); ++i) {
            const JsonView x = spreads.at(i);
            if (!x.value().is_number()) x.fail("", fmt::format("expected a number, found {}", json_excerpt(x.value())));
            if (std::string why = check_bounds(x.value().get<double>(), kSpread); !why.empty()) x.fail("", why);
            c.points[i].spread = x.value().get<double>();
        }
    }
    return c;
}

}  // namespace

std::string to_json_text(const Calibration& c) {
    Json j;
    j["dtsim_calibration_version"] = c.version;
    j["name"] = c.name;
    j["provenance"] = {
        {"source", c.provenance.source},   {"machine", c.provenance.machine},       {"date", c.provenance.date},
        {"backend", c.provenance.backend}, {"world_size", c.provenance.world_size}, {"notes", c.provenance.notes}};
    if (!c.provenance.sampling.empty()) j["provenance"]["sampling"] = c.provenance.sampling;
    if (!c.provenance.half_sum.empty()) j["provenance"]["half_sum"] = c.provenance.half_sum;
    j["device"] = {{"name", c.device.name},
                   {"memory_bytes", c.device.memory_bytes},
                   {"reserved_bytes", c.device.reserved_bytes},
                   {"mem_bw_gbps", c.device.mem_bw_gbps},
                   {"elementwise_efficiency", c.device.elementwise_efficiency},
                   {"kernel_overhead_us", c.device.kernel_overhead_us},
                   {"in_place_speedup", c.device.in_place_speedup},
                   {"indexed_elements_per_s", c.device.indexed_elements_per_s}};
    j["gpus_per_node"] = c.gpus_per_node;
    j["gemm_curves"] = Json::array();
    for (const auto& g : c.gemm_curves) j["gemm_curves"].push_back(gemm_curve_json(g));
    j["gemm_points"] = Json::array();
    for (const auto& p : c.gemm_points) {
        Json g = {{"dtype", to_string(p.dtype)}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch},
                  {"time_us", p.time_us}};
        if (p.spread > 0) g["spread"] = p.spread;
        if (p.layout != GemmLayout::nn) g["layout"] = to_string(p.layout);
        j["gemm_points"].push_back(g);
    }
    j["collectives"] = Json::array();
    for (const auto& col : c.collectives) j["collectives"].push_back(collective_json(col));
    j["host"] = {{"h2d_pinned_gbps", c.host.h2d_pinned_gbps},
                 {"d2h_pinned_gbps", c.host.d2h_pinned_gbps},
                 {"h2d_pageable_gbps", c.host.h2d_pageable_gbps},
                 {"d2h_pageable_gbps", c.host.d2h_pageable_gbps},
                 {"cpu_adam_params_per_s", c.host.cpu_adam_params_per_s},
                 {"cpu_torch_adam_params_per_s", c.host.cpu_torch_adam_params_per_s},
                 {"nvme_read_gbps", c.host.nvme_read_gbps},
                 {"nvme_write_gbps", c.host.nvme_write_gbps}};
    if (c.host.first_touch_gbps > 0) j["host"]["first_touch_gbps"] = c.host.first_touch_gbps;  // CPU calibrations
    if (c.host.mem_bw_one_rank_gbps > 0) j["host"]["mem_bw_one_rank_gbps"] = c.host.mem_bw_one_rank_gbps;
    if (c.host.first_touch_one_rank_gbps > 0) j["host"]["first_touch_one_rank_gbps"] = c.host.first_touch_one_rank_gbps;
    j["overlap"] = {{"compute_slowdown_under_comm", c.overlap.compute_slowdown_under_comm},
                    {"comm_slowdown_under_compute", c.overlap.comm_slowdown_under_compute},
                    {"compute_slowdown_under_host", c.overlap.compute_slowdown_under_host},
                    {"host_slowdown_under_compute", c.overlap.host_slowdown_under_compute}};
    if (c.overlap.straggler_ranks > 1) {  // measured: CPU calibrations of more than one rank
        j["overlap"]["straggler"] = c.overlap.straggler;
        j["overlap"]["straggler_ranks"] = c.overlap.straggler_ranks;
    }
    if (c.nccl.present()) j["nccl"] = nccl_json(c.nccl);  // absent: no NCCL model (CPU backends, RCCL)
    return j.dump(2) + "\n";
}

namespace {

Calibration calibration_from_json(const Json& j, const std::string& file) {
    JsonView root(j, file);
    if (!j.is_object()) root.fail("", fmt::format("expected a calibration object, found {}", j.type_name()));
    if (!root.has("dtsim_calibration_version"))
        root.fail("dtsim_calibration_version",
                  "missing; is this a dtsim calibration file (made by `dtsim calibrate`)?");
    std::int64_t version = root.integer("dtsim_calibration_version");
    if (version != kCalibrationVersion)
        root.fail("dtsim_calibration_version",
                  fmt::format("version {} is not supported; this dtsim reads version {} (re-run `dtsim calibrate`)",
                              version, kCalibrationVersion));
    Calibration c;
    c.name = root.string("name");
    JsonView prov = root.at("provenance");
    c.provenance.source = prov.string("source");
    c.provenance.machine = prov.string_or("machine", "");
    c.provenance.date = prov.string_or("date", "");
    c.provenance.backend = prov.string_or("backend", "");
    c.provenance.world_size = static_cast<int>(prov.has("world_size") ? prov.integer_within("world_size", kWorldSize) : 0);
    c.provenance.notes = prov.string_or("notes", "");
    c.provenance.sampling = prov.string_or("sampling", "");
    c.provenance.half_sum = prov.string_or("half_sum", "");
    if (!c.provenance.half_sum.empty() && c.provenance.half_sum != "c10::Half" && c.provenance.half_sum != "gloo::float16")
        prov.fail("half_sum", "\"c10::Half\" or \"gloo::float16\" (how a gloo calibration's fp16 allreduce summed)");
    JsonView dev = root.at("device");
    c.device.name = dev.string("name");
    c.device.memory_bytes = dev.integer_within("memory_bytes", kMemoryBytes);
    c.device.reserved_bytes = dev.has("reserved_bytes") ? dev.integer("reserved_bytes") : 0;
    if (c.device.reserved_bytes < 0 || c.device.reserved_bytes >= c.device.memory_bytes)
        dev.fail("reserved_bytes", fmt::format("expected a non-negative number of bytes below memory_bytes ({}), found {}",
                                               c.device.memory_bytes, c.device.reserved_bytes));
    c.device.mem_bw_gbps = dev.number_within("mem_bw_gbps", kRateGbps);
    c.device.elementwise_efficiency = dev.number_within("elementwise_efficiency", kEfficiency);
    c.device.kernel_overhead_us = dev.number_within("kernel_overhead_us", kLatencyUs);
    c.device.in_place_speedup =
        dev.has("in_place_speedup") ? dev.number_within("in_place_speedup", kInPlaceSpeedup) : 1.0;
    c.device.indexed_elements_per_s =
        dev.has("indexed_elements_per_s") ? dev.number_within("indexed_elements_per_s", kElementsPerS) : 0;
    c.gpus_per_node = static_cast<int>(root.integer_within("gpus_per_node", kGpusPerNode));
    JsonView curves = root.at("gemm_curves");
    const std::size_t n_curves = curves.size_at_most(kMaxGemmCurves, "GEMM curves (one per dtype)");
    for (std::size_t i = 0; i < n_curves; ++i) c.gemm_curves.push_back(read_gemm_curve(curves.at(i)));
    if (c.gemm_curves.empty()) curves.fail("", "expected at least one GEMM curve (fp32 or bf16)");
    if (root.has("gemm_points")) {
        JsonView pts = root.at("gemm_points");
        const std::size_t n = pts.size_at_most(kMaxGemmPoints, "GEMM points (`dtsim calibrate` measures a few hundred)");
        for (std::size_t i = 0; i < n; ++i) c.gemm_points.push_back(read_gemm_point(pts.at(i)));
    }
    JsonView cols = root.at("collectives");
    const std::size_t n_cols = cols.size_at_most(kMaxCollectives, "collective curves");
    for (std::size_t i = 0; i < n_cols; ++i) c.collectives.push_back(read_collective(cols.at(i)));
    if (root.has("host")) {
        JsonView h = root.at("host");
        c.host.h2d_pinned_gbps = h.number_within("h2d_pinned_gbps", kOptionalRateGbps);
        c.host.d2h_pinned_gbps = h.number_within("d2h_pinned_gbps", kOptionalRateGbps);
        c.host.h2d_pageable_gbps = h.number_within("h2d_pageable_gbps", kOptionalRateGbps);
        c.host.d2h_pageable_gbps = h.number_within("d2h_pageable_gbps", kOptionalRateGbps);
        c.host.cpu_adam_params_per_s = h.number_within("cpu_adam_params_per_s", kParamsPerS);
        c.host.cpu_torch_adam_params_per_s =
            h.has("cpu_torch_adam_params_per_s") ? h.number_within("cpu_torch_adam_params_per_s", kParamsPerS) : 0;
        c.host.first_touch_gbps = h.has("first_touch_gbps") ? h.number_within("first_touch_gbps", kOptionalRateGbps) : 0;
        c.host.mem_bw_one_rank_gbps =
            h.has("mem_bw_one_rank_gbps") ? h.number_within("mem_bw_one_rank_gbps", kOptionalRateGbps) : 0;
        c.host.first_touch_one_rank_gbps =
            h.has("first_touch_one_rank_gbps") ? h.number_within("first_touch_one_rank_gbps", kOptionalRateGbps) : 0;
        c.host.nvme_read_gbps = h.number_within("nvme_read_gbps", kOptionalRateGbps);
        c.host.nvme_write_gbps = h.number_within("nvme_write_gbps", kOptionalRateGbps);
    }
    if (root.has("overlap")) {
        JsonView o = root.at("overlap");
        c.overlap.compute_slowdown_under_comm = o.number_within("compute_slowdown_under_comm", kSlowdown);
        c.overlap.comm_slowdown_under_compute = o.number_within("comm_slowdown_under_compute", kSlowdown);
        // Optional: calibrations written before host interference was measured.
        for (auto [key, value] : {std::pair{"compute_slowdown_under_host", &c.overlap.compute_slowdown_under_host},
                                  std::pair{"host_slowdown_under_compute", &c.overlap.host_slowdown_under_compute}})
            if (o.has(key)) *value = o.number_within(key, kSlowdown);
        // Optional, together: calibrations of one rank, GPUs and presets have neither.
        if (o.has("straggler") || o.has("straggler_ranks")) {
            c.overlap.straggler = o.number_within("straggler", kSlowdown);
            c.overlap.straggler_ranks = static_cast<int>(o.integer_within("straggler_ranks", kStragglerRanks));
        }
    }
    if (root.has("nccl")) c.nccl = read_nccl(root.at("nccl"));
    return c;
}

}  // namespace

Calibration calibration_from_json_text(const std::string& text, const std::string& file) {
    return calibration_from_json(parse_json_text(text, file, "a dtsim calibration (JSON)"), file);
}

Calibration read_calibration(const std::string& path) {
    return calibration_from_json_text(read_config_file(path), path);
}

void write_calibration(const Calibration& c, const std::string& path) {
    write_file_atomically(path, to_json_text(c));
}

}  // namespace dtsim::calib
