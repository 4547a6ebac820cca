// Calibration JSON: presets and measured tables round-trip unchanged; every
// read error is a ParseError naming the file and the JSON path of the field.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/calibrate_cpu.hpp"
#include "dtsim/profiler/calibration.hpp"
#include "dtsim/profiler/measure.hpp"
#include "dtsim/profiler/presets.hpp"

#include <fmt/format.h>
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace dtsim;
using dtsim::test::read_text;
using dtsim::test::TempDir;
using namespace dtsim::calib;
namespace fs = std::filesystem;

namespace {

// A calibration as `dtsim calibrate` would write it: measured curves with
// points, a group-size-specific curve, and measured GEMMs.
Calibration measured_calibration() {
    Calibration c;
    c.name = "lab-cluster";
    c.provenance = {"measured",
                    "node017",
                    "2024-05-01",
                    "cuda-nccl-cublas",
                    16,
                    "two nodes, \"quoted\" note",
                    profiler::describe(profiler::RepeatPolicy{.warmup = 1, .min_sample_us = 30e3}),
                    ""};
    c.device = {"NVIDIA H100 80GB HBM3", 85520809984, 1073741824, 3100.5, 0.83, 2.5};
    c.gpus_per_node = 8;
    c.gemm_curves.push_back({DType::bf16, 989.4, 0.71, 301.5, 287.25, 140.125, 0.031});
    c.gemm_curves.push_back({DType::fp32, 66.9, 0.8, 120, 110, 60, 0.02});
    c.gemm_points.push_back({DType::bf16, 4096, 4096, 4096, 1, 183.25});
    c.gemm_points.push_back({DType::bf16, 128, 768, 3072, 12, 21.5});
    c.gemm_points.push_back({DType::fp32, 1024, 1024, 1024, 1, 40.0625});
    CollectiveCurve ar{CollectiveKind::allreduce, LinkScope::intra_node, 8, 7.5, 0.55, 352.5, 0.04, {}};
    ar.points = {{1024, 12.5}, {1048576, 30.25}, {268435456, 1400.75}};
    CollectiveCurve ag{CollectiveKind::allgather, LinkScope::inter_node, 2, 11.0, 4.5, 44.0, 0.07, {}};
    ag.points = {{4096, 25.0}, {16777216, 420.5}};
    CollectiveCurve rs{CollectiveKind::reduce_scatter, LinkScope::intra_node, 0, 8.0, 0.6, 340.0, 0, {}};
    c.collectives = {ar, ag, rs};
    c.host = {25.5, 24.5, 10.25, 9.75, 1.5e9, 6.5, 3.5};
    c.overlap = {1.125, 1.0625, 3.5, 1.25};
    return c;
}

// The message and field of the ParseError that reading `text` as `file` throws.
ParseError parse_error_of(const std::string& text, const std::string& file) {
    try {
        calibration_from_json_text(text, file);
    } catch (const ParseError& e) {
        return e;
    }
    FAIL("expected a ParseError reading " << file);
    throw std::logic_error("unreachable");
}

// A valid calibration's JSON, edited by `edit`, then read as "bad.json".
ParseError parse_error_after(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(to_json_text(measured_calibration()));
    edit(j);
    return parse_error_of(j.dump(2), "bad.json");
}

void check_names(const ParseError& e, const std::string& file, const std::string& field) {
    INFO(e.what());
    CHECK(e.file() == file);
    CHECK(e.field() == field);
    const std::string what = e.what();
    CHECK(what.find(file) != std::string::npos);
    CHECK(what.find(field) != std::string::npos);
}

}  // namespace

TEST_CASE("the built-in presets load and round-trip through JSON unchanged") {
    for (const auto& preset : list_presets()) {
        const std::string& name = preset.name;
        INFO(name);
        const Calibration c = load_hardware(name);
        CHECK(c.device.indexed_elements_per_s > 0);
        CHECK(c.name == name);
        CHECK(c.provenance.source == "preset");
        CHECK(c.device.memory_bytes > 0);
        CHECK(c.gemm_curve(DType::bf16) != nullptr);
        CHECK(c.gemm_curve(DType::fp32) != nullptr);
        CHECK_FALSE(c.collectives.empty());
        const std::string text = to_json_text(c);
        const Calibration back = calibration_from_json_text(text, name + ".json");
        CHECK(to_json_text(back) == text);
        CHECK(back.name == c.name);
        CHECK(back.collectives.size() == c.collectives.size());
        CHECK(back.device.mem_bw_gbps == c.device.mem_bw_gbps);
        CHECK(back.device.indexed_elements_per_s == c.device.indexed_elements_per_s);
    }
    // A file written before the element rate existed reads as "not limiting".
    std::string old_text = to_json_text(load_hardware("h100-sxm"));
    const auto at = old_text.find("\"indexed_elements_per_s\"");
    REQUIRE(at != std::string::npos);
    const auto comma = old_text.rfind(',', at);
    old_text.erase(comma, old_text.find_first_of(",}", at) - comma);
    CHECK(calibration_from_json_text(old_text, "old.json").device.indexed_elements_per_s == 0);
    // The GEMM alignment ratios survive the round trip, and files without them read as 1.
    const Calibration h100 = load_hardware("h100-sxm");
    CHECK(h100.gemm_curve(DType::bf16)->align2_ratio < h100.gemm_curve(DType::bf16)->align4_ratio);
    CHECK(h100.gemm_curve(DType::bf16)->align4_ratio < 1);
    const std::string unaligned_text = std::regex_replace(
        to_json_text(h100), std::regex(R"("align[24]_ratio": *[0-9.eE+-]+, *\n? *)"), std::string());
    REQUIRE(unaligned_text.find("align") == std::string::npos);
    const Calibration unaligned = calibration_from_json_text(unaligned_text, "unaligned.json");
    CHECK(unaligned.gemm_curve(DType::bf16)->align4_ratio == 1);
    CHECK(unaligned.gemm_curve(DType::bf16)->align2_ratio == 1);
    std::vector<std::string> names;
    for (const auto& p : list_presets()) names.push_back(p.name);
    CHECK(std::find(names.begin(), names.end(), "h100-sxm") != names.end());
    CHECK(std::find(names.begin(), names.end(), "a100-sxm") != names.end());
}

TEST_CASE("every preset's datasheet is complete, sourced, and is what the calibration prices") {
    std::vector<std::string> names;
    for (const auto& p : list_presets()) {
        INFO(p.name);
        names.push_back(p.name);
        const Datasheet& d = p.sheet;
        const Calibration c = load_hardware(p.name);
        CHECK(c.device.memory_bytes == d.memory_bytes);
        CHECK(c.device.mem_bw_gbps == d.mem_bw_gbps);
        CHECK(c.peak_tflops(DType::bf16) == d.bf16_tflops);
        CHECK(c.peak_tflops(DType::fp16) == d.bf16_tflops);  // the same tensor cores
        CHECK(c.peak_tflops(DType::fp32) == d.fp32_tflops);
        // Tensor-core peaks rise as precision falls, where the GPU has them.
        CHECK(d.tf32_tflops > d.fp32_tflops);
        CHECK(d.bf16_tflops > d.tf32_tflops);
        CHECK((d.fp8_tflops == 0 || d.fp8_tflops > d.bf16_tflops));
        CHECK(d.fp64_tflops > 0);
        CHECK(d.intra_node_busbw_gbps > 0);
        CHECK(d.network_gbps > 0);
        CHECK_FALSE(d.gpu_link.empty());
        CHECK_FALSE(d.network.empty());
        CHECK_THAT(d.sources, Catch::Matches(".*\\[[0-9]+\\].*"));  // numbered in docs/notes/hardware-presets.md
    }
    for (const char* wanted :
         {"h100-sxm", "h200-sxm", "b200", "a100-sxm", "a100-40gb", "a100-pcie", "h100-pcie", "l40s", "mi300x"})
        CHECK(std::find(names.begin(), names.end(), wanted) != names.end());
    // RCCL on MI300X's mesh: a group of k GPUs uses k-1 links each, so small
    // groups get less bus bandwidth; NVSwitch gives every group the same.
    const auto busbw = [](const Calibration& c, int group) {
        double any = 0;
        for (const auto& k : c.collectives)
            if (k.kind == CollectiveKind::allreduce && k.scope == LinkScope::intra_node) {
                if (k.group_size == group) return k.bus_bw_gbps;
                if (k.group_size == 0) any = k.bus_bw_gbps;
            }
        return any;
    };
    const Calibration mi300x = load_hardware("mi300x");
    CHECK(busbw(mi300x, 2) < busbw(mi300x, 4));
    CHECK(busbw(mi300x, 4) < busbw(mi300x, 8));
    const Calibration h100 = load_hardware("h100-sxm");
    CHECK(busbw(h100, 2) == busbw(h100, 8));
}

TEST_CASE("a measured calibration with collective points and GEMM points round-trips") {
    const Calibration c = measured_calibration();
    const std::string text = to_json_text(c);
    const Calibration back = calibration_from_json_text(text, "measured.json");
    CHECK(to_json_text(back) == text);

    CHECK(back.provenance.source == "measured");
    CHECK(back.provenance.world_size == 16);
    CHECK(back.provenance.notes == c.provenance.notes);
    CHECK(back.provenance.sampling == c.provenance.sampling);
    CHECK(back.device.memory_bytes == 85520809984);
    REQUIRE(back.gemm_points.size() == 3);
    CHECK(back.gemm_points[1].dtype == DType::bf16);
    CHECK(back.gemm_points[1].m == 128);
    CHECK(back.gemm_points[1].batch == 12);
    CHECK(back.gemm_points[1].time_us == 21.5);
    CHECK(back.gemm_points[2].dtype == DType::fp32);
    REQUIRE(back.collectives.size() == 3);
    CHECK(back.collectives[0].kind == CollectiveKind::allreduce);
    CHECK(back.collectives[0].group_size == 8);
    REQUIRE(back.collectives[0].points.size() == 3);
    CHECK(back.collectives[0].points[2].size_bytes == 268435456);
    CHECK(back.collectives[0].points[2].time_us == 1400.75);
    CHECK(back.collectives[1].kind == CollectiveKind::allgather);
    CHECK(back.collectives[1].scope == LinkScope::inter_node);
    REQUIRE(back.collectives[1].points.size() == 2);
    CHECK(back.collectives[1].points[0].size_bytes == 4096);
    CHECK(back.collectives[2].points.empty());
    CHECK(back.host.cpu_adam_params_per_s == 1.5e9);
    CHECK(back.overlap.comm_slowdown_under_compute == 1.0625);
    CHECK(back.overlap.compute_slowdown_under_host == 3.5);
    CHECK(back.overlap.host_slowdown_under_compute == 1.25);
}

TEST_CASE("a collective curve's dtype survives the round trip, and curves without one read as fp32") {
    Calibration c = measured_calibration();
    c.collectives[0].dtype = DType::fp16;
    const std::string text = to_json_text(c);
    CHECK(text.find("\"dtype\": \"fp16\"") != std::string::npos);
    const Calibration back = calibration_from_json_text(text, "measured.json");
    CHECK(back.collectives[0].dtype == DType::fp16);
    CHECK(back.collectives[1].dtype == DType::fp32);
    CHECK(to_json_text(back) == text);
    // A wrong dtype names the field.
    std::string bad = text;
    bad.replace(bad.find("\"dtype\": \"fp16\""), 15, "\"dtype\": \"fp8\"");
    CHECK_THROWS_WITH(calibration_from_json_text(bad, "bad.json"), Catch::Contains("dtype"));
}

TEST_CASE("GEMM layouts and layout ratios survive the round trip, and files without them read as NN at ratio 1") {
    Calibration c = measured_calibration();
    REQUIRE(!c.gemm_points.empty());
    const std::string plain = to_json_text(c);
    CHECK(plain.find("layout") == std::string::npos);  // NN and ratio 1 write nothing new
    CHECK(plain.find("nt_ratio") == std::string::npos);
    c.gemm_points[0].layout = GemmLayout::tn;
    c.gemm_curves[0].nt_ratio = 0.9;
    c.gemm_curves[0].tn_ratio = 1.1;
    const std::string text = to_json_text(c);
    const Calibration back = calibration_from_json_text(text, "layouts.json");
    CHECK(back.gemm_points[0].layout == GemmLayout::tn);
    CHECK(back.gemm_curves[0].nt_ratio == 0.9);
    CHECK(back.gemm_curves[0].tn_ratio == 1.1);
    CHECK(to_json_text(back) == text);
    const Calibration old = calibration_from_json_text(plain, "old.json");
    CHECK(old.gemm_points[0].layout == GemmLayout::nn);
    CHECK(old.gemm_curves[0].nt_ratio == 1);
    // A wrong layout names its field and the choices.
    std::string bad = text;
    bad.replace(bad.find("\"layout\": \"tn\""), 14, "\"layout\": \"tt\"");
    CHECK_THROWS_WITH(calibration_from_json_text(bad, "bad.json"),
                      Catch::Contains("bad.json") && Catch::Contains("/gemm_points/0/layout") &&
                          Catch::Contains("nn, nt or tn"));
}

namespace {

// A CPU calibration's optional figures: `c` written and read back must give
// the same text again; returns it, and in `older` the same file with `keys`
// of object `section` erased, as a calibration from before they were measured.
Calibration round_trip(Calibration c, const char* section, std::initializer_list<const char*> keys, Calibration& older,
                       nlohmann::json& older_json) {
    c.provenance.backend = "cpu-gloo-openblas";
    const std::string text = to_json_text(c);
    Calibration back = calibration_from_json_text(text, "cpu.json");
    CHECK(to_json_text(back) == text);
    older_json = nlohmann::json::parse(text);
    for (const char* key : keys) older_json[section].erase(key);
    older = calibration_from_json_text(older_json.dump(), "older.json");
    return back;
}

}  // namespace

TEST_CASE("a CPU calibration's one-rank memory figures survive the round trip, and files without them read as 0") {
    Calibration c = measured_calibration();
    c.host.first_touch_gbps = 1.5;
    c.host.mem_bw_one_rank_gbps = 23.25;
    c.host.first_touch_one_rank_gbps = 1.75;
    Calibration older;
    nlohmann::json j;
    const Calibration back = round_trip(c, "host", {"mem_bw_one_rank_gbps", "first_touch_one_rank_gbps"}, older, j);
    CHECK(back.host.mem_bw_one_rank_gbps == 23.25);
    CHECK(back.host.first_touch_one_rank_gbps == 1.75);
    CHECK(older.host.mem_bw_one_rank_gbps == 0);
    CHECK(older.host.first_touch_one_rank_gbps == 0);
    CHECK(older.host.first_touch_gbps == 1.5);
}

TEST_CASE("a gloo calibration's fp16 sum survives the round trip, files without it sum as c10, a wrong one is named") {
    Calibration c = measured_calibration();
    c.provenance.half_sum = "gloo::float16";
    Calibration older;
    nlohmann::json j;
    const Calibration back = round_trip(c, "provenance", {"half_sum"}, older, j);
    CHECK(back.provenance.half_sum == "gloo::float16");
    CHECK(profiler::half_sum_of(back) == dtsim::runtime::HalfSum::gloo);
    CHECK(older.provenance.half_sum.empty());
    CHECK(profiler::half_sum_of(older) == dtsim::runtime::HalfSum::c10);
    j["provenance"]["half_sum"] = "float16";
    CHECK_THROWS_WITH(calibration_from_json_text(j.dump(), "old.json"),
                      Catch::Contains("old.json") && Catch::Contains("half_sum") && Catch::Contains("gloo::float16"));
}

TEST_CASE(
    "a CPU calibration's in-place speedup survives the round trip, files without it read as 1, a wrong one is named") {
    Calibration c = measured_calibration();
    c.device.in_place_speedup = 1.4375;
    Calibration older;
    nlohmann::json j;
    const Calibration back = round_trip(c, "device", {"in_place_speedup"}, older, j);
    CHECK(back.device.in_place_speedup == 1.4375);
    CHECK(older.device.in_place_speedup == 1.0);
    j["device"]["in_place_speedup"] = 0;
    CHECK_THROWS_WITH(calibration_from_json_text(j.dump(), "speedup.json"),
                      Catch::Contains("speedup.json") && Catch::Contains("/device/in_place_speedup"));
}

TEST_CASE("the ranks' spread survives the round trip, files without it arrive together, half of it is an error") {
    Calibration c = measured_calibration();
    c.overlap.straggler = 1.0625;
    c.overlap.straggler_ranks = 2;
    Calibration older;
    nlohmann::json j;
    const Calibration back = round_trip(c, "overlap", {"straggler", "straggler_ranks"}, older, j);
    CHECK(back.overlap.straggler == 1.0625);
    CHECK(back.overlap.straggler_ranks == 2);
    CHECK(older.overlap.straggler == 1.0);
    CHECK(older.overlap.straggler_ranks == 0);
    CHECK(to_json_text(older).find("straggler") == std::string::npos);  // not written when not measured
    j["overlap"]["straggler"] = 1.1;                                    // without straggler_ranks
    CHECK_THROWS_WITH(calibration_from_json_text(j.dump(), "half.json"),
                      Catch::Contains("half.json") && Catch::Contains("/overlap/straggler_ranks"));
    j["overlap"]["straggler"] = 0.9;  // faster than the mean
    j["overlap"]["straggler_ranks"] = 2;
    CHECK_THROWS_WITH(calibration_from_json_text(j.dump(), "fast.json"),
                      Catch::Contains("fast.json") && Catch::Contains("/overlap/straggler"));
}

TEST_CASE("calibrations written before host interference was measured still load, at 1.0") {
    nlohmann::json j = nlohmann::json::parse(to_json_text(measured_calibration()));
    j["overlap"].erase("compute_slowdown_under_host");
    j["overlap"].erase("host_slowdown_under_compute");
    const Calibration back = calibration_from_json_text(j.dump(2), "old.json");
    CHECK(back.overlap.compute_slowdown_under_comm == 1.125);
    CHECK(back.overlap.compute_slowdown_under_host == 1.0);
    CHECK(back.overlap.host_slowdown_under_compute == 1.0);
    const ParseError e =
        parse_error_after([](nlohmann::json& k) { k["overlap"]["compute_slowdown_under_host"] = 0.5; });
    check_names(e, "bad.json", "/overlap/compute_slowdown_under_host");
}

TEST_CASE("write_calibration and read_calibration go through a real file") {
    TempDir dir;
    const std::string path = dir.file("cal.json");
    const Calibration c = measured_calibration();
    write_calibration(c, path);
    REQUIRE(fs::exists(path));
    CHECK_FALSE(fs::exists(path + ".tmp"));
    CHECK(read_text(path) == to_json_text(c));
    const Calibration back = read_calibration(path);
    CHECK(to_json_text(back) == to_json_text(c));

    // Writing again replaces the file.
    Calibration changed = c;
    changed.name = "renamed";
    write_calibration(changed, path);
    CHECK(read_calibration(path).name == "renamed");
}

TEST_CASE("an unsupported calibration version names the supported one") {
    ParseError e = parse_error_after([](nlohmann::json& j) { j["dtsim_calibration_version"] = 99; });
    check_names(e, "bad.json", "/dtsim_calibration_version");
    const std::string what = e.what();
    CHECK(what.find("99") != std::string::npos);
    CHECK(what.find(fmt::format("reads version {}", kCalibrationVersion)) != std::string::npos);

    ParseError missing = parse_error_after([](nlohmann::json& j) { j.erase("dtsim_calibration_version"); });
    check_names(missing, "bad.json", "/dtsim_calibration_version");
}

TEST_CASE("a calibration without a device is a parse error at /device") {
    ParseError e = parse_error_after([](nlohmann::json& j) { j.erase("device"); });
    check_names(e, "bad.json", "/device");
    CHECK(std::string(e.what()).find("missing") != std::string::npos);
}

TEST_CASE("a negative device memory is a parse error at /device/memory_bytes") {
    ParseError e = parse_error_after([](nlohmann::json& j) { j["device"]["memory_bytes"] = -1; });
    check_names(e, "bad.json", "/device/memory_bytes");
    CHECK(std::string(e.what()).find("expected an integer > 0") != std::string::npos);
}

TEST_CASE("an unknown collective kind lists the valid kinds") {
    ParseError e = parse_error_after([](nlohmann::json& j) { j["collectives"][1]["kind"] = "alltoall"; });
    check_names(e, "bad.json", "/collectives/1/kind");
    const std::string what = e.what();
    CHECK(what.find("alltoall") != std::string::npos);
    for (const char* kind : {"allreduce", "reduce_scatter", "allgather", "broadcast"}) {
        INFO(kind);
        CHECK(what.find(kind) != std::string::npos);
    }
}

TEST_CASE("collective points out of size order are a parse error at the offending point") {
    ParseError e = parse_error_after([](nlohmann::json& j) {
        auto& pts = j["collectives"][0]["points_size_bytes_time_us"];
        std::swap(pts[1], pts[2]);
    });
    check_names(e, "bad.json", "/collectives/0/points_size_bytes_time_us/2");
    CHECK(std::string(e.what()).find("sorted") != std::string::npos);

    // A repeated size is not increasing either.
    ParseError dup = parse_error_after([](nlohmann::json& j) {
        auto& pts = j["collectives"][0]["points_size_bytes_time_us"];
        pts[1][0] = pts[0][0];
    });
    check_names(dup, "bad.json", "/collectives/0/points_size_bytes_time_us/1");
}

TEST_CASE("an empty gemm_curves array is a parse error at /gemm_curves") {
    ParseError e = parse_error_after([](nlohmann::json& j) { j["gemm_curves"] = nlohmann::json::array(); });
    check_names(e, "bad.json", "/gemm_curves");
    CHECK(std::string(e.what()).find("at least one") != std::string::npos);
}

TEST_CASE("invalid JSON syntax is a parse error naming the file") {
    std::string text = to_json_text(measured_calibration());
    text.resize(text.size() / 2);  // truncated mid-document
    ParseError e = parse_error_of(text, "half.json");
    CHECK(e.file() == "half.json");
    CHECK(e.field().empty());
    const std::string what = e.what();
    CHECK(what.find("half.json") != std::string::npos);
    CHECK(what.find("not valid JSON") != std::string::npos);

    TempDir dir;
    const std::string path = dir.file("broken.json");
    std::ofstream(path) << "{\"dtsim_calibration_version\": 1,,}";
    try {
        read_calibration(path);
        FAIL("expected a ParseError");
    } catch (const ParseError& pe) {
        CHECK(pe.file() == path);
        CHECK(std::string(pe.what()).find(path) != std::string::npos);
    }
}

TEST_CASE("a missing calibration file is a parse error naming the file") {
    TempDir dir;
    const std::string path = dir.file("does-not-exist.json");
    try {
        read_calibration(path);
        FAIL("expected a ParseError");
    } catch (const ParseError& e) {
        CHECK(e.file() == path);
        const std::string what = e.what();
        CHECK(what.find(path) != std::string::npos);
        CHECK(what.find("cannot open") != std::string::npos);
    }
}

TEST_CASE("an unknown hardware name is a config error listing the presets") {
    try {
        load_hardware("h200-nvl");
        FAIL("expected a ConfigError");
    } catch (const ParseError& e) {
        FAIL("a preset name must not be read as a file: " << e.what());
    } catch (const ConfigError& e) {
        const std::string what = e.what();
        CHECK(what.find("h200-nvl") != std::string::npos);
        for (const auto& p : list_presets()) {
            INFO(p.name);
            CHECK(what.find(p.name) != std::string::npos);
        }
        CHECK(what.find("h100-sxm") != std::string::npos);
        CHECK(what.find("a100-sxm") != std::string::npos);
    }
}

TEST_CASE("a hardware name that looks like a path is read as a calibration file") {
    // Not a preset name: a missing file is reported as a file, not as an unknown preset.
    try {
        load_hardware("some/path.json");
        FAIL("expected a ParseError");
    } catch (const ParseError& e) {
        CHECK(e.file() == "some/path.json");
    }

    // A bare name ending in .json is a file too, even when it does not exist.
    try {
        load_hardware("no-such-calibration.json");
        FAIL("expected a ParseError");
    } catch (const ParseError& e) {
        CHECK(e.file() == "no-such-calibration.json");
    }

    TempDir dir;
    const std::string path = dir.file("path.json");
    write_calibration(measured_calibration(), path);
    const Calibration c = load_hardware(path);
    CHECK(c.name == "lab-cluster");
    CHECK(c.provenance.source == "measured");
    CHECK(to_json_text(c) == to_json_text(measured_calibration()));
}

TEST_CASE("the spread of repeated measurements survives the JSON round trip") {
    Calibration c = load_hardware("a100-sxm");
    c.gemm_points.push_back({DType::fp32, 256, 256, 256, 1, 12.5, 0.08});
    CollectiveCurve curve;
    curve.kind = CollectiveKind::allreduce;
    curve.group_size = 2;
    curve.bus_bw_gbps = 3;
    curve.points = {{1024, 1.0, 0.10}, {4096, 2.0, 0.25}};
    c.collectives.push_back(curve);
    const Calibration back = calibration_from_json_text(to_json_text(c), "spread.json");
    CHECK(back.gemm_points.back().spread == 0.08);
    CHECK(back.collectives.back().points[1].spread == 0.25);
    // A spread list of the wrong length names the field.
    std::string text = to_json_text(c);
    const auto at = text.find("\"points_spread\"");
    REQUIRE(at != std::string::npos);
    text.replace(text.find('[', at), text.find(']', at) - text.find('[', at) + 1, "[0.1]");
    CHECK_THROWS_WITH(calibration_from_json_text(text, "spread.json"), Catch::Contains("points_spread"));
}

TEST_CASE("a calibration's backend says whether its ranks ran on CPUs and its collectives over gloo") {
    const auto of = [](const std::string& backend) {
        calib::Provenance p;
        p.backend = backend;
        return std::pair{p.host_ranks(), p.gloo_collectives()};
    };
    CHECK(of("cpu-gloo-openblas") == std::pair{true, true});
    CHECK(of("cpu-gloo-openblas+nccl-tests") == std::pair{true, true});  // an imported table keeps both
    CHECK(of("cpu-mpi-openblas") == std::pair{true, false});
    CHECK(of("cpu-mpi-openblas+nccl-tests") == std::pair{true, false});
    CHECK(of("cuda-nccl-cublas") == std::pair{false, false});
    CHECK(of("preset") == std::pair{false, false});
    CHECK(of("") == std::pair{false, false});
}

TEST_CASE("the sampling policy is written out as a calibration's provenance records it") {
    profiler::RepeatPolicy p;
    p.warmup = 1;
    p.min_samples = 3;
    p.max_samples = 20;
    p.budget_s = 0.02;
    CHECK(profiler::describe(p) ==
          "each figure the mean of 3-20 samples taken over at least 0.02 s after 1 warm-up run "
          "(the overlap factors: ratios of medians)");
    p.warmup = 2;
    p.min_sample_us = 100e3;
    CHECK(profiler::describe(p) ==
          "each figure the mean of 3-20 samples taken over at least 0.02 s after 2 warm-up "
          "runs, each sample repeating the work for at least 100 ms (the overlap factors: ratios "
          "of medians)");
}
