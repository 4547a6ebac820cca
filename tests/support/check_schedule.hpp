// Test support: the invariants of a measured step, for every backend.
#pragma once

#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/plan.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace dtsim::test {

// Every task ends after it starts, each task starts after its dependencies
// end, and a stream runs one task at a time in issue order, except that a
// collective stream may run up to `collective_lanes` at once (gloo's two
// worker threads: the executor issues DDP's bucket allreduces to them).
inline void check_schedule(const sim::Plan& plan, const std::vector<executor::TaskTiming>& t,
                           int collective_lanes = 1) {
    REQUIRE(t.size() == plan.tasks.size());
    std::vector<std::vector<std::int64_t>> ends(plan.streams.size());  // by stream: its tasks' ends so far
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const auto& task = plan.tasks[i];
        INFO("task " << i);
        CHECK(t[i].start_ns >= 0);
        CHECK(t[i].start_ns <= t[i].end_ns);
        auto& stream = ends[static_cast<std::size_t>(task.stream)];
        const int lanes = plan.streams[static_cast<std::size_t>(task.stream)].kind == sim::TaskKind::collective
                              ? collective_lanes
                              : 1;
        const auto still_running =
            std::count_if(stream.begin(), stream.end(), [&](std::int64_t end) { return end > t[i].start_ns; });
        CHECK(still_running < lanes);
        stream.push_back(t[i].end_ns);
        for (auto d : plan.deps_of(task)) CHECK(t[i].start_ns >= t[static_cast<std::size_t>(d)].end_ns);
    }
}

}  // namespace dtsim::test
