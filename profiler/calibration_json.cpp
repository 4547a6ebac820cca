// The Calibration's JSON form. Versioned; every read error names the field.
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "dtsim/profiler/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::calib {
namespace {

Json gemm_curve_json(const GemmCurve& c) {
    return {{"dtype", to_string(c.dtype)}, {"peak_tflops", c.peak_tflops}, {"max_efficiency", c.max_efficiency},
            {"half_m", c.half_m},          {"half_n", c.half_n},           {"half_k", c.half_k},
            {"fit_error", c.fit_error}};
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
    return j;
}

// A number that must be positive (or non-negative with allow_zero).
double positive(const JsonView& v, const std::string& key, bool allow_zero = false) {
    double x = v.number(key);
    if (x < 0 || (!allow_zero && x == 0))
        v.fail(key, fmt::format("expected a {} number, found {}", allow_zero ? "non-negative" : "positive", x));
    return x;
}

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
    c.peak_tflops = positive(v, "peak_tflops");
    c.max_efficiency = positive(v, "max_efficiency");
    if (c.max_efficiency > 1.0) v.fail("max_efficiency", "expected a fraction in (0, 1]");
    c.half_m = positive(v, "half_m", true);
    c.half_n = positive(v, "half_n", true);
    c.half_k = positive(v, "half_k", true);
    c.fit_error = v.number_or("fit_error", 0);
    return c;
}

GemmPoint read_gemm_point(const JsonView& v) {
    GemmPoint p;
    p.dtype = enum_field(v, "dtype", dtype_from_string);
    p.m = v.integer("m");
    p.n = v.integer("n");
    p.k = v.integer("k");
    p.batch = v.has("batch") ? v.integer("batch") : 1;
    if (p.m < 1 || p.n < 1 || p.k < 1 || p.batch < 1) v.fail("m", "GEMM dimensions must be >= 1");
    p.time_us = positive(v, "time_us");
    p.spread = v.has("spread") ? positive(v, "spread", true) : 0;
    return p;
}

CollectiveCurve read_collective(const JsonView& v) {
    CollectiveCurve c;
    c.kind = enum_field(v, "kind", collective_kind_from_string);
    c.scope = enum_field(v, "scope", link_scope_from_string);
    c.group_size = static_cast<int>(v.integer("group_size"));
    if (c.group_size < 0 || c.group_size == 1) v.fail("group_size", "expected 0 (any) or a group of >= 2 ranks");
    c.latency_us = positive(v, "latency_us", true);
    c.step_latency_us = v.number_or("step_latency_us", 0);
    c.bus_bw_gbps = positive(v, "bus_bw_gbps");
    c.fit_error = v.number_or("fit_error", 0);
    if (v.has("points_size_bytes_time_us")) {
        JsonView pts = v.at("points_size_bytes_time_us");
        for (std::size_t i = 0; i < pts.size(); ++i) {
            JsonView p = pts.at(i);
            if (!p.value().is_array() || p.value().size() != 2 || !p.value()[0].is_number() ||
                !p.value()[1].is_number())
                p.fail("", "expected a pair [size_bytes, time_us]");
            CollectivePoint cp{p.value()[0].get<std::int64_t>(), p.value()[1].get<double>()};
            if (cp.size_bytes <= 0 || cp.time_us <= 0) p.fail("", "size and time must be positive");
            if (!c.points.empty() && cp.size_bytes <= c.points.back().size_bytes)
                p.fail("", "points must be sorted by increasing size");
            c.points.push_back(cp);
        }
    }
    if (v.has("points_spread")) {
        JsonView spreads = v.at("points_spread");
        if (spreads.size() != c.points.size())
            spreads.fail("", "expected one spread per point of points_size_bytes_time_us");
        for (std::size_t i = 0; i < spreads.size(); ++i) {
            const Json& x = spreads.at(i).value();
            if (!x.is_number() || x.get<double>() < 0) spreads.at(i).fail("", "expected a non-negative number");
            c.points[i].spread = x.get<double>();
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
    j["device"] = {{"name", c.device.name},
                   {"memory_bytes", c.device.memory_bytes},
                   {"reserved_bytes", c.device.reserved_bytes},
                   {"mem_bw_gbps", c.device.mem_bw_gbps},
                   {"elementwise_efficiency", c.device.elementwise_efficiency},
                   {"kernel_overhead_us", c.device.kernel_overhead_us}};
    j["gpus_per_node"] = c.gpus_per_node;
    j["gemm_curves"] = Json::array();
    for (const auto& g : c.gemm_curves) j["gemm_curves"].push_back(gemm_curve_json(g));
    j["gemm_points"] = Json::array();
    for (const auto& p : c.gemm_points) {
        Json g = {{"dtype", to_string(p.dtype)}, {"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch},
                  {"time_us", p.time_us}};
        if (p.spread > 0) g["spread"] = p.spread;
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
    j["overlap"] = {{"compute_slowdown_under_comm", c.overlap.compute_slowdown_under_comm},
                    {"comm_slowdown_under_compute", c.overlap.comm_slowdown_under_compute},
                    {"compute_slowdown_under_host", c.overlap.compute_slowdown_under_host},
                    {"host_slowdown_under_compute", c.overlap.host_slowdown_under_compute}};
    return j.dump(2) + "\n";
}

Calibration calibration_from_json_text(const std::string& text, const std::string& file) {
    Json j;
    try {
        j = Json::parse(text);
    } catch (const Json::parse_error& e) {
        throw ParseError(file, "", fmt::format("not valid JSON: {}", e.what()));
    }
    JsonView root(j, file);
    if (!j.is_object()) root.fail("", "expected a calibration object");
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
    c.provenance.world_size = static_cast<int>(prov.has("world_size") ? prov.integer("world_size") : 0);
    c.provenance.notes = prov.string_or("notes", "");
    JsonView dev = root.at("device");
    c.device.name = dev.string("name");
    c.device.memory_bytes = dev.integer("memory_bytes");
    if (c.device.memory_bytes <= 0) dev.fail("memory_bytes", "expected a positive number of bytes");
    c.device.reserved_bytes = dev.has("reserved_bytes") ? dev.integer("reserved_bytes") : 0;
    if (c.device.reserved_bytes < 0 || c.device.reserved_bytes >= c.device.memory_bytes)
        dev.fail("reserved_bytes", "expected a non-negative number of bytes below memory_bytes");
    c.device.mem_bw_gbps = positive(dev, "mem_bw_gbps");
    c.device.elementwise_efficiency = positive(dev, "elementwise_efficiency");
    c.device.kernel_overhead_us = positive(dev, "kernel_overhead_us", true);
    c.gpus_per_node = static_cast<int>(root.integer("gpus_per_node"));
    if (c.gpus_per_node < 1) root.fail("gpus_per_node", "expected >= 1");
    JsonView curves = root.at("gemm_curves");
    for (std::size_t i = 0; i < curves.size(); ++i) c.gemm_curves.push_back(read_gemm_curve(curves.at(i)));
    if (c.gemm_curves.empty()) curves.fail("", "expected at least one GEMM curve (fp32 or bf16)");
    if (root.has("gemm_points")) {
        JsonView pts = root.at("gemm_points");
        for (std::size_t i = 0; i < pts.size(); ++i) c.gemm_points.push_back(read_gemm_point(pts.at(i)));
    }
    JsonView cols = root.at("collectives");
    for (std::size_t i = 0; i < cols.size(); ++i) c.collectives.push_back(read_collective(cols.at(i)));
    if (root.has("host")) {
        JsonView h = root.at("host");
        c.host.h2d_pinned_gbps = positive(h, "h2d_pinned_gbps", true);
        c.host.d2h_pinned_gbps = positive(h, "d2h_pinned_gbps", true);
        c.host.h2d_pageable_gbps = positive(h, "h2d_pageable_gbps", true);
        c.host.d2h_pageable_gbps = positive(h, "d2h_pageable_gbps", true);
        c.host.cpu_adam_params_per_s = positive(h, "cpu_adam_params_per_s", true);
        c.host.cpu_torch_adam_params_per_s =
            h.has("cpu_torch_adam_params_per_s") ? positive(h, "cpu_torch_adam_params_per_s", true) : 0;
        c.host.nvme_read_gbps = positive(h, "nvme_read_gbps", true);
        c.host.nvme_write_gbps = positive(h, "nvme_write_gbps", true);
    }
    if (root.has("overlap")) {
        JsonView o = root.at("overlap");
        c.overlap.compute_slowdown_under_comm = o.number("compute_slowdown_under_comm");
        c.overlap.comm_slowdown_under_compute = o.number("comm_slowdown_under_compute");
        if (c.overlap.compute_slowdown_under_comm < 1.0) o.fail("compute_slowdown_under_comm", "expected >= 1");
        if (c.overlap.comm_slowdown_under_compute < 1.0) o.fail("comm_slowdown_under_compute", "expected >= 1");
        // Optional: calibrations written before host interference was measured.
        for (auto [key, value] : {std::pair{"compute_slowdown_under_host", &c.overlap.compute_slowdown_under_host},
                                  std::pair{"host_slowdown_under_compute", &c.overlap.host_slowdown_under_compute}})
            if (o.has(key)) {
                *value = o.number(key);
                if (*value < 1.0) o.fail(key, "expected >= 1");
            }
    }
    return c;
}

Calibration read_calibration(const std::string& path) {
    Json j = read_json_file(path);  // names the file on I/O and syntax errors
    return calibration_from_json_text(j.dump(), path);
}

void write_calibration(const Calibration& c, const std::string& path) {
    write_file_atomically(path, to_json_text(c));
}

}  // namespace dtsim::calib
