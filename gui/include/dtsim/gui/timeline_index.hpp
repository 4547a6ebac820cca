// TimelineIndex: a TraceModel arranged for drawing. Spans are grouped into
// rows (one per rank, track and nesting depth), each sorted by start with
// non-decreasing ends, so the spans visible in a time window are found by
// binary search and spans narrower than a pixel are coalesced into blocks
// without visiting each one: a frame costs O(pixels x log spans) per row,
// not O(spans). No Qt here, so it is tested and benchmarked on its own.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtsim::gui {

// One drawn row: a track's spans at one nesting depth (Kineto CPU threads
// nest; dtsim streams do not). Within a row spans do not overlap.
struct Row {
    std::int32_t track = 0;
    std::int32_t depth = 0;
    std::vector<std::int32_t> spans;  // indices into TraceModel::spans, by start
};

// A track of one rank, drawn as one or more rows.
struct Lane {
    std::int32_t rank = 0;
    std::int32_t track = 0;
    std::string label;
    std::vector<std::int32_t> rows;  // indices into TimelineIndex::rows(), depth 0 first
};

struct RankGroup {
    std::int32_t rank = 0;
    std::string label;
    std::vector<std::int32_t> lanes;  // indices into TimelineIndex::lanes()
};

// One counter series ("device memory" of rank 0), sorted by time.
struct CounterSeries {
    std::int32_t rank = 0;
    std::string name;
    std::vector<std::int64_t> time_ns;
    std::vector<double> value;
    std::size_t peak = 0;  // index of the (first) largest value
};

// What one frame draws of a row: a span, or several sub-pixel spans merged.
struct Block {
    double x0_px = 0;
    double x1_px = 0;
    std::int32_t span = 0;   // the first span of the block
    std::int32_t count = 1;  // spans merged into it
};

class TimelineIndex {
public:
    explicit TimelineIndex(std::shared_ptr<const traces::TraceModel> model);

    const traces::TraceModel& model() const { return *model_; }
    const std::shared_ptr<const traces::TraceModel>& model_ptr() const { return model_; }
    const std::vector<RankGroup>& ranks() const { return ranks_; }
    const std::vector<Lane>& lanes() const { return lanes_; }
    const std::vector<Row>& rows() const { return rows_; }
    const std::vector<CounterSeries>& counters() const { return counters_; }
    std::int64_t begin_ns() const { return begin_ns_; }  // earliest span start or counter sample
    std::int64_t end_ns() const { return end_ns_; }      // latest span end

    // The blocks of `row` in the window that starts at t0_ns and spans
    // width_px pixels of ns_per_px each, in order, appended to `out`. A span
    // at least a pixel wide is its own block; runs of narrower spans closer
    // than a pixel apart merge into one.
    void visible_blocks(const Row& row, double t0_ns, double ns_per_px, int width_px, std::vector<Block>& out) const;
    // Same, for a subset of the row's spans (e.g. search matches), sorted by start.
    static void visible_blocks(const traces::TraceModel& model, const std::vector<std::int32_t>& spans, double t0_ns,
                               double ns_per_px, int width_px, std::vector<Block>& out);

    // The span of `row` under time t_ns, or the nearest within tolerance_ns; -1 if none.
    std::int32_t span_at(const Row& row, double t_ns, double tolerance_ns) const;

    // The row a span is drawn in.
    std::int32_t row_of(std::int32_t span) const { return row_of_span_[static_cast<std::size_t>(span)]; }

private:
    std::shared_ptr<const traces::TraceModel> model_;
    std::vector<RankGroup> ranks_;
    std::vector<Lane> lanes_;
    std::vector<Row> rows_;
    std::vector<CounterSeries> counters_;
    std::vector<std::int32_t> row_of_span_;
    std::int64_t begin_ns_ = 0;
    std::int64_t end_ns_ = 0;
};

}  // namespace dtsim::gui
