// `dtsim sweep` across MPI ranks: under mpirun, each rank simulates the
// configurations whose index is congruent to its rank and rank 0 gathers them.
#pragma once

#include "dtsim/advisor/sweep.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::advisor {

// True when started by mpirun with more than one rank (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE or PMIX_SIZE > 1). MPI is not initialised here.
bool launched_by_mpirun();

struct DistributedSweep {
    int rank = 0;
    int size = 1;
    std::vector<SweepResult> results;  // on rank 0 every result, in index order; empty elsewhere
};

// Initialises MPI if needed, splits `candidates` round-robin by index over the
// ranks, simulates this rank's share (progress is called with the share) and
// gathers the results on rank 0. Every rank must pass the same candidates.
DistributedSweep run_sweep_mpi(const std::vector<Candidate>& candidates, const calib::Calibration& calibration,
                               const SweepProgress& progress = {});

// The compact wire format of a share: the outcome fields of each result (not
// its candidate, which every rank enumerates itself); doubles bit for bit.
std::string serialize_results(const std::vector<SweepResult>& results);
// Fills the outcome fields of `out[first], out[first + stride], ...` from `bytes`;
// throws Error on a malformed or short buffer.
void deserialize_results(const std::string& bytes, std::vector<SweepResult>& out, std::size_t first,
                         std::size_t stride);

}  // namespace dtsim::advisor
