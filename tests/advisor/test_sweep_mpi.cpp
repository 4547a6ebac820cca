// The distributed sweep's pieces that need no mpirun: the mpirun detection and
// the wire format that carries each rank's share to rank 0 (the 2-rank run
// itself is tests/mpi/sweep_2ranks.sh).
#include "dtsim/advisor/mpi_sweep.hpp"
#include "dtsim/advisor/search_space.hpp"
#include "dtsim/advisor/sweep.hpp"
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

using namespace dtsim;
using namespace dtsim::advisor;

namespace {

std::vector<Candidate> candidates() {
    sim::Config base;
    base.model = "llama2-7b";  // ddp does not fit: an OOM result travels too
    base.topology = {2, 8};
    base.precision = sim::Precision::bf16_mixed;
    base.seq_len = 512;
    SearchSpace s;
    add_axis(s, {"strategy", {"ddp", "fsdp", "deepspeed"}});
    add_axis(s, {"micro_batch", {"1", "2", "4", "64"}});
    add_axis(s, {"bucket_cap_mb", {"10", "25"}});
    add_axis(s, {"stage", {"1", "3"}});
    s.global_batch = 64;
    return enumerate(s, base);
}

// Simulates round-robin shares as `ranks` ranks would and reassembles them
// through the wire format, as rank 0 does.
std::vector<SweepResult> split_and_gather(const std::vector<Candidate>& cs, const calib::Calibration& cal,
                                          std::size_t ranks) {
    std::vector<SweepResult> out(cs.size());
    for (std::size_t i = 0; i < cs.size(); ++i) out[i].candidate = cs[i];
    for (std::size_t r = 0; r < ranks; ++r) {
        std::vector<Candidate> share;
        for (std::size_t i = r; i < cs.size(); i += ranks) share.push_back(cs[i]);
        deserialize_results(serialize_results(run_sweep(share, cal)), out, r, ranks);
    }
    return out;
}

}  // namespace

TEST_CASE("a sweep split round-robin over ranks and gathered equals the single-process sweep") {
    const auto cs = candidates();
    const auto cal = calib::load_hardware("h100-sxm");
    const auto single = run_sweep(cs, cal);
    bool any_skipped = false, any_oom = false;
    for (const auto& r : single) {
        any_skipped |= !r.simulated;
        any_oom |= r.simulated && !r.fits;
    }
    CHECK(any_skipped);  // the global batch skips micro_batch 64: the 'why' travels too
    CHECK(any_oom);
    for (std::size_t ranks : {1u, 2u, 3u, 7u, 64u}) {
        INFO("ranks = " << ranks);
        const auto gathered = split_and_gather(cs, cal, ranks);
        CHECK(sweep_csv(gathered) == sweep_csv(single));
        CHECK(sweep_json(gathered) == sweep_json(single));
        for (std::size_t i = 0; i < cs.size(); ++i) {
            CHECK(gathered[i].compute_s == single[i].compute_s);
            CHECK(gathered[i].usable_memory_bytes == single[i].usable_memory_bytes);
        }
    }
}

TEST_CASE("a truncated or mismatched share is an error, not garbage") {
    const auto cs = candidates();
    const auto cal = calib::load_hardware("h100-sxm");
    const std::string bytes = serialize_results(run_sweep(cs, cal));
    std::vector<SweepResult> out(cs.size());
    CHECK_THROWS_AS(deserialize_results(bytes.substr(0, bytes.size() - 3), out, 0, 1), Error);
    CHECK_THROWS_AS(deserialize_results(bytes + "x", out, 0, 1), Error);
    std::vector<SweepResult> too_few(cs.size() - 1);
    CHECK_THROWS_AS(deserialize_results(bytes, too_few, 0, 1), Error);
}

TEST_CASE("only an mpirun launch of more than one rank distributes the sweep") {
    const char* saved = std::getenv("OMPI_COMM_WORLD_SIZE");
    const std::string old = saved ? saved : "";
    ::unsetenv("PMI_SIZE");
    ::unsetenv("PMIX_SIZE");
    ::unsetenv("OMPI_COMM_WORLD_SIZE");
    CHECK_FALSE(launched_by_mpirun());
    ::setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    CHECK_FALSE(launched_by_mpirun());
    ::setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    CHECK(launched_by_mpirun());
    if (saved)
        ::setenv("OMPI_COMM_WORLD_SIZE", old.c_str(), 1);
    else
        ::unsetenv("OMPI_COMM_WORLD_SIZE");
}
