// dtsim execute --backend: cuda says clearly why it cannot run where no GPU is
// (or that this build lacks the toolkit), and an unknown backend is rejected.
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

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
