// Timeline: what ran where and when, predicted (from a Schedule) or measured
// (by the executor). Traces are written from this, never from engine internals.
#pragma once

#include "dtsim/sim/simulate.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dtsim::sim {

struct TimelineArg {
    std::string key;
    std::variant<std::int64_t, std::string> value;
};

struct TimelineEvent {
    int rank = 0;
    int stream = 0;  // index into Timeline::streams
    std::string name;
    std::string category;  // compute, collective, copy, host, io
    std::int64_t start_ns = 0;
    std::int64_t dur_ns = 0;
    std::vector<TimelineArg> args;  // links the event to its task: task, layer, bucket, bytes
    // The events this one waits for (indices into Timeline::events): the
    // Plan's dependencies, written as Chrome flow arrows.
    std::vector<std::int32_t> deps;
};

struct CounterSample {
    int rank = 0;
    std::int64_t time_ns = 0;
    std::int64_t value = 0;
};

struct Timeline {
    std::string title;                 // e.g. "gpt2-xl ddp on 16x h100-sxm (predicted)"
    std::vector<std::string> ranks;    // process names, one per rank shown
    std::vector<std::string> streams;  // thread names, shared by every rank
    std::vector<TimelineEvent> events;
    std::vector<CounterSample> device_memory_bytes;
    std::vector<CounterSample> host_memory_bytes;  // empty without offload
    // Device memory by category at the peak (rank 0; categories holding none left out).
    std::vector<std::pair<std::string, std::int64_t>> device_memory_peak;
};

// The representative rank's predicted timeline.
Timeline make_timeline(const SimResult& result, const Config& config, const std::string& hardware);
// The same, titled with the calibration's name; each collective the
// calibration's NCCL model prices also carries NCCL's choice (arg "nccl":
// "Tree/LL128"), which the GUI shows on hover. Its collective stream is named
// after the library the calibration measured (name_collective_streams).
Timeline make_timeline(const SimResult& result, const Config& config, const calib::Calibration& calibration);

// A Plan calls DDP's and ZeRO's collective stream "nccl", whatever runs it.
// Renames that stream's tracks ("nccl", "nccl (lane 2)") after `library`
// ("gloo", "mpi"), so that a CPU run's timeline does not say NCCL.
void name_collective_streams(Timeline& timeline, std::string_view library);

}  // namespace dtsim::sim
