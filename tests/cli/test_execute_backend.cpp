// dtsim execute --backend: cuda says clearly why it cannot run where no GPU is
// (or that this build lacks the toolkit), and an unknown backend is rejected.
// execute --allocator torch: gradients come back from the system every step.
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <cstdlib>
#include <string>

namespace {

struct Run {
    int exit_code = -1;
    std::string out, err;
};

Run run_dtsim_in(const dtsim::test::TempDir& dir, const std::string& args) {
    const std::string cmd = "cd '" + dir.path().string() + "' && '" + std::string(DTSIM_CLI_PATH) + "' " + args +
                            " >stdout.txt 2>stderr.txt";
    const int status = std::system(cmd.c_str());
    Run r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = dtsim::test::read_text(dir.path() / "stdout.txt");
    r.err = dtsim::test::read_text(dir.path() / "stderr.txt");
    return r;
}

}  // namespace

TEST_CASE("execute --backend cuda without a GPU fails with the reason and what to do") {
    dtsim::test::TempDir dir;
    const Run hw = run_dtsim_in(dir, "hardware");
    if (hw.out.find("no usable CUDA device") == std::string::npos &&
        hw.out.find("no CUDA device") == std::string::npos &&
        hw.out.find("built without the CUDA toolkit") == std::string::npos) {
        WARN("skipped: this machine has a CUDA device; execute --backend cuda runs for real there");
        return;
    }
    const Run r = run_dtsim_in(dir, "execute --backend cuda --model mlp-2x64 --micro-batch 4 --steps 2");
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("no CUDA device: ") || Catch::Contains("built without the CUDA toolkit"));
    CHECK_THAT(r.err, Catch::Contains("--backend cpu"));
}

TEST_CASE("execute --backend rejects an unknown backend and documents both") {
    dtsim::test::TempDir dir;
    const Run r = run_dtsim_in(dir, "execute --backend bogus --model mlp-2x64");
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("--backend") && Catch::Contains("bogus"));
    const Run help = run_dtsim_in(dir, "execute --help");
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Contains("--backend") && Catch::Contains("cuBLAS") && Catch::Contains("OpenBLAS"));
}

TEST_CASE("execute --allocator torch frees the gradients each step, and the step pays their pages' first touch") {
    dtsim::test::TempDir dir;
    // 64 MiB weight gradients: above glibc's largest mmap threshold (32 MiB), so
    // under its default malloc each is mapped fresh and unmapped at every free.
    const std::string run = "execute --model mlp-2x4096 --micro-batch 4 --optimizer sgd --steps 4 --mode train "
                            "--format json --allocator ";
    const Run torch = run_dtsim_in(dir, run + "torch");
    REQUIRE(torch.exit_code == 0);
    const Run kept = run_dtsim_in(dir, run + "dtsim");
    REQUIRE(kept.exit_code == 0);
    const auto t = nlohmann::json::parse(torch.out), k = nlohmann::json::parse(kept.out);
    const double gradient_pages = 2.0 * (4096.0 * 4096 + 4096) * 4 / 4096;
    CHECK(t["page_faults_per_step"].get<double>() > 0.9 * gradient_pages);
    CHECK(k["page_faults_per_step"].get<double>() < 0.1 * gradient_pages);
    // The same training either way: only where the memory comes from differs.
    CHECK(t["loss"] == k["loss"]);

    // FSDP's unsharded gradients too (the shards stay, as FSDP keeps them until zero_grad).
    const std::string fsdp = run + "torch --strategy fsdp --set sharding_strategy=FULL_SHARD";
    const Run sharded = run_dtsim_in(dir, fsdp);
    REQUIRE(sharded.exit_code == 0);
    const auto f = nlohmann::json::parse(sharded.out);
    CHECK(f["page_faults_per_step"].get<double>() > 0.9 * gradient_pages);
    const Run sharded_kept =
        run_dtsim_in(dir, run + "dtsim --strategy fsdp --set sharding_strategy=FULL_SHARD");
    REQUIRE(sharded_kept.exit_code == 0);
    CHECK(nlohmann::json::parse(sharded_kept.out)["page_faults_per_step"].get<double>() < 0.1 * gradient_pages);
    CHECK(f["loss"] == nlohmann::json::parse(sharded_kept.out)["loss"]);

    const Run replay = run_dtsim_in(dir, "execute --model mlp-2x64 --steps 2 --mode replay --allocator torch");
    CHECK(replay.exit_code == 2);
    CHECK_THAT(replay.err, Catch::Contains("--allocator torch") && Catch::Contains("train mode"));
    const Run help = run_dtsim_in(dir, "execute --help");
    CHECK_THAT(help.out, Catch::Contains("--allocator") && Catch::Contains("set_to_none"));
}
