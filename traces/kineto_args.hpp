// Private to dtsim_traces: readers of Kineto's names and arg texts, shared by
// the analyses (trace_analysis.cpp) and the workload reader (trace_workload.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::traces::detail {

bool starts_with(std::string_view s, std::string_view prefix);
// Case-insensitive equality (ASCII), as Kineto's categories are compared.
bool iequals(std::string_view a, std::string_view b);

// N of "ProfilerStep#N"; nullopt for any other name.
std::optional<std::int64_t> profiler_step(std::string_view name);

// The first element of Kineto's "Input type" list: ["float"] -> float.
std::string first_input_type(std::string_view text);

// Kineto's "Input Dims", one entry per input: [[64, 8, 256], [], [768]] ->
// {{64, 8, 256}, {}, {768}}. Inputs that are not one tensor (scalars, lists)
// are empty; malformed text gives an empty result.
std::vector<std::vector<std::int64_t>> input_dims(std::string_view text);

}  // namespace dtsim::traces::detail
