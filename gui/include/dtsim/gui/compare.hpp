// Predicted against measured, task by task: spans of two traces matched by
// rank, track name, span name and order of occurrence (the k-th
// "allreduce bucket 3" on rank 0's comm stream with the k-th), each match's
// duration error, and the error per SpanKind. A predicted trace of one
// (representative) rank is matched against every measured rank; a measured
// trace of several steps matches one of them: the step-th run of each key's
// occurrences (a predicted key seen c times is matched against measured
// occurrences step*c .. step*c+c-1). No Qt here.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace dtsim::gui {

struct SpanMatch {
    std::int32_t predicted = -1;  // span index in the predicted model
    std::int32_t measured = -1;   // span index in the measured model
    double error = 0;             // (measured - predicted) / predicted duration; 0 when both are empty
};

struct KindError {
    traces::SpanKind kind = traces::SpanKind::other;
    std::int32_t matched = 0;
    double predicted_ns = 0;  // summed durations of the matched spans
    double measured_ns = 0;
    double total_error = 0;       // (measured - predicted) / predicted of the sums
    double median_abs_error = 0;  // of the matches' errors
};

struct Comparison {
    std::vector<SpanMatch> matches;
    std::vector<KindError> kinds;  // kinds with at least one match, in SpanKind order
    std::int32_t unmatched_predicted = 0;
    std::int32_t unmatched_measured = 0;
};

// The two traces' spans keyed once (rank, track, name), so that each measured
// step is then compared without keying a large trace again. Both models must
// outlive it.
class TraceMatcher {
public:
    TraceMatcher(const traces::TraceModel& predicted, const traces::TraceModel& measured);
    int measured_steps() const;  // as measured_step_count
    Comparison compare(int measured_step) const;

private:
    const traces::TraceModel* predicted_;
    const traces::TraceModel* measured_;
    // Per key both traces have: its predicted and its measured spans, in start order.
    std::vector<std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>>> pairs_;
};

// One-off forms of TraceMatcher's two calls.
Comparison compare_traces(const traces::TraceModel& predicted, const traces::TraceModel& measured,
                          int measured_step = 0);

// How many steps of the predicted one the measured trace holds: the most
// common whole ratio of measured to predicted occurrences over the keys both
// have (at least 1).
int measured_step_count(const traces::TraceModel& predicted, const traces::TraceModel& measured);

}  // namespace dtsim::gui
