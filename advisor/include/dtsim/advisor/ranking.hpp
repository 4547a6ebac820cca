// Ranking sweep results: the recommendation, the alternatives, the Pareto
// front of throughput against memory, and explanations in numbers.
#pragma once

#include "dtsim/advisor/sweep.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::advisor {

enum class Objective { throughput, memory };
Objective objective_from_string(std::string_view s);  // "throughput" | "memory"

// "10%" or "0.1" -> 0.1; must be in [0, 1). Throws ConfigError.
double parse_headroom(std::string_view s);

struct RankOptions {
    Objective objective = Objective::throughput;
    double memory_headroom = 0;  // peak must be <= (1 - headroom) x usable memory
};

// Fits, and within the headroom.
bool eligible(const SweepResult& r, double memory_headroom);

struct Ranking {
    std::vector<std::size_t> order;   // indices of eligible results, best first
    std::vector<std::size_t> pareto;  // the Pareto front (samples/s up, peak memory down), fastest first
};

// Deterministic: ties keep enumeration order.
Ranking rank(const std::vector<SweepResult>& results, const RankOptions& options);

// Why `best` over `alternative`, in numbers: "... is 18 % slower: 2.1 s of
// exposed communication vs 0.3 s; uses 12.3 GiB more memory".
std::string explain(const SweepResult& best, const SweepResult& alternative);

}  // namespace dtsim::advisor
