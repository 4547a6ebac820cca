// The CPU backend's work units, private to executor/: replayed ops on scratch
// buffers, MPI collectives on real buffers, copies, host loops and file I/O,
// and the MLP trainer behind train mode.
#pragma once

#include "dtsim/executor/execute.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::executor::cpu {

// Scratch buffers of one stream's thread, sized once for its largest task.
struct Scratch {
    std::vector<float> a, b, c;  // GEMM operands
    std::vector<float> mem;      // memory passes, copies, host loops
    std::vector<float> comm;     // collective payloads
    std::vector<float> comm_out;
    std::string file;  // I/O tasks' file
    std::int64_t file_bytes = 0;
};

// Sizes `s` for every task of `stream` (replay work only).
void size_scratch(Scratch& s, const sim::Plan& plan, const models::Workload& w, int stream, int world,
                  const std::string& file);
void release_scratch(Scratch& s);

// Replays one task's work. `comm`: the task's group communicator (collectives only).
void replay_task(const sim::Plan& plan, const models::Workload& w, const sim::Task& t, Scratch& s, MPI_Comm comm);

// Streams `bytes` through the scratch (half read, half written), chunk by chunk.
void memory_pass(std::int64_t bytes, std::vector<float>& mem);

// Train mode: a real MLP under DDP on this rank's shard of the global batch.
class MlpTrainer {
public:
    MlpTrainer(const models::Workload& w, const sim::Config& config, const ExecOptions& options, int rank, int world,
               std::size_t buckets);

    void forward(int micro_step, int layer);
    void backward(int micro_step, int layer);
    // Flattens the bucket's gradients, allreduces (SUM) them, divides by the
    // world size; copies them back into the gradients unless `keep`.
    void reduce_bucket(const sim::BucketInfo& bucket, MPI_Comm comm, bool keep);
    void copy_buckets_back(const std::vector<sim::BucketInfo>& buckets);
    void optimizer_step();
    // This rank's loss of the step (mean of its micro-steps), then reset.
    double take_loss();
    const std::vector<std::vector<float>>& parameters() const { return params_; }

private:
    MlpShape shape_;
    std::int64_t micro_batch_ = 0;
    int world_ = 1, rank_ = 0, accum_ = 1;
    bool adam_ = false;
    double lr_ = 0;
    std::int64_t adam_t_ = 0;
    Batch batch_;
    std::vector<std::vector<float>> params_, grads_, adam_m_, adam_v_;
    std::vector<std::vector<float>> acts_;  // acts_[l]: input of linear l; acts_[L]: prediction
    std::vector<float> grad_out_;           // gradient w.r.t. the current layer's output
    std::vector<float> grad_tmp_;
    std::vector<std::vector<float>> bucket_data_;  // reduced buckets awaiting copy_buckets_back
    double loss_ = 0;
};

}  // namespace dtsim::executor::cpu
