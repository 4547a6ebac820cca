// The CPU backend's processes keep the memory they free for reuse, as a
// framework's caching allocator does. Open MPI allocates a temporary buffer in
// every large reduce-scatter and allreduce; with glibc's defaults a temporary
// of many MiB is a fresh mmap each call, page-faulted 4 KiB at a time (here
// a 32 MiB reduce-scatter took 37 ms so, 13 ms with reuse), and whether it is
// depends on what the process freed before. Calibration and executor set the
// same policy, so both time collectives alike. One arena for every thread:
// the executor calls MPI from its stream threads, and a thread's own arena
// (mmap'd heaps of at most 64 MiB) gave its collectives fresh pages again (a
// 32 MiB allreduce took 14 ms on a stream thread, 7.5 ms with one arena).
#pragma once

namespace dtsim::runtime {

// Every allocation from the one heap (no mmap, no per-thread arenas), never
// trimmed. Call before other threads start. Idempotent.
void reuse_freed_memory();

}  // namespace dtsim::runtime
