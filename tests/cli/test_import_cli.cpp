// `dtsim import` as a user runs it: the table on the hand-written Kineto
// traces against a golden file (tests/golden/import_kineto_gpu.txt; update
// with DTSIM_UPDATE_GOLDEN=1 and review the diff), the JSON's figures, help
// with an example, and a malformed file's one-line error and exit code.
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <cstdlib>
#include <fstream>
#include <string>

using dtsim::test::read_text;
using dtsim::test::TempDir;

namespace {

struct ImportRun {
    int exit_code = -1;
    std::string out, err;
};

// Runs `dtsim <args>` from the source directory, so that paths in the output are relative.
ImportRun run_import(const std::string& args, const TempDir& scratch) {
    const std::string cmd = "cd '" + std::string(DTSIM_SOURCE_DIR) + "' && '" + std::string(DTSIM_CLI_PATH) + "' " +
                            args + " >'" + scratch.file("out.txt") + "' 2>'" + scratch.file("err.txt") + "'";
    const int status = std::system(cmd.c_str());
    return ImportRun{.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                     .out = read_text(scratch.file("out.txt")),
                     .err = read_text(scratch.file("err.txt"))};
}

}  // namespace

TEST_CASE("dtsim import prints the steps, breakdown, kernels and collectives of a Kineto trace directory") {
    TempDir scratch;
    const ImportRun r = run_import("import tests/data/traces/kineto_gpu", scratch);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    const std::string golden = std::string(DTSIM_SOURCE_DIR) + "/tests/golden/import_kineto_gpu.txt";
    if (std::getenv("DTSIM_UPDATE_GOLDEN")) std::ofstream(golden, std::ios::binary) << r.out;
    CHECK(r.out == read_text(golden));
    // What a newcomer looks for, whatever the golden file says.
    CHECK_THAT(r.out, Catch::Contains("step (ms)") && Catch::Contains("idle (ms)") && Catch::Contains("busbw (GB/s)") &&
                          Catch::Contains("ampere_sgemm_128x64_tn") && Catch::Contains("host wait (ms)"));
}

TEST_CASE("dtsim import --format json carries the figures in ns and bytes") {
    TempDir scratch;
    const ImportRun r = run_import("import tests/data/traces/gloo_cpu/rank1.pt.trace.json "
                                   "tests/data/traces/gloo_cpu/rank0.pt.trace.json --format json --step 5 --top 2",
                                   scratch);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    REQUIRE(j["ranks"].size() == 2);
    CHECK(j["ranks"][0]["rank"] == 0);  // the files name their ranks: rank order, not argument order
    REQUIRE(j["steps"].size() == 2);
    CHECK(j["steps"][0]["step"] == 5);
    CHECK(j["steps"][0]["step_ns"] == 2'000'000);
    CHECK(j["steps"][0]["idle_ns"] == 690'000);
    CHECK(j["steps"][0]["basis"] == "cpu main thread");
    CHECK(j["top_ops"].size() == 4);  // two per rank
    REQUIRE(j["collectives"].size() == 4);
    CHECK(j["collectives"][0]["size_bytes"] == 1'048'576);
    CHECK(j["collectives"][0]["straggler_rank"] == 1);
}

TEST_CASE("dtsim import: help with an example, and a malformed trace is one line and exit code 2") {
    TempDir scratch;
    const ImportRun help = run_import("import --help", scratch);
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Contains("Examples:") && Catch::Contains("--step") && Catch::Contains("--top"));

    std::ofstream(scratch.file("bad.json")) << "{\"traceEvents\": [\n {\"ph\": \"X\", \"ts\": 1, \"dur\": 2}\n {}]}";
    const ImportRun bad = run_import("import '" + scratch.file("bad.json") + "'", scratch);
    CHECK(bad.exit_code == 2);
    CHECK(bad.out.empty());
    CHECK(bad.err == "dtsim: error: " + scratch.file("bad.json") +
                         ": field '/traceEvents/0': byte 51 (line 3): expected ',' or ']' after an event, found '{'\n");

    const ImportRun none = run_import("import", scratch);
    CHECK(none.exit_code != 0);
}
