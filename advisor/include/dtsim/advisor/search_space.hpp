// A search space for `dtsim sweep` and `dtsim advise`: axes of values over a
// base Config, enumerated as a deterministic cartesian product.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/sim/config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtsim::advisor {

// One axis: a common field (strategy, micro_batch, grad_accum, seq_len,
// precision, activation_checkpointing), a strategy knob by its torch /
// DeepSpeed name (bucket_cap_mb, sharding_strategy, stage, ...), or an NCCL
// variable dtsim models (NCCL_ALGO, NCCL_SOCKET_NTHREADS, ...; the value
// "default" leaves it unset).
struct Axis {
    std::string name;
    std::vector<std::string> values;
};

struct SearchSpace {
    std::vector<Axis> axes;  // in the order given; the strategy axis always varies slowest
    // Samples per optimizer step over all ranks; when set, grad_accum is derived
    // as global / (micro_batch x world) for every configuration.
    std::optional<std::int64_t> global_batch;
};

// True for the common (non-knob) axes.
bool is_common_axis(std::string_view name);
// True for the NCCL variable axes (NCCL_*).
bool is_env_axis(std::string_view name);

// "key=v1,v2,..." -> Axis. Throws ConfigError naming the axis.
Axis parse_axis(std::string_view spec);

// Adds an axis; a second axis of the same name is a ConfigError.
void add_axis(SearchSpace& space, Axis axis);

// The space of repeated --axis options.
SearchSpace parse_axes(const std::vector<std::string>& specs);

// {"strategy": [...], "micro_batch": [...], "precision": [...],
//  "activation_checkpointing": [...], "global_batch": N, "knobs": {"bucket_cap_mb": [...]}}
// Throws ParseError naming the file and the field.
SearchSpace load_space(const std::string& path);
SearchSpace parse_space_json(const std::string& text, const std::string& file_name);

// One configuration of the space.
struct Candidate {
    std::size_t index = 0;  // position in the enumeration
    sim::Config config;
    std::string strategy;  // as written in the axis (a Lightning name stays one)
    // Each axis's value for this configuration, in the space's axis order;
    // empty where a knob axis does not apply to the strategy.
    std::vector<std::pair<std::string, std::string>> settings;
    std::string skip_reason;  // non-empty: not simulated (e.g. global batch not divisible)
    std::string label() const;
};

// The cartesian product over `base`: strategies slowest, then the axes in order
// (the last fastest). Knob axes apply only to strategies that declare the knob.
// Throws ConfigError for an empty space or contradictory axes.
std::vector<Candidate> enumerate(const SearchSpace& space, const sim::Config& base);

// The space `dtsim advise` searches by default for this base configuration.
// Across nodes of a socket network (calibration.nccl.socket), it also tries
// the NIC's socket defaults against the threads and sockets that fill it.
SearchSpace default_space(const sim::Config& base, std::optional<std::int64_t> global_batch,
                          const calib::Calibration& calibration);

}  // namespace dtsim::advisor
