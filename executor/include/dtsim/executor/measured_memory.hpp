// Peak memory of an executed step: the Plan's allocations and frees placed at
// the measured start and end of their tasks. Sizes come from the Plan (what
// the simulator accounts: parameters, gradients, optimizer states, saved
// activations, gathered shards, buckets); the order and the overlaps come from
// the run, so prefetching further or reducing later than predicted shows.
#pragma once

#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/plan.hpp"

#include <cstdint>
#include <vector>

namespace dtsim::executor {

// Device bytes live at once, at most, over the step whose per-task timings are
// `row` (one rank): the resident bytes plus each task's allocations from its
// start and its frees from its end (frees first at equal times, as the engine).
std::int64_t peak_memory_in_measured_order(const sim::Plan& plan, const std::vector<TaskTiming>& row);

// This process's peak resident set size (VmHWM) in bytes; 0 where unknown.
std::int64_t process_peak_rss_bytes();

}  // namespace dtsim::executor
