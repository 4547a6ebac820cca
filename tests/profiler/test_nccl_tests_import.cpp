// nccl-tests import: the text table (plain, -C 1 with N/A checks, several runs
// per file) and the -J JSON read into collective runs; malformed rows and
// unknown collectives give ParseErrors that name the line and the fix.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/nccl_tests_import.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::profiler;
using calib::CollectiveKind;
using dtsim::test::read_text;
using dtsim::test::TempDir;

namespace {

std::string data_path(const std::string& name) {
    return std::string(DTSIM_SOURCE_DIR) + "/tests/data/nccl_tests/" + name;
}

void write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

// Replaces the first occurrence of `from` in `s`.
std::string replace(std::string s, const std::string& from, const std::string& to) {
    auto pos = s.find(from);
    REQUIRE(pos != std::string::npos);
    return s.replace(pos, from.size(), to);
}

// Message of the ParseError thrown by f (fails the test if none is thrown).
template <class F>
std::string parse_error(F&& f, std::string* field = nullptr) {
    try {
        f();
    } catch (const ParseError& e) {
        if (field) *field = e.field();
        return e.what();
    }
    FAIL("expected a ParseError");
    return {};
}

}  // namespace

TEST_CASE("nccl-tests text: all_reduce_perf over 8 ranks", "[nccl_tests]") {
    auto runs = read_nccl_tests(data_path("all_reduce_perf_8rank.txt"));
    REQUIRE(runs.size() == 1);
    const auto& r = runs[0];
    CHECK(r.kind == CollectiveKind::allreduce);
    CHECK(r.nranks == 8);
    CHECK(r.nccl_version == "2.28.9");
    REQUIRE(r.points.size() == 10);
    CHECK(r.points.front().size_bytes == 1024);
    CHECK(r.points.front().time_us == Approx(14.21));
    CHECK(r.points[5].size_bytes == 1048576);
    CHECK(r.points[5].time_us == Approx(36.18));
    CHECK(r.points.back().size_bytes == 268435456);
    CHECK(r.points.back().time_us == Approx(1047.30));  // out-of-place, not the in-place 1045.90
}

TEST_CASE("nccl-tests text: all_gather_perf -C 1 with N/A checks and NCCL log lines", "[nccl_tests]") {
    auto runs = read_nccl_tests(data_path("all_gather_perf_cputime.txt"));
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].kind == CollectiveKind::allgather);
    CHECK(runs[0].nranks == 8);  // one process, nGpus 8: eight Rank lines
    REQUIRE(runs[0].points.size() == 5);
    CHECK(runs[0].points[0].size_bytes == 8388608);
    CHECK(runs[0].points[0].time_us == Approx(42.37));
    CHECK(runs[0].points[4].size_bytes == 134217728);
    CHECK(runs[0].points[4].time_us == Approx(398.4));
}

TEST_CASE("nccl-tests text: several runs in one file", "[nccl_tests]") {
    auto runs = read_nccl_tests(data_path("two_runs.log"));
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].kind == CollectiveKind::reduce_scatter);
    CHECK(runs[1].kind == CollectiveKind::broadcast);
    for (const auto& r : runs) {
        CHECK(r.nranks == 4);
        REQUIRE(r.points.size() == 4);
        CHECK(r.points[0].size_bytes == 1048576);
        CHECK(r.points[3].size_bytes == 67108864);
    }
    CHECK(runs[0].points[2].time_us == Approx(112.7));
    CHECK(runs[1].points[3].time_us == Approx(288.6));
}

TEST_CASE("nccl-tests text: a new sweep inside one table starts a new run", "[nccl_tests]") {
    std::string text = read_text(data_path("all_reduce_perf_8rank.txt"));
    // -d all: the same sizes again for a second type, in the same table.
    std::string second =
        "        1024           512      half     sum      -1    13.90    0.07    0.13       0    "
        "13.80    0.07    0.13       0\n"
        "        4096          2048      half     sum      -1    14.10    0.29    0.51       0    "
        "14.00    0.29    0.51       0\n";
    text = replace(text, "# Out of bounds", second + "# Out of bounds");
    auto runs = parse_nccl_tests_text(text, "sweep.txt");
    REQUIRE(runs.size() == 2);
    CHECK(runs[0].points.size() == 10);
    REQUIRE(runs[1].points.size() == 2);
    CHECK(runs[1].points[0].time_us == Approx(13.90));
    CHECK(runs[1].kind == CollectiveKind::allreduce);
    CHECK(runs[0].type == "float");
    CHECK(runs[0].dtype == DType::fp32);
    CHECK(runs[1].type == "half");
    CHECK(runs[1].dtype == DType::fp16);
}

TEST_CASE("nccl-tests text: the type column names each run's dtype, and a type change starts a run", "[nccl_tests]") {
    std::string text = read_text(data_path("all_reduce_perf_8rank.txt"));
    // -d all with growing sizes across types: only the type tells the runs apart.
    std::string more =
        "   536870912     268435456  bfloat16     sum      -1  2010.00  267.09  467.41       0  2001.00  268.29  "
        "469.51       0\n"
        "  1073741824     268435456    int32     sum      -1  4100.00  261.89  458.30       0  4090.00  262.53  "
        "459.42       0\n";
    text = replace(text, "# Out of bounds", more + "# Out of bounds");
    auto runs = parse_nccl_tests_text(text, "types.txt");
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].points.size() == 10);
    CHECK(runs[1].type == "bfloat16");
    CHECK(runs[1].dtype == DType::bf16);
    REQUIRE(runs[1].points.size() == 1);
    CHECK(runs[1].points[0].time_us == Approx(2010.0));
    CHECK(runs[2].type == "int32");
    CHECK_FALSE(runs[2].dtype.has_value());  // read, but priced by no curve
}

TEST_CASE("nccl-tests: the in-place group is read when asked for", "[nccl_tests]") {
    auto text_runs = read_nccl_tests(data_path("all_reduce_perf_8rank.txt"), NcclTestsGroup::in_place);
    REQUIRE(text_runs.size() == 1);
    CHECK(text_runs[0].group == NcclTestsGroup::in_place);
    CHECK(text_runs[0].points.front().time_us == Approx(14.05));
    CHECK(text_runs[0].points.back().time_us == Approx(1045.90));
    // -C 1 names both groups' columns cputime.
    auto cpu = read_nccl_tests(data_path("all_gather_perf_cputime.txt"), NcclTestsGroup::in_place);
    CHECK(cpu[0].points[0].time_us == Approx(41.95));
    auto json_runs = read_nccl_tests(data_path("all_reduce_perf_8rank.json"), NcclTestsGroup::in_place);
    REQUIRE(json_runs.size() == 1);
    CHECK(json_runs[0].points[0].time_us == Approx(35.96));
    CHECK(json_runs[0].type == "float");
    CHECK(json_runs[0].group == NcclTestsGroup::in_place);
    CHECK(to_string(nccl_tests_group_from_string("in-place")) == "in-place");
    CHECK_THROWS_AS(nccl_tests_group_from_string("inplace"), ConfigError);

    // A table with one group has no in-place times to give.
    std::string one_group =
        "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 2\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong\n"
        "        1024           256     float     sum      -1    14.21    0.07    0.13       0\n";
    std::string field;
    std::string msg = parse_error([&] { parse_nccl_tests_text(one_group, "one.txt", NcclTestsGroup::in_place); },
                                  &field);
    CHECK(field == "line 3");
    CHECK_THAT(msg, Catch::Contains("one.txt") && Catch::Contains("no in-place group"));
    CHECK(parse_nccl_tests_text(one_group, "one.txt")[0].points[0].time_us == Approx(14.21));
}

TEST_CASE("nccl-tests JSON: each row's type splits the runs", "[nccl_tests]") {
    std::string text = R"({"version": 2, "args": ["./all_reduce_perf", "-d", "all"],
        "config": {"nthreads": 1, "ngpus": 2},
        "results": [
          {"size": 1024, "type": "float", "out_of_place": {"time": 10.0}, "in_place": {"time": 9.0}},
          {"size": 4096, "type": "float", "out_of_place": {"time": 12.0}, "in_place": {"time": 11.0}},
          {"size": 8192, "type": "half", "out_of_place": {"time": 13.0}, "in_place": {"time": 12.5}},
          {"size": 16384, "type": "int8", "out_of_place": {"time": 14.0}, "in_place": {"time": 13.5}}]})";
    auto runs = parse_nccl_tests_json(text, "dall.json");
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].dtype == DType::fp32);
    CHECK(runs[0].points.size() == 2);
    CHECK(runs[1].dtype == DType::fp16);
    CHECK(runs[1].points[0].time_us == Approx(13.0));
    CHECK_FALSE(runs[2].dtype.has_value());
    CHECK(parse_nccl_tests_json(text, "dall.json", NcclTestsGroup::in_place)[1].points[0].time_us == Approx(12.5));
    std::string field;
    parse_error([&] { parse_nccl_tests_json(replace(text, "\"half\"", "16"), "dall.json"); }, &field);
    CHECK(field == "/results/2/type");
}

TEST_CASE("nccl-tests JSON (-J): all_reduce_perf over 8 ranks", "[nccl_tests]") {
    auto runs = read_nccl_tests(data_path("all_reduce_perf_8rank.json"));
    REQUIRE(runs.size() == 1);
    const auto& r = runs[0];
    CHECK(r.kind == CollectiveKind::allreduce);
    CHECK(r.nranks == 8);
    CHECK(r.nccl_version == "2.28.9");
    REQUIRE(r.points.size() == 6);
    CHECK(r.points[0].size_bytes == 1048576);
    CHECK(r.points[0].time_us == Approx(36.18));
    CHECK(r.points[5].size_bytes == 1073741824);
    CHECK(r.points[5].time_us == Approx(4011.6));
}

TEST_CASE("nccl-tests JSON: cpu_time, nranks fallbacks and the kind from the file name", "[nccl_tests]") {
    std::string text = R"({"version": 2, "args": ["./run.sh"], "nccl_version": 21903,
        "config": {"nthreads": 1, "ngpus": 4},
        "results": [
          {"size": 1024, "count": 64, "type": "float", "redop": "none", "root": "    -1",
           "out_of_place": {"cpu_time": 20.5, "alg_bw": 0.05, "bus_bw": 0.04, "nwrong": null},
           "in_place": {"cpu_time": 20.1, "alg_bw": 0.05, "bus_bw": 0.04, "nwrong": null}},
          {"size": 2048, "count": 128, "type": "float", "redop": "none", "root": "    -1",
           "out_of_place": {"cpu_time": 21.0, "alg_bw": 0.1, "bus_bw": 0.07, "nwrong": null},
           "in_place": {"cpu_time": 20.9, "alg_bw": 0.1, "bus_bw": 0.07, "nwrong": null}}]})";
    auto runs = parse_nccl_tests_json(text, "/logs/allgather-4gpu.json");
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].kind == CollectiveKind::allgather);
    CHECK(runs[0].nranks == 4);
    CHECK(runs[0].nccl_version == "2.19.3");
    REQUIRE(runs[0].points.size() == 2);
    CHECK(runs[0].points[1].time_us == Approx(21.0));

    std::string field;
    auto msg = parse_error(
        [&] { parse_nccl_tests_json(replace(text, "\"cpu_time\": 21.0", "\"cpu_time\": \"x\""), "allgather.json"); },
        &field);
    CHECK(field == "/results/1/out_of_place/cpu_time");
    CHECK_THAT(msg, Catch::Contains("allgather.json"));
}

TEST_CASE("nccl-tests import: a malformed row names its line", "[nccl_tests]") {
    std::string text = read_text(data_path("all_reduce_perf_8rank.txt"));
    std::string field;
    // Line 21 is the 65536-byte row.
    auto msg = parse_error(
        [&] { parse_nccl_tests_text(replace(text, "    18.94    3.46", "    18.x4    3.46"), "ar.txt"); }, &field);
    CHECK(field == "line 21, column time");
    CHECK_THAT(msg, Catch::Contains("ar.txt") && Catch::Contains("line 21") && Catch::Contains("18.x4"));

    // A truncated row (the run died mid-line).
    msg = parse_error(
        [&] {
            parse_nccl_tests_text(replace(text, "    3.46    6.06       0    18.80    3.49    6.10       0", ""),
                                  "ar.txt");
        },
        &field);
    CHECK(field == "line 21");
    CHECK_THAT(msg, Catch::Contains("at least 9 columns"));
}

TEST_CASE("nccl-tests import: an unknown collective says how to fix it", "[nccl_tests]") {
    std::string text = read_text(data_path("all_reduce_perf_8rank.txt"));
    text = replace(text, "# Collective test starting: all_reduce_perf\n", "");
    text = replace(text, "# Collective test concluded: all_reduce_perf\n", "");
    auto msg = parse_error([&] { parse_nccl_tests_text(text, "results.txt"); });
    CHECK_THAT(msg, Catch::Contains("results.txt") && Catch::Contains("cannot tell which collective") &&
                        Catch::Contains("all_reduce_perf.txt"));

    // The same output is accepted once the file name says what it is.
    TempDir dir;
    write(dir.file("all_reduce_perf.txt"), text);
    auto runs = read_nccl_tests(dir.file("all_reduce_perf.txt"));
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].kind == CollectiveKind::allreduce);

    // Collectives dtsim does not model are named in the error.
    std::string a2a = replace(read_text(data_path("all_reduce_perf_8rank.txt")), "all_reduce_perf", "alltoall_perf");
    msg = parse_error([&] { parse_nccl_tests_text(a2a, "a2a.txt"); });
    CHECK_THAT(msg, Catch::Contains("alltoall") && Catch::Contains("does not model"));

    // JSON without a collective in args or the file name.
    std::string json =
        replace(read_text(data_path("all_reduce_perf_8rank.json")), "./build/all_reduce_perf", "./a.out");
    msg = parse_error([&] { parse_nccl_tests_json(json, "run1.json"); });
    CHECK_THAT(msg, Catch::Contains("run1.json") && Catch::Contains("all_reduce_perf.txt"));
}

TEST_CASE("nccl-tests import: files without a table or with broken JSON are rejected", "[nccl_tests]") {
    auto msg = parse_error([] { parse_nccl_tests_text("# nThread 1 nGpus 8\nhello\n", "empty.txt"); });
    CHECK_THAT(msg, Catch::Contains("no nccl-tests result table"));

    TempDir dir;
    write(dir.file("all_reduce_perf.json"), "{\"version\": 2, \"results\": [");
    msg = parse_error([&] { read_nccl_tests(dir.file("all_reduce_perf.json")); });
    CHECK_THAT(msg, Catch::Contains("not valid JSON"));

    msg = parse_error([&] { read_nccl_tests(dir.file("missing.txt")); });
    CHECK_THAT(msg, Catch::Contains("cannot open"));
}
