// Commands that run on every MPI rank (calibrate, execute, validate): an error
// on one rank must stop all of them, since the others may wait in a collective.
#pragma once

#include <fmt/format.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <new>

namespace dtsim::cli {

// Runs `body`; if it throws on one rank of several, prints the error with the
// rank and aborts the whole job (exit code 2) instead of leaving the others
// hanging. On one rank the exception propagates to main as usual.
template <class Body>
void on_all_ranks(Body&& body) {
    try {
        body();
    } catch (const std::exception& e) {
        const bool oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
        int initialized = 0, size = 1, rank = 0;
        MPI_Initialized(&initialized);
        if (initialized) {
            MPI_Comm_size(MPI_COMM_WORLD, &size);
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        }
        if (size > 1) {
            fmt::print(stderr, "dtsim: error on rank {}: {}\n", rank, oom ? "out of memory (std::bad_alloc)" : e.what());
            std::fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        throw;
    }
}

}  // namespace dtsim::cli
