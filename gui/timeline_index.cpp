#include "dtsim/gui/timeline_index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace dtsim::gui {
namespace {

using traces::Span;
using traces::TraceModel;

std::int64_t end_of(const Span& s) { return s.start_ns + s.dur_ns; }

const Span& span(const TraceModel& m, std::int32_t i) { return m.spans[static_cast<std::size_t>(i)]; }

// "rank 1 of 2  trace.json"; dtsim's own name ("rank 0 (representative of
// 16 ranks)") when its process is named so.
std::string rank_label(const traces::RankInfo& info, const std::string& process_name) {
    std::string label = process_name.starts_with("rank") ? process_name : fmt::format("rank {}", info.rank);
    if (info.world_size > 1) label += fmt::format(" of {}", info.world_size);
    if (!info.source_file.empty()) {
        const auto slash = info.source_file.find_last_of('/');
        label += "  " + (slash == std::string::npos ? info.source_file : info.source_file.substr(slash + 1));
    }
    return label;
}

// Splits one track's spans (sorted by start, longer first) into rows by
// nesting depth: a span goes one row below every span still open when it
// starts, so each row's spans are disjoint and their ends non-decreasing.
std::vector<std::vector<std::int32_t>> rows_by_depth(const TraceModel& m, const std::vector<std::int32_t>& spans) {
    std::vector<std::vector<std::int32_t>> rows;
    std::vector<std::int64_t> open_ends;  // a stack: the end of the open span at each depth
    for (std::int32_t i : spans) {
        const Span& s = span(m, i);
        while (!open_ends.empty() && open_ends.back() <= s.start_ns) open_ends.pop_back();
        const std::size_t depth = open_ends.size();
        if (rows.size() <= depth) rows.resize(depth + 1);
        rows[depth].push_back(i);
        open_ends.push_back(end_of(s));
    }
    return rows;
}

}  // namespace

TimelineIndex::TimelineIndex(std::shared_ptr<const TraceModel> model) : model_(std::move(model)) {
    const TraceModel& m = *model_;
    row_of_span_.assign(m.spans.size(), -1);

    // Spans of each track, sorted by start, the longer first (a parent before its children).
    std::vector<std::vector<std::int32_t>> by_track(m.tracks.size());
    for (std::size_t i = 0; i < m.spans.size(); ++i)
        by_track[static_cast<std::size_t>(m.spans[i].track)].push_back(static_cast<std::int32_t>(i));
    for (auto& spans : by_track)
        std::stable_sort(spans.begin(), spans.end(), [&](std::int32_t a, std::int32_t b) {
            const Span& sa = span(m, a);
            const Span& sb = span(m, b);
            return sa.start_ns != sb.start_ns ? sa.start_ns < sb.start_ns : sa.dur_ns > sb.dur_ns;
        });

    // Ranks in model order; within a rank, tracks by sort index then appearance.
    const std::size_t rank_count =
        std::max<std::size_t>(m.ranks.size(), m.tracks.empty() ? 0
                                                                : static_cast<std::size_t>(std::max_element(
                                                                      m.tracks.begin(), m.tracks.end(),
                                                                      [](const auto& a, const auto& b) {
                                                                          return a.rank < b.rank;
                                                                      })->rank) + 1);
    for (std::size_t r = 0; r < rank_count; ++r) {
        RankGroup group;
        group.rank = static_cast<std::int32_t>(r);
        std::vector<std::int32_t> tracks;
        for (std::size_t t = 0; t < m.tracks.size(); ++t)
            if (static_cast<std::size_t>(m.tracks[t].rank) == r) tracks.push_back(static_cast<std::int32_t>(t));
        const std::string process = tracks.empty() ? std::string() : m.tracks[static_cast<std::size_t>(tracks[0])].process_name;
        group.label = r < m.ranks.size() ? rank_label(m.ranks[r], process) : fmt::format("rank {}", r);
        std::stable_sort(tracks.begin(), tracks.end(), [&](std::int32_t a, std::int32_t b) {
            return m.tracks[static_cast<std::size_t>(a)].sort_index < m.tracks[static_cast<std::size_t>(b)].sort_index;
        });
        for (std::int32_t t : tracks) {
            Lane lane;
            lane.rank = group.rank;
            lane.track = t;
            lane.label = m.tracks[static_cast<std::size_t>(t)].name;
            auto depth_rows = rows_by_depth(m, by_track[static_cast<std::size_t>(t)]);
            if (depth_rows.empty()) depth_rows.emplace_back();  // an empty track still shows
            for (std::size_t d = 0; d < depth_rows.size(); ++d) {
                const auto row_index = static_cast<std::int32_t>(rows_.size());
                for (std::int32_t s : depth_rows[d]) row_of_span_[static_cast<std::size_t>(s)] = row_index;
                rows_.push_back({.track = t, .depth = static_cast<std::int32_t>(d), .spans = std::move(depth_rows[d])});
                lane.rows.push_back(row_index);
            }
            group.lanes.push_back(static_cast<std::int32_t>(lanes_.size()));
            lanes_.push_back(std::move(lane));
        }
        if (!group.lanes.empty()) ranks_.push_back(std::move(group));
    }

    // Counter series by (rank, name), in time order.
    std::map<std::pair<std::int32_t, traces::StringId>, std::size_t> series_of;
    for (const auto& c : m.counters) {
        auto [it, added] = series_of.try_emplace({c.rank, c.name}, counters_.size());
        if (added) counters_.push_back({.rank = c.rank, .name = std::string(m.str(c.name)), .time_ns = {}, .value = {}});
        CounterSeries& s = counters_[it->second];
        s.time_ns.push_back(c.time_ns);
        s.value.push_back(c.value);
    }
    for (auto& s : counters_) {
        std::vector<std::size_t> order(s.time_ns.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return s.time_ns[a] < s.time_ns[b]; });
        CounterSeries sorted{.rank = s.rank, .name = s.name, .time_ns = {}, .value = {}};
        for (auto i : order) {
            sorted.time_ns.push_back(s.time_ns[i]);
            sorted.value.push_back(s.value[i]);
        }
        sorted.peak = static_cast<std::size_t>(std::max_element(sorted.value.begin(), sorted.value.end()) -
                                               sorted.value.begin());
        s = std::move(sorted);
    }

    begin_ns_ = std::numeric_limits<std::int64_t>::max();
    end_ns_ = std::numeric_limits<std::int64_t>::min();
    for (const auto& s : m.spans) {
        begin_ns_ = std::min(begin_ns_, s.start_ns);
        end_ns_ = std::max(end_ns_, end_of(s));
    }
    for (const auto& c : counters_) {
        if (c.time_ns.empty()) continue;
        begin_ns_ = std::min(begin_ns_, c.time_ns.front());
        end_ns_ = std::max(end_ns_, c.time_ns.back());
    }
    if (begin_ns_ > end_ns_) begin_ns_ = end_ns_ = 0;
    if (end_ns_ == begin_ns_) end_ns_ = begin_ns_ + 1000;
}

void TimelineIndex::visible_blocks(const Row& row, double t0_ns, double ns_per_px, int width_px,
                                   std::vector<Block>& out) const {
    visible_blocks(*model_, row.spans, t0_ns, ns_per_px, width_px, out);
}

void TimelineIndex::visible_blocks(const TraceModel& m, const std::vector<std::int32_t>& spans, double t0_ns,
                                   double ns_per_px, int width_px, std::vector<Block>& out) {
    const auto px = [&](std::int64_t t) { return (static_cast<double>(t) - t0_ns) / ns_per_px; };
    const auto ns_at = [&](double x) { return t0_ns + x * ns_per_px; };
    const double t1_ns = ns_at(width_px);
    // The first span still running at t0 (ends are non-decreasing along a row).
    auto it = std::partition_point(spans.begin(), spans.end(),
                                   [&](std::int32_t i) { return static_cast<double>(end_of(span(m, i))) <= t0_ns; });
    const auto stop = spans.end();
    while (it != stop && static_cast<double>(span(m, *it).start_ns) < t1_ns) {
        const Span& first = span(m, *it);
        Block b{.x0_px = px(first.start_ns), .x1_px = px(end_of(first)), .span = *it, .count = 1};
        ++it;
        if (b.x1_px - b.x0_px < 1.0) {
            // A sub-pixel span: swallow every following span that ends within
            // the block's last pixel column, and keep going while the next
            // span is also narrow and starts less than a pixel away.
            for (;;) {
                const double column_end = std::floor(b.x1_px) + 1.0;
                const auto next = std::partition_point(it, stop, [&](std::int32_t i) {
                    return static_cast<double>(end_of(span(m, i))) <= ns_at(column_end);
                });
                if (next != it) {
                    b.count += static_cast<std::int32_t>(next - it);
                    b.x1_px = std::max(b.x1_px, px(end_of(span(m, *(next - 1)))));
                    it = next;
                }
                if (it == stop) break;
                const Span& s = span(m, *it);
                const double x0 = px(s.start_ns), x1 = px(end_of(s));
                if (x1 - x0 >= 1.0 || x0 >= b.x1_px + 1.0 || x0 >= width_px) break;
                b.x1_px = std::max(b.x1_px, x1);
                ++b.count;
                ++it;
            }
        }
        out.push_back(b);
    }
}

std::int32_t TimelineIndex::span_at(const Row& row, double t_ns, double tolerance_ns) const {
    const TraceModel& m = *model_;
    const auto& spans = row.spans;
    auto it = std::partition_point(spans.begin(), spans.end(), [&](std::int32_t i) {
        return static_cast<double>(end_of(span(m, i))) < t_ns - tolerance_ns;
    });
    std::int32_t best = -1;
    double best_distance = std::numeric_limits<double>::max();
    for (; it != spans.end() && static_cast<double>(span(m, *it).start_ns) <= t_ns + tolerance_ns; ++it) {
        const Span& s = span(m, *it);
        const double start = static_cast<double>(s.start_ns), end = static_cast<double>(end_of(s));
        const double distance = t_ns < start ? start - t_ns : (t_ns > end ? t_ns - end : 0.0);
        if (distance < best_distance) {
            best_distance = distance;
            best = *it;
        }
        if (distance == 0.0) break;
    }
    return best;
}

}  // namespace dtsim::gui
