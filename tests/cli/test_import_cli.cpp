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

TEST_CASE("dtsim simulate --from-trace: a real torch profile predicted on two ranks, and its errors") {
    TempDir scratch;
    const std::string trace = "tests/data/torch/transformer_1rank/rank0.pt.trace.json.gz";
    const ImportRun one = run_import(
        "simulate --from-trace " + trace + " --gpus-per-node 1 --optimizer sgd --micro-batch 8 --format json", scratch);
    REQUIRE(one.exit_code == 0);
    const auto j1 = nlohmann::json::parse(one.out);
    const auto& from = j1.at("from_trace");
    CHECK(from.at("parameters").get<std::int64_t>() == 1'579'520);  // tests/data/torch/README.md
    CHECK(from.at("step").get<std::int64_t>() >= 2);
    CHECK(j1.at("model").get<std::string>() == "trace rank0.pt.trace.json.gz");
    // One rank replays the profile: at least its measured step.
    CHECK(j1.at("step_time_s").get<double>() >= from.at("measured_step_time_s").get<double>() * 0.999);

    // Two ranks add DDP's allreduces; the text names the profile and what was read.
    const ImportRun two = run_import("simulate --from-trace " + trace +
                                         " --gpus-per-node 2 --optimizer sgd "
                                         "--micro-batch 8 --set bucket_cap_mb=1",
                                     scratch);
    REQUIRE(two.exit_code == 0);
    CHECK_THAT(two.out, Catch::Contains("From the profile " + trace) && Catch::Contains("24 parameter tensors") &&
                            Catch::Contains("allreduce"));

    // The profiler's cost taken off: a shorter unprofiled step gives a shorter prediction.
    const ImportRun faster = run_import("simulate --from-trace " + trace +
                                            " --gpus-per-node 1 --optimizer sgd --micro-batch 8 --format json "
                                            "--unprofiled-step-ms 200",
                                        scratch);
    REQUIRE(faster.exit_code == 0);
    const auto jf = nlohmann::json::parse(faster.out);
    CHECK(jf.at("from_trace").at("profiler_us_per_op").get<double>() > 0);
    CHECK(jf.at("step_time_s").get<double>() < j1.at("step_time_s").get<double>() * 0.8);

    // --model and --from-trace exclude each other; neither is an error.
    const ImportRun both = run_import("simulate --model gpt2 --from-trace " + trace, scratch);
    CHECK(both.exit_code != 0);
    CHECK_THAT(both.err, Catch::Contains("--from-trace") && Catch::Contains("--model"));
    const ImportRun neither = run_import("simulate --gpus-per-node 2", scratch);
    CHECK(neither.exit_code == 2);
    CHECK_THAT(neither.err, Catch::Contains("--model NAME or --from-trace"));
    // A GPU trace (a directory of one rank): ops at their kernels' time, and it says so.
    const ImportRun gpu = run_import("simulate --from-trace tests/data/torch/h100_llama2_2blocks --precision "
                                     "bf16-mixed --micro-batch 2 --strategy fsdp",
                                     scratch);
    CHECK(gpu.exit_code == 0);
    CHECK_THAT(gpu.out, Catch::Contains("the whole trace") && Catch::Contains("a GPU trace") &&
                            Catch::Contains("666.91 M parameters") && Catch::Contains("| fsdp |"));
    const ImportRun missing = run_import("simulate --from-trace no/such/trace.json", scratch);
    CHECK(missing.exit_code != 0);
    CHECK_THAT(missing.err, Catch::Contains("no/such/trace.json"));
}
