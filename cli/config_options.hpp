// The options every configuration-taking command shares (simulate, demo,
// execute): model, hardware, topology, strategy and its knobs, precision.
#pragma once

#include "dtsim/profiler/calibration.hpp"
#include "dtsim/runtime/communicator.hpp"
#include "dtsim/sim/config.hpp"
#include "reporter.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtsim::cli {

struct SimulateOptions {
    std::string model;
    std::string hardware = "h100-sxm";
    // Single-field overrides of the hardware, without writing a calibration file.
    std::optional<double> gpu_memory_gib;
    std::optional<double> inter_node_gbps;
    std::string network;  // --network ethernet:1x100: NCCL over TCP sockets
    int nodes = 1;
    int gpus_per_node = 8;
    std::string strategy = "ddp";
    std::int64_t micro_batch = 1;
    std::optional<std::int64_t> seq_len;  // unset: the model's context length
    int grad_accum = 1;
    std::string precision = "fp32";
    std::string optimizer = "adam";
    std::string attention = "flash";
    bool activation_checkpointing = false;
    int ac_freq = 1;
    bool ac_op = false;
    bool sync_batchnorm = false;
    std::vector<std::string> set;
    std::vector<std::string> env;  // --env NCCL_ALGO=ring
    std::string trace;
    Reporter report;  // --format, for the commands that add it (simulate, demo, execute, validate)
};

// Adds the options to `cmd`. `with_topology` false for commands whose ranks
// come from mpirun (execute). --format is each command's own (Reporter).
void add_options(CLI::App& cmd, SimulateOptions& o, bool model_required, bool with_topology = true);

// "Knobs of strategy ..." for --set help=1; true when the options asked for it.
bool print_knob_help_if_asked(const SimulateOptions& o);

// The Config the options describe (Lightning names and DeepSpeed files
// resolved). `launch` receives Lightning's launch method, if any.
sim::Config make_config(const SimulateOptions& o, std::string* launch = nullptr);

// The --hardware preset or calibration file, with --gpu-memory and
// --inter-node-gbps or --network applied (each replaces one field; the provenance notes it).
calib::Calibration load_hardware(const SimulateOptions& o);

// --torch-version on calibrate and execute: adds the option to `cmd` (into
// `version`), and turns what was given into how gloo sums fp16. Empty: c10::Half
// (torch 2.8 and later); a ConfigError when given with a backend other than gloo
// or in a form that is not a version.
void add_torch_version_option(CLI::App& cmd, std::string& version);
runtime::HalfSum torch_version_half_sum(const std::string& version, const std::string& backend);

}  // namespace dtsim::cli
