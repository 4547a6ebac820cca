// Test support: the invariants of a measured step, for every backend.
#pragma once

#include "dtsim/executor/execute.hpp"
#include "dtsim/sim/plan.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace dtsim::test {

// Every task ends after it starts, tasks of one stream never overlap and run
// in issue order, and each task starts after its dependencies end.
inline void check_schedule(const sim::Plan& plan, const std::vector<executor::TaskTiming>& t) {
    REQUIRE(t.size() == plan.tasks.size());
    std::vector<std::int64_t> stream_end(plan.streams.size(), 0);
    for (std::size_t i = 0; i < plan.tasks.size(); ++i) {
        const auto& task = plan.tasks[i];
        INFO("task " << i);
        CHECK(t[i].start_ns >= 0);
        CHECK(t[i].start_ns <= t[i].end_ns);
        auto& end = stream_end[static_cast<std::size_t>(task.stream)];
        CHECK(t[i].start_ns >= end);
        end = t[i].end_ns;
        for (auto d : plan.deps_of(task)) CHECK(t[i].start_ns >= t[static_cast<std::size_t>(d)].end_ns);
    }
}

}  // namespace dtsim::test
