// The dtsim command as a user runs it: help, listings, errors and exit codes,
// the JSON output against a golden file, and the README examples.
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/nccl_model.hpp"
#include "support/temp_dir.hpp"

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using dtsim::test::read_text;
using Json = nlohmann::json;

namespace {

struct Run {
    int exit_code = -1;
    std::string out, err;
};

// One per test process, removed with its contents when the process exits
// (ctest runs each case as its own process).
fs::path scratch_dir() {
    static const dtsim::test::TempDir dir;
    return dir.path();
}

// Runs `dtsim <args>` in the scratch directory, capturing stdout and stderr.
// env: assignments put before the command, e.g. "DTSIM_HOST_MEMORY_BYTES=1000".
Run run_dtsim(const std::string& args, const std::string& env = "") {
    const fs::path dir = scratch_dir();
    const std::string cmd = "cd '" + dir.string() + "' && " + env + " '" + std::string(DTSIM_CLI_PATH) + "' " + args +
                            " >stdout.txt 2>stderr.txt";
    const int status = std::system(cmd.c_str());
    Run r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_text(dir / "stdout.txt");
    r.err = read_text(dir / "stderr.txt");
    return r;
}

const char* kGoldenArgs =
    "simulate --model gpt2 --hardware a100-sxm --nodes 2 --gpus-per-node 4 --micro-batch 4 --seq-len 512 "
    "--precision bf16-mixed --set bucket_cap_mb=10 --format json";

}  // namespace

TEST_CASE("no arguments prints help and exits 0") {
    Run r = run_dtsim("");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("simulate") && Catch::Contains("demo") && Catch::Contains("models"));
}

TEST_CASE("models lists the built-in models with their exact parameter counts") {
    Run r = run_dtsim("models");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("gpt2-xl") && Catch::Contains("1,557,611,200"));
    CHECK_THAT(r.out, Catch::Contains("llama2-70b") && Catch::Contains("68,976,648,192"));
    const Json models = Json::parse(run_dtsim("models --format json").out);
    REQUIRE(models.is_array());
    bool found = false;
    for (const auto& m : models)
        if (m["name"] == "gpt2-xl") found = m["parameters"].get<std::int64_t>() == 1'557'611'200;
    CHECK(found);
}

TEST_CASE("hardware lists the presets, labelled as presets") {
    Run r = run_dtsim("hardware");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("h100-sxm") && Catch::Contains("a100-sxm") && Catch::Contains("preset"));
    // The CUDA backend is linked in and reports this machine's devices (none here) without failing.
    CHECK_THAT(r.out, Catch::Contains("This machine: "));
    // The per-dtype table: every preset, its dense peaks and bandwidths.
    CHECK_THAT(r.out, Catch::Contains("dense TFLOPS") && Catch::Contains("bf16/fp16") && Catch::Contains("fp8"));
    for (const char* name : {"b200", "a100-40gb", "a100-pcie", "l40s", "h100-pcie", "mi300x"})
        CHECK_THAT(r.out, Catch::Contains(name));
    // One preset in full, with its sources; an unknown one names the valid ones.
    Run one = run_dtsim("hardware mi300x");
    REQUIRE(one.exit_code == 0);
    CHECK_THAT(one.out, Catch::Contains("RCCL") && Catch::Contains("sources") && Catch::Contains("1307"));
    // As JSON, for scripts: every preset's datasheet, or the one named.
    Run json = run_dtsim("hardware --format json");
    REQUIRE(json.exit_code == 0);
    const Json all = Json::parse(json.out);
    REQUIRE(all.is_array());
    CHECK(all.size() >= 9);
    const Json mi = Json::parse(run_dtsim("hardware mi300x --format json").out);
    CHECK(mi["collective_library"] == "RCCL");
    CHECK(mi["dense_tflops"]["bf16"].get<double>() > mi["dense_tflops"]["tf32"].get<double>());
    CHECK(mi["dense_tflops"]["fp4"].is_null());
    Run unknown = run_dtsim("hardware tpu-v5");
    CHECK(unknown.exit_code == 2);
    CHECK_THAT(unknown.err, Catch::Contains("tpu-v5") && Catch::Contains("mi300x"));
}

TEST_CASE("bad input: one clear line naming what is wrong, and a non-zero exit") {
    struct Case {
        const char* args;
        const char* says;
        int code;
    };
    const Case cases[] = {
        {"simulate --model gpt3", "gpt2-xl", 2},  // lists the valid models
        {"simulate --model gpt2 --strategy zero9", "ddp", 2},
        {"simulate --model gpt2 --hardware tpu-v5", "h100-sxm", 2},
        {"simulate --model gpt2 --set bucket_cap=5", "bucket_cap_mb", 2},
        {"simulate --model gpt2 --set bucket_cap_mb=-1", "bucket_cap_mb", 2},
        {"simulate --model gpt2 --set bucket_cap_mb", "key=value", 2},
        {"simulate --model gpt2 --gpus-per-node 0", "--gpus-per-node", 2},
        {"simulate --model gpt2 --micro-batch 0", "--micro-batch", 2},
        {"simulate --model gpt2 --precision fp8", "bf16-mixed", 2},
        // Lightning's "true" precisions: a clear refusal that says what to use instead.
        {"simulate --model gpt2 --precision 64-true", "fp64", 2},
        {"simulate --model gpt2-xl --micro-batch 512", "does not fit", 3},
        {"simulate --model gpt2 --hardware missing.json", "missing.json", 2},
    };
    for (const auto& c : cases) {
        INFO(c.args);
        Run r = run_dtsim(c.args);
        CHECK(r.exit_code == c.code);
        CHECK_THAT(r.err, Catch::StartsWith("dtsim: error: ") && Catch::Contains(c.says));
        CHECK(r.out.empty());
    }
}

TEST_CASE("a configuration that does not fit still prints its JSON report, with fits false") {
    Run r = run_dtsim("simulate --model gpt2-xl --micro-batch 512 --format json");
    CHECK(r.exit_code == 3);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["fits"] == false);
    CHECK(j["peak_memory_bytes"].get<std::int64_t>() > j["usable_memory_bytes"].get<std::int64_t>());
    // The advice fits the configuration: fp32 suggests bf16, DDP suggests bucket views.
    CHECK_THAT(r.err, Catch::Contains("does not fit") && Catch::Contains("--precision bf16-mixed") &&
                          Catch::Contains("gradient_as_bucket_view=true"));
    Run bf16 = run_dtsim("simulate --model gpt2-xl --micro-batch 512 --precision bf16-mixed");
    CHECK(bf16.exit_code == 3);
    CHECK_THAT(bf16.err, !Catch::Contains("--precision bf16-mixed"));
}

TEST_CASE("advise with nothing that fits suggests only what the user has not chosen") {
    // qwen2-7b's default sequence is its whole 131072-token context: the advice names it.
    Run r = run_dtsim("advise --model qwen2-7b --gpus-per-node 8 --precision bf16-mixed --global-batch 64");
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("fits on") && Catch::Contains("a shorter --seq-len") &&
                          Catch::Contains("131072 tokens") && !Catch::Contains("--precision bf16-mixed"));
    // The default space tried CPU offload already: it is not suggested again.
    CHECK_THAT(r.err, !Catch::Contains("offload"));
    Run fp32 = run_dtsim("advise --model llama3-70b --gpus-per-node 1 --seq-len 1024 --global-batch 8");
    CHECK(fp32.exit_code == 3);
    CHECK_THAT(fp32.err, Catch::Contains("--precision bf16-mixed") && !Catch::Contains("--seq-len"));
    // With the user's own axes, offload may not have been tried.
    Run axes =
        run_dtsim("advise --model llama3-70b --gpus-per-node 1 --seq-len 1024 --global-batch 8 --axis strategy=ddp");
    CHECK(axes.exit_code == 3);
    CHECK_THAT(axes.err, Catch::Contains("CPU offload (--axis strategy=fsdp_cpu_offload"));
}

TEST_CASE("Lightning's precision spellings with dtsim's meaning: 32-true and 16-mixed") {
    Run lightning = run_dtsim("simulate --model gpt2 --precision 16-mixed --format json");
    Run dtsim = run_dtsim("simulate --model gpt2 --precision fp16-mixed --format json");
    REQUIRE(lightning.exit_code == 0);
    CHECK(lightning.out == dtsim.out);
    Run full = run_dtsim("simulate --model gpt2 --precision 32-true --format json");
    CHECK(full.out == run_dtsim("simulate --model gpt2 --format json").out);
}

TEST_CASE("hardware overrides: --gpu-memory and --inter-node-gbps replace one field each and say so") {
    const std::string base = "simulate --model llama2-7b --precision bf16-mixed --strategy fsdp --nodes 2 --format json";
    Run plain = run_dtsim(base);
    Run small = run_dtsim(base + " --gpu-memory 40");
    Run slow = run_dtsim(base + " --inter-node-gbps 12.5");
    REQUIRE(plain.exit_code == 0);
    REQUIRE(small.exit_code == 0);
    REQUIRE(slow.exit_code == 0);
    const auto p = nlohmann::json::parse(plain.out), m = nlohmann::json::parse(small.out),
               n = nlohmann::json::parse(slow.out);
    CHECK(m["device_memory_bytes"].get<std::int64_t>() == 40LL * 1024 * 1024 * 1024);
    CHECK(p["device_memory_bytes"].get<std::int64_t>() > m["device_memory_bytes"].get<std::int64_t>());
    CHECK(m["peak_memory_bytes"] == p["peak_memory_bytes"]);  // memory is the device's, the prediction the same
    CHECK_THAT(m["hardware_source"].get<std::string>(), Catch::Contains("overridden: device memory 40 GiB"));
    // 12.5 GB/s per GPU (100 Gb/s Ethernet) instead of InfiniBand: the same bytes take longer.
    CHECK(n["comm_s"].get<double>() > 1.5 * p["comm_s"].get<double>());
    CHECK(n["comm_bytes_per_step"] == p["comm_bytes_per_step"]);
    CHECK_THAT(n["hardware_source"].get<std::string>(), Catch::Contains("inter-node bus bandwidth 12.5 GB/s"));
    for (const char* bad : {" --gpu-memory 0", " --inter-node-gbps -3"}) {
        Run r = run_dtsim(base + bad);
        CHECK(r.exit_code != 0);
        CHECK_THAT(r.err, Catch::Contains(std::string(bad).substr(1, std::string(bad).find(' ', 1) - 1)));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
}

// One fixed scenario per strategy (and per hook and offload path); every change
// of a prediction shows up here. Update with DTSIM_UPDATE_GOLDEN=1 and review the diff.
TEST_CASE("simulate --format json matches the golden files") {
    const std::string common =
        "--model gpt2 --hardware a100-sxm --nodes 2 --gpus-per-node 4 --micro-batch 4 "
        "--seq-len 512 --precision bf16-mixed --format json ";
    const std::pair<const char*, std::string> scenarios[] = {
        {"simulate_gpt2_ddp", kGoldenArgs},
        {"ddp_ckpt_accum", "simulate " + common + "--activation-checkpointing --grad-accum 2"},
        {"ddp_fp16_compress", "simulate " + common + "--set comm_hook=fp16_compress"},
        {"ddp_powersgd", "simulate " + common + "--set comm_hook=powerSGD --set matrix_approximation_rank=4"},
        {"ddp_post_local_sgd", "simulate " + common + "--set comm_hook=post_localSGD"},
        {"resnet50_syncbn",
         "simulate --model resnet50 --hardware a100-sxm --nodes 2 --gpus-per-node 4 "
         "--micro-batch 32 --precision bf16-mixed --sync-batchnorm --format json"},
        {"fsdp_full_shard", "simulate " + common + "--strategy fsdp"},
        {"fsdp_hybrid_offload",
         "simulate " + common + "--strategy fsdp --set sharding_strategy=HYBRID_SHARD --set cpu_offload=true"},
        {"fsdp_shard_grad_op", "simulate " + common + "--strategy fsdp --set sharding_strategy=SHARD_GRAD_OP"},
        {"zero1", "simulate " + common + "--strategy deepspeed_stage_1"},
        {"zero2_offload", "simulate " + common + "--strategy deepspeed_stage_2_offload"},
        {"zero3", "simulate " + common + "--strategy deepspeed --set stage=3"},
        {"zero3_offload_nvme", "simulate " + common + "--strategy deepspeed_stage_3_offload_nvme"},
    };
    for (const auto& [name, args] : scenarios) {
        INFO(name << ": dtsim " << args);
        Run r = run_dtsim(args);
        REQUIRE(r.exit_code == 0);
        const fs::path golden = fs::path(DTSIM_SOURCE_DIR) / "tests/golden" / (std::string(name) + ".json");
        if (std::getenv("DTSIM_UPDATE_GOLDEN")) std::ofstream(golden, std::ios::binary) << r.out;
        CHECK(r.out == read_text(golden));
    }
}

TEST_CASE("the JSON output has every documented field") {
    Run r = run_dtsim(kGoldenArgs);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    for (const char* key :
         {"step_time_s", "samples_per_s", "tokens_per_s", "mfu", "compute_s", "exposed_comm_s", "straggler_wait_s",
          "overlap_fraction", "peak_memory_bytes", "memory", "collectives", "buckets"})
        CHECK(j.contains(key));
    for (const char* key : {"parameters", "gradients", "optimizer_states", "activations", "buckets", "other"})
        CHECK(j["memory"].contains(key));
    std::int64_t sum = 0;
    for (const auto& [k, v] : j["memory"].items()) sum += v.get<std::int64_t>();
    CHECK(sum == j["peak_memory_bytes"].get<std::int64_t>());
    std::int64_t bucket_bytes = 0;
    for (const auto& b : j["buckets"]) bucket_bytes += b["bytes"].get<std::int64_t>();
    CHECK(bucket_bytes == j["parameters"].get<std::int64_t>() * 4);
    CHECK(j["tokens_per_s"].get<double>() == Approx(j["samples_per_s"].get<double>() * 512));
}

TEST_CASE("README: ./dtsim demo and the simulate example with its trace") {
    Run demo = run_dtsim("demo");
    REQUIRE(demo.exit_code == 0);
    CHECK_THAT(demo.out, Catch::Contains("Step time") && Catch::Contains("Peak memory"));

    fs::remove(scratch_dir() / "ddp.json");
    Run r = run_dtsim(
        "simulate --model gpt2-xl --hardware h100-sxm --nodes 2 --gpus-per-node 8 --strategy ddp --micro-batch 4 "
        "--seq-len 1024 --precision bf16-mixed --set bucket_cap_mb=25 --trace ddp.json");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("Trace written to ddp.json"));
    const auto trace = nlohmann::json::parse(read_text(scratch_dir() / "ddp.json"));
    CHECK(trace["traceEvents"].size() > 100);
}

TEST_CASE("simulate's summary has one Communication line: the collectives on several ranks, none on one") {
    // Several ranks on a preset (no straggler): once, with its time; the
    // "none" line is the one-rank case only.
    Run eight = run_dtsim("simulate --model gpt2 --hardware h100-sxm --gpus-per-node 8 --micro-batch 2");
    REQUIRE(eight.exit_code == 0);
    CHECK_THAT(eight.out, Catch::Contains("of which") && !Catch::Contains("none (one rank)"));
    CHECK(eight.out.find("Communication") == eight.out.rfind("Communication"));
    Run one = run_dtsim("simulate --model gpt2 --hardware h100-sxm --gpus-per-node 1 --micro-batch 2");
    REQUIRE(one.exit_code == 0);
    CHECK_THAT(one.out, Catch::Contains("Communication      none (one rank)") && !Catch::Contains("of which"));
}

TEST_CASE("README: the strategy examples run") {
    const std::string examples = (fs::path(DTSIM_SOURCE_DIR) / "examples").string();
    const std::string commands[] = {
        "simulate --model llama2-7b --nodes 2 --micro-batch 2 --precision bf16-mixed --strategy fsdp "
        "--set sharding_strategy=HYBRID_SHARD",
        "simulate --model llama2-7b --nodes 2 --micro-batch 2 --strategy " + examples + "/ds_zero3_offload.json",
        "simulate --model gpt2-xl --nodes 4 --micro-batch 4 --precision bf16-mixed --set comm_hook=powerSGD "
        "--set matrix_approximation_rank=4",
    };
    for (const auto& c : commands) {
        INFO(c);
        Run r = run_dtsim(c);
        CHECK(r.exit_code == 0);
        CHECK_THAT(r.out, Catch::Contains("Step time"));
    }
}

TEST_CASE("calibrate --import-nccl-log takes NCCL's graphs and checks NCCL's own tuning table against dtsim's") {
    const std::string fixture = read_text(fs::path(DTSIM_SOURCE_DIR) / "tests/data/nccl_log/h100_2nodes.log");
    // Rank 0's tuning table as tuning.cc prints it, with dtsim's own figures for this communicator, except
    // AllReduce Ring/Simple, whose bandwidth is written 25 % higher: the check must find that cell, -20 %.
    const dtsim::calib::Calibration preset = dtsim::calib::load_hardware("h100-sxm");
    const dtsim::calib::NcclTopology& h100 = preset.nccl;
    const std::string prefix = "hostA:41021:41107 [0] NCCL INFO ";
    const std::vector<std::vector<std::string>> blocks = {
        {"Tree", "Ring", "CollNetDirect"}, {"CollNetChain", "NVLS", "NVLSTree"}, {"PAT"}};
    using dtsim::calib::CollectiveKind;
    const CollectiveKind functions[] = {CollectiveKind::broadcast, CollectiveKind::reduce, CollectiveKind::allgather,
                                        CollectiveKind::reduce_scatter, CollectiveKind::allreduce};
    std::string table;
    for (const auto& block : blocks) {
        table += prefix + "  Algorithm   |";
        for (const auto& a : block) table += fmt::format(" {:>14}   {:>14}   {:>14} |", "", a, "");
        table += "\n" + prefix + "  Protocol    |";
        for (int i = 0; i < 3; ++i)
            for (const char* p : {"LL", "LL128", "Simple"}) table += fmt::format(" {:>14} |", p);
        table += "\n";
        for (const CollectiveKind kind : functions) {
            const std::string_view name = dtsim::sim::nccl_function_name(kind);
            table += prefix + fmt::format("{:>13} |", name);
            const auto cells = dtsim::sim::nccl_tuning_table(h100, kind, 16, 2, dtsim::DType::bf16, {});
            for (const auto& a : block)
                for (const char* p : {"LL", "LL128", "Simple"}) {
                    double latency = 0, bandwidth = 0;
                    for (const auto& c : cells)
                        if (dtsim::sim::to_string(c.algo) == a && dtsim::sim::to_string(c.proto) == p) {
                            latency = c.latency_us;
                            bandwidth = c.algbw_gbps;
                        }
                    if (name == "AllReduce" && a == "Ring" && std::string(p) == "Simple") bandwidth *= 1.25;
                    table += fmt::format("{:8.1f}/{:6.1f} |", latency, bandwidth);
                }
            table += "\n";
        }
    }
    const std::string marker = prefix + "NVLS Head";
    const auto at = fixture.find(marker);
    REQUIRE(at != std::string::npos);
    { std::ofstream(scratch_dir() / "nccl.log") << fixture.substr(0, at) + table + fixture.substr(at); }
    Run r = run_dtsim("calibrate --import-nccl-log nccl.log --base h100-sxm --out cluster.json --format json");
    REQUIRE(r.exit_code == 0);
    const Json j = Json::parse(r.out);
    REQUIRE(j["checks"].size() >= 1);
    const std::string check = j["checks"][0];
    CHECK_THAT(check, Catch::Contains("16 ranks on 2 nodes") &&
                          Catch::Contains("largest 20.0 % (AllReduce Ring/Simple bandwidth (GB/s)"));
    CHECK_THAT(j["notes"].get<std::string>(), Catch::Contains("NCCL graphs of 16 ranks on 2 nodes from nccl.log"));
    // The calibration prices with the log's graphs: a log whose ring has half the channels halves the ring's
    // bandwidth across nodes.
    std::string half = fixture;
    for (std::size_t p = half.find("Pattern 4, crossNic 0, nChannels 8"); p != std::string::npos;
         p = half.find("Pattern 4, crossNic 0, nChannels 8", p))
        half.replace(p, 34, "Pattern 4, crossNic 0, nChannels 4");
    { std::ofstream(scratch_dir() / "half.log") << half; }
    REQUIRE(run_dtsim("calibrate --import-nccl-log half.log --base h100-sxm --out half.json").exit_code == 0);
    const std::string ring = " --env NCCL_ALGO=ring --format json --model gpt2 --nodes 2 --precision bf16-mixed";
    const double full_s = Json::parse(run_dtsim("simulate --hardware cluster.json" + ring).out)["comm_s"];
    const double half_s = Json::parse(run_dtsim("simulate --hardware half.json" + ring).out)["comm_s"];
    CHECK(half_s > 1.5 * full_s);
    // A log without graphs, and a base without an NCCL model: one line each, exit 2, no file written.
    { std::ofstream(scratch_dir() / "plain.log") << "step 1 loss 2.31\n"; }
    Run plain = run_dtsim("calibrate --import-nccl-log plain.log --out plain.json");
    CHECK(plain.exit_code == 2);
    CHECK_THAT(plain.err, Catch::Contains("plain.log: no 'NCCL INFO' line"));
    CHECK(std::count(plain.err.begin(), plain.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(scratch_dir() / "plain.json"));
    Run cpu = run_dtsim("calibrate --import-nccl-log nccl.log --base mi300x --out cpu.json");
    CHECK(cpu.exit_code == 2);
    CHECK_THAT(cpu.err, Catch::Contains("--import-nccl-log nccl.log") && Catch::Contains("no NCCL model"));
}

TEST_CASE("calibrate --import-nccl-tests turns nccl-tests output into a calibration the simulator uses") {
    const std::string sample =
        (fs::path(DTSIM_SOURCE_DIR) / "tests/data/nccl_tests/all_reduce_perf_8rank.txt").string();
    Run imported = run_dtsim("calibrate --import-nccl-tests " + sample + " --base h100-sxm --out imported.json");
    REQUIRE(imported.exit_code == 0);
    const auto cal = nlohmann::json::parse(read_text(scratch_dir() / "imported.json"));
    bool found = false;
    for (const auto& c : cal["collectives"])
        found = found || (c["kind"] == "allreduce" && c["group_size"] == 8 && !c["points_size_bytes_time_us"].empty());
    CHECK(found);
    // The measured curve, not the preset's, now prices an 8-rank allreduce.
    Run preset = run_dtsim("simulate --model gpt2 --micro-batch 4 --format json");
    Run measured = run_dtsim("simulate --model gpt2 --micro-batch 4 --format json --hardware imported.json");
    REQUIRE(measured.exit_code == 0);
    CHECK(nlohmann::json::parse(measured.out)["comm_s"] != nlohmann::json::parse(preset.out)["comm_s"]);
    Run missing = run_dtsim("calibrate --import-nccl-tests no_such_file.txt --out x.json");
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Catch::Contains("no_such_file.txt"));
}

TEST_CASE("every command that prints a result takes --format json and prints one document") {
    const std::string sample =
        (fs::path(DTSIM_SOURCE_DIR) / "tests/data/nccl_tests/all_reduce_perf_8rank.txt").string();
    // calibrate: where the file went and what it holds, as the file itself says.
    Run written =
        run_dtsim("calibrate --import-nccl-tests " + sample + " --base h100-sxm --out fmt.json --format json");
    REQUIRE(written.exit_code == 0);
    const auto summary = nlohmann::json::parse(written.out);
    const auto file = nlohmann::json::parse(read_text(scratch_dir() / "fmt.json"));
    CHECK(summary["out"] == "fmt.json");
    CHECK(summary["name"] == file["name"]);
    CHECK(summary["collective_curves"] == file["collectives"].size());
    CHECK(summary["left_out"].empty());
    // The text view is unchanged.
    Run text = run_dtsim("calibrate --import-nccl-tests " + sample + " --base h100-sxm --out fmt2.json");
    CHECK_THAT(text.out, Catch::StartsWith("wrote fmt2.json ("));
    // A file written beside a JSON result is said on stderr, so that stdout stays one document.
    Run traced = run_dtsim("simulate --model gpt2 --trace t.json --format json");
    REQUIRE(traced.exit_code == 0);
    CHECK(nlohmann::json::parse(traced.out).contains("step_time_s"));
    CHECK_THAT(traced.err, Catch::Contains("Trace written to t.json"));
    for (const char* command : {"models", "hardware", "hardware a100-sxm", "demo", "import t.json",
                                "sweep --model gpt2 --axis micro_batch=1,2", "scale --model gpt2 --gpus 8,16",
                                "advise --model gpt2 --axis micro_batch=1,2"}) {
        INFO(command);
        Run r = run_dtsim(std::string(command) + " --format json");
        REQUIRE(r.exit_code == 0);
        CHECK_NOTHROW(nlohmann::json::parse(r.out));
    }
}

TEST_CASE("calibrate --import-nccl-tests gives a half table its own dtype and reads the chosen group") {
    std::string text = read_text(fs::path(DTSIM_SOURCE_DIR) / "tests/data/nccl_tests/all_reduce_perf_8rank.txt");
    for (auto at = text.find(" float "); at != std::string::npos; at = text.find(" float ", at))
        text.replace(at, 7, "  half ");
    std::ofstream(scratch_dir() / "ar_half.txt") << text;
    auto allreduce_x8 = [](const nlohmann::json& cal, const std::string& dtype) {
        for (const auto& c : cal["collectives"])
            if (c["kind"] == "allreduce" && c["group_size"] == 8 && c.value("dtype", "fp32") == dtype) return c;
        return nlohmann::json();
    };
    Run out_of_place = run_dtsim("calibrate --import-nccl-tests ar_half.txt --base h100-sxm --out half_oop.json");
    REQUIRE(out_of_place.exit_code == 0);
    CHECK_THAT(out_of_place.out, Catch::Contains("allreduce fp16 x8 out-of-place"));
    const auto oop = nlohmann::json::parse(read_text(scratch_dir() / "half_oop.json"));
    const auto half = allreduce_x8(oop, "fp16");
    REQUIRE_FALSE(half.is_null());
    CHECK(half["points_size_bytes_time_us"][0][1] == Approx(14.21));
    bool fp32_kept = false;  // the preset's fp32 allreduce curve (for any group size) stays
    for (const auto& c : oop["collectives"])
        fp32_kept = fp32_kept || (c["kind"] == "allreduce" && c.value("dtype", "fp32") == "fp32");
    CHECK(fp32_kept);
    CHECK_THAT(oop["provenance"]["backend"].get<std::string>(), Catch::EndsWith("+nccl-tests"));
    CHECK_THAT(oop["provenance"]["notes"].get<std::string>(), Catch::Contains("ar_half.txt"));

    Run in_place = run_dtsim(
        "calibrate --import-nccl-tests ar_half.txt --nccl-tests-group in-place --base h100-sxm --out half_ip.json");
    REQUIRE(in_place.exit_code == 0);
    const auto ip = allreduce_x8(nlohmann::json::parse(read_text(scratch_dir() / "half_ip.json")), "fp16");
    REQUIRE_FALSE(ip.is_null());
    CHECK(ip["points_size_bytes_time_us"][0][1] == Approx(14.05));

    // A table of a type dtsim does not price is named and refused, and writes nothing.
    for (auto at = text.find("  half "); at != std::string::npos; at = text.find("  half ", at))
        text.replace(at, 7, " int32 ");
    std::ofstream(scratch_dir() / "ar_int.txt") << text;
    Run ints = run_dtsim("calibrate --import-nccl-tests ar_int.txt --base h100-sxm --out ints.json");
    CHECK(ints.exit_code == 2);
    CHECK_THAT(ints.err, Catch::Contains("ar_int.txt") && Catch::Contains("int32"));
    CHECK_FALSE(fs::exists(scratch_dir() / "ints.json"));
    Run group = run_dtsim("calibrate --import-nccl-tests ar_half.txt --nccl-tests-group inplace --out g.json");
    CHECK(group.exit_code != 0);
    CHECK_THAT(group.err, Catch::Contains("--nccl-tests-group"));
}

TEST_CASE("calibrate --model measures the model's own GEMM shapes, MLPs included") {
    Run r = run_dtsim("calibrate --backend cpu --quick --model mlp-2x96 --micro-batch 24 --out mlp_cal.json");
    REQUIRE(r.exit_code == 0);
    const auto cal = nlohmann::json::parse(read_text(scratch_dir() / "mlp_cal.json"));
    bool forward = false;  // the layers' forward GEMM: 24 rows, 96 x 96 weights, as nn.Linear runs it (NT)
    bool weight_grad = false;
    for (const auto& p : cal["gemm_points"]) {
        forward = forward || (p["m"] == 24 && p["n"] == 96 && p["k"] == 96 && p.value("layout", "nn") == "nt");
        weight_grad = weight_grad || (p["m"] == 96 && p["n"] == 96 && p["k"] == 24 && p.value("layout", "nn") == "tn");
    }
    CHECK(forward);
    CHECK(weight_grad);
    // The layout probes give the curve its layout ratios.
    CHECK(cal["gemm_curves"][0].contains("nt_ratio"));
    CHECK(cal["gemm_curves"][0].contains("tn_ratio"));
}

TEST_CASE("calibrate --backend cuda without a GPU says so and how to proceed") {
    Run hw = run_dtsim("hardware");
    if (hw.out.find("This machine: no usable CUDA device") == std::string::npos &&
        hw.out.find("This machine: no CUDA device") == std::string::npos) {
        WARN("skipped: this machine has a CUDA device; the CUDA calibration runs for real there");
        return;
    }
    Run r = run_dtsim("calibrate --backend cuda --quick --out cuda.json");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("no CUDA device") && Catch::Contains("--backend cpu"));
    CHECK_FALSE(fs::exists(scratch_dir() / "cuda.json"));
}

TEST_CASE("calibrate and execute --torch-version: a bad version or a transport other than gloo is named at once") {
    Run bad = run_dtsim("calibrate --backend gloo --torch-version 2.x --quick --out v.json");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("--torch-version 2.x") && Catch::Contains("such as 2.7") &&
                            Catch::Contains("gloo::float16 before 2.8"));
    Run mpi = run_dtsim("calibrate --backend cpu --torch-version 2.7 --quick --out v.json");
    CHECK(mpi.exit_code == 2);
    CHECK_THAT(mpi.err, Catch::Contains("--torch-version 2.7") && Catch::Contains("only with --backend gloo"));
    CHECK_FALSE(fs::exists(scratch_dir() / "v.json"));
    Run exec = run_dtsim("execute --backend cpu --torch-version 2.7 --model mlp-2x64 --micro-batch 4 --steps 1");
    CHECK(exec.exit_code == 2);
    CHECK_THAT(exec.err, Catch::Contains("--torch-version 2.7") && Catch::Contains("only with --backend gloo"));
}

TEST_CASE("advise --format json: the pick, its alternatives and every configuration, as the text says") {
    const std::string args = "advise --model gpt2-xl --nodes 2 --precision bf16-mixed --global-batch 256";
    Run text = run_dtsim(args);
    Run json_run = run_dtsim(args + " --format json");
    REQUIRE(text.exit_code == 0);
    REQUIRE(json_run.exit_code == 0);
    const auto j = nlohmann::json::parse(json_run.out);
    const auto& rows = j.at("configurations");
    const auto picked = j.at("recommended").get<std::size_t>();
    REQUIRE(picked < rows.size());
    CHECK(rows[picked].at("fits").get<bool>());
    CHECK(rows[picked].at("config") == j.at("recommendation"));
    CHECK_THAT(text.out, Catch::Contains("Recommendation: " + j.at("recommendation").get<std::string>() + "\n"));
    CHECK(j.at("advise").at("configurations").get<std::size_t>() == rows.size());
    for (const auto& i : j.at("alternatives")) CHECK(i.get<std::size_t>() < rows.size());
    CHECK_FALSE(j.at("pareto").empty());
    // The file reads back as a sweep whose recommended row is the pick.
    std::optional<std::size_t> recommended;
    const auto read = dtsim::advisor::parse_sweep_json(json_run.out, "advise.json", nullptr, &recommended);
    CHECK(read.size() == rows.size());
    CHECK(recommended == picked);
    // --emit needs a file then: stdout is the JSON.
    Run emit = run_dtsim(args + " --format json --emit torch");
    CHECK(emit.exit_code != 0);
    CHECK_THAT(emit.err, Catch::Contains("--emit-out"));
}

TEST_CASE("README: advise recommends a configuration that fits, sweep writes CSV") {
    Run advise = run_dtsim("advise --model gpt2-xl --nodes 2 --precision bf16-mixed --global-batch 256");
    REQUIRE(advise.exit_code == 0);
    CHECK_THAT(advise.out, Catch::Contains("Recommendation:") && Catch::Contains("Pareto front") &&
                               Catch::Contains("Why the recommendation"));
    Run sweep = run_dtsim(
        "sweep --model gpt2 --nodes 1 --gpus-per-node 8 --axis strategy=ddp,fsdp --axis micro_batch=1,2 --format csv");
    REQUIRE(sweep.exit_code == 0);
    std::stringstream lines(sweep.out);
    std::string line;
    int rows = 0;
    while (std::getline(lines, line))
        if (!line.empty()) ++rows;
    CHECK(rows == 1 + 4);  // a header and one row per configuration
}

TEST_CASE("README: scale prints efficiency per GPU count and writes the SVG plot") {
    Run r = run_dtsim("scale --model gpt2 --strategy fsdp --micro-batch 4 --gpus 8,16,32 --plot scale.svg");
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("100.0%") && Catch::Contains("wrote scale.svg"));
    const std::string svg = read_text(scratch_dir() / "scale.svg");
    CHECK_THAT(svg, Catch::StartsWith("<svg") && Catch::Contains("<polyline"));
    Run bad = run_dtsim("scale --model gpt2 --gpus 8,12");
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("--gpus"));
}

TEST_CASE("a failing run leaves an existing trace file untouched") {
    const fs::path trace = scratch_dir() / "keep.json";
    std::ofstream(trace) << "previous trace";
    Run r = run_dtsim("simulate --model gpt2 --set nonsense=1 --trace keep.json");
    CHECK(r.exit_code == 2);
    CHECK(read_text(trace) == "previous trace");
    Run bad_dir = run_dtsim("simulate --model gpt2 --trace no/such/dir/t.json");
    CHECK(bad_dir.exit_code != 0);
    CHECK_THAT(bad_dir.err, Catch::Contains("no/such/dir/t.json"));
}

TEST_CASE("set help=1 lists the strategy knobs") {
    Run r = run_dtsim("simulate --model gpt2 --set help=1");
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("bucket_cap_mb") && Catch::Contains("gradient_as_bucket_view"));
}

TEST_CASE("numbers a simulation cannot mean are refused with the field and the bound") {
    struct Case {
        const char* args;
        const char* message;
    };
    const Case cases[] = {
        {"--set bucket_cap_mb=nan", "dtsim: error: --set bucket_cap_mb=nan: expected a finite number\n"},
        {"--set bucket_cap_mb=inf", "dtsim: error: --set bucket_cap_mb=inf: expected a finite number\n"},
        {"--set bucket_cap_mb=1e300",
         "dtsim: error: --set bucket_cap_mb=1e300: must be <= 1e+12 (larger sizes overflow the plan's 64-bit byte "
         "counts)\n"},
        {"--set bucket_cap_mb=1e999",
         "dtsim: error: --set bucket_cap_mb=1e999: expected a finite number (this one overflows a double)\n"},
        {"--seq-len 0", "dtsim: error: --seq-len must be >= 1 (got 0); omit it for the model's context length\n"},
        {"--nodes 100000000",
         "dtsim: error: --nodes must be <= 1048576 (more GPUs than any cluster built; got 100000000)\n"},
        {"--nodes 200000 --gpus-per-node 8",
         "dtsim: error: --nodes x --gpus-per-node must be <= 1048576 (more GPUs than any cluster built, the largest "
         "have about 100,000; got 200000 x 8 = 1600000)\n"},
        {"--gpus-per-node 1000",
         "dtsim: error: --gpus-per-node must be <= 576 (the largest NVLink domain, NVL576, has 576 GPUs; got 1000)\n"},
    };
    for (const auto& c : cases) {
        INFO(c.args);
        Run r = run_dtsim(std::string("simulate --model gpt2 ") + c.args);
        CHECK(r.exit_code == 2);
        CHECK(r.out.empty());
        CHECK(r.err == c.message);
    }
}

TEST_CASE("a sweep too large for this machine's memory is refused before it starts, with the estimate") {
    // 40 x 40 x 10 = 16,000 configurations: a few tens of MiB, refused on a
    // machine said to have 16 MiB (DTSIM_HOST_MEMORY_BYTES), and sized by the
    // measured bytes per configuration, not the count alone.
    auto values = [](int n) {
        std::string v;
        for (int i = 1; i <= n; ++i) {
            if (i > 1) v += ',';
            v += std::to_string(i);
        }
        return v;
    };
    const std::string space = " --axis micro_batch=" + values(40) + " --axis grad_accum=" + values(40) +
                              " --axis bucket_cap_mb=" + values(10);
    Run r = run_dtsim("sweep --model gpt2 --nodes 1 --gpus-per-node 8" + space, "DTSIM_HOST_MEMORY_BYTES=16777216");
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("dtsim: error: this search space has 16000 configurations (1 strategy x 40 "
                                        "micro_batch x 40 grad_accum x 10 bucket_cap_mb); holding them and their "
                                        "results needs about ") &&
                          Catch::Contains("MiB but this machine has 16.00 MiB (this allows 50% of it): narrow an axis"));
    // One axis narrowed to a single value fits the same machine and runs.
    Run small = run_dtsim("sweep --model gpt2 --nodes 1 --gpus-per-node 8 --axis micro_batch=1,2 --format csv",
                          "DTSIM_HOST_MEMORY_BYTES=16777216");
    CHECK(small.exit_code == 0);
    CHECK(small.err.find("error") == std::string::npos);
    // Past the fixed bound the count alone is refused, whatever the memory.
    Run huge = run_dtsim("sweep --model gpt2 --nodes 1 --gpus-per-node 8 --axis micro_batch=" + values(2000) +
                         " --axis grad_accum=" + values(1000));
    CHECK(huge.exit_code == 2);
    CHECK_THAT(huge.err, Catch::StartsWith("dtsim: error: the search space has more than 1000000 configurations"));
}

TEST_CASE("simulate says which algorithm NCCL picks, and --env steers it as NCCL_ALGO does") {
    const std::string args = "simulate --model gpt2 --nodes 512 --micro-batch 1 --precision bf16-mixed";
    Run text = run_dtsim(args);
    REQUIRE(text.exit_code == 0);
    // gpt2's buckets on 4096 H100s: the one holding the embedding (168 MiB) takes NVLSTree, the others the tree.
    CHECK_THAT(text.out, Catch::Contains("NCCL's choice    allreduce NVLSTree/Simple x 1, Tree/LL128 x "));
    const Json tree = Json::parse(run_dtsim(args + " --format json").out);
    const Json ring = Json::parse(run_dtsim(args + " --env NCCL_ALGO=ring --format json").out);
    REQUIRE(tree["collectives"].size() > 0);
    for (const auto& c : tree["collectives"]) {
        const auto algo = c["nccl"].get<std::string>();
        CHECK((algo.starts_with("Tree/") || algo.starts_with("NVLSTree/")));
    }
    for (const auto& c : ring["collectives"]) CHECK(c["nccl"].get<std::string>().starts_with("Ring/"));
    CHECK(ring["env"]["NCCL_ALGO"] == "ring");
    // The ring's latency grows with the 4096 ranks: the same bytes take far longer.
    CHECK(ring["comm_s"].get<double>() > 5 * tree["comm_s"].get<double>());
    CHECK(ring["comm_bytes_per_step"] == tree["comm_bytes_per_step"]);
    // A bad variable or value: one line naming --env and what was expected, exit 2.
    for (const char* bad :
         {"--env NCCL_ALGO=fastest", "--env NCCL_BUFFSIZE=1", "--env NCCL_ALGO", "--env NCCL_PROTO=allgatherv:ll"}) {
        INFO(bad);
        Run r = run_dtsim(args + " " + bad);
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("--env"));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    // CPU calibrations and presets without an NCCL model say nothing about NCCL.
    CHECK_THAT(run_dtsim("simulate --model gpt2 --hardware mi300x --nodes 2").out, !Catch::Contains("NCCL's choice"));
}

TEST_CASE("simulate --network prices NCCL over TCP sockets, says what the flows carry, and advise sets the threads") {
    const std::string args = "simulate --model gpt2 --nodes 4 --precision bf16-mixed --network ethernet:1x100";
    Run text = run_dtsim(args);
    REQUIRE(text.exit_code == 0);
    CHECK_THAT(text.out, Catch::Contains("1 x 100 Gb/s Ethernet NIC per node"));
    CHECK_THAT(text.out, Catch::Contains("1 TCP flow per channel carries 1.25 of the 6.25 GB/s") &&
                             Catch::Contains("--env NCCL_SOCKET_NTHREADS=2 --env NCCL_NSOCKS_PERTHREAD=4 fills it"));
    const Json one = Json::parse(run_dtsim(args + " --format json").out);
    const Json eight =
        Json::parse(run_dtsim(args + " --env NCCL_SOCKET_NTHREADS=2 --env NCCL_NSOCKS_PERTHREAD=4 --format json").out);
    CHECK(one["sockets"]["flows_per_channel"] == 1);
    CHECK(eight["sockets"]["flows_per_channel"] == 8);
    CHECK(eight["sockets"]["channel_gbps"].get<double>() == Approx(6.25));
    CHECK(one["comm_bytes_per_step"] == eight["comm_bytes_per_step"]);
    CHECK(one["comm_s"].get<double>() > 3 * eight["comm_s"].get<double>());
    // Inside one node no socket is used, and nothing is said about them.
    CHECK_THAT(run_dtsim("simulate --model gpt2 --network ethernet:1x100").out, !Catch::Contains("NCCL sockets"));
    // Two options for one network; a bad spec: one line naming --network.
    for (const char* bad : {" --network ethernet:1x100 --inter-node-gbps 12.5", " --network ethernet:1",
                            " --network ethernet:1x100 --hardware mi300x"}) {
        INFO(bad);
        Run r = run_dtsim("simulate --model gpt2 --nodes 4" + std::string(bad));
        CHECK(r.exit_code == 2);
        CHECK_THAT(r.err, Catch::Contains("--network"));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    Run advise = run_dtsim(
        "advise --model gpt2 --nodes 4 --precision bf16-mixed --seq-len 256 --global-batch 256 "
        "--network ethernet:1x100 --emit torch");
    REQUIRE(advise.exit_code == 0);
    CHECK_THAT(advise.out, Catch::Contains("NCCL environment: NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=4"));
    CHECK_THAT(advise.out, Catch::Contains("os.environ[\"NCCL_SOCKET_NTHREADS\"] = \"2\""));
}
