#include "dtsim/gui/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>

namespace dtsim::gui {
namespace {

using traces::Span;
using traces::TraceModel;

using MatchKey = std::tuple<std::int32_t, std::string, std::string>;  // rank, track name, span name

// Every span under its key, in start order within the key.
std::map<MatchKey, std::vector<std::int32_t>> spans_by_key(const TraceModel& m) {
    std::map<MatchKey, std::vector<std::int32_t>> out;
    for (std::size_t i = 0; i < m.spans.size(); ++i) {
        const Span& s = m.spans[i];
        const auto& track = m.tracks[static_cast<std::size_t>(s.track)];
        const auto rank_index = static_cast<std::size_t>(track.rank);
        const std::int32_t rank = rank_index < m.ranks.size() ? m.ranks[rank_index].rank : track.rank;
        out[{rank, track.name, std::string(m.str(s.name))}].push_back(static_cast<std::int32_t>(i));
    }
    for (auto& [key, spans] : out)
        std::stable_sort(spans.begin(), spans.end(), [&](std::int32_t a, std::int32_t b) {
            return m.spans[static_cast<std::size_t>(a)].start_ns < m.spans[static_cast<std::size_t>(b)].start_ns;
        });
    return out;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

}  // namespace

TraceMatcher::TraceMatcher(const TraceModel& predicted, const TraceModel& measured)
    : predicted_(&predicted), measured_(&measured) {
    // dtsim predicts one representative rank: every measured rank is matched against it.
    const auto p = spans_by_key(predicted);
    auto m = spans_by_key(measured);
    const bool representative = predicted.ranks.size() == 1;
    const std::int32_t predicted_rank = representative ? predicted.ranks[0].rank : 0;
    for (auto& [key, m_spans] : m) {
        const auto& [rank, track, name] = key;
        const auto it = p.find({representative ? predicted_rank : rank, track, name});
        if (it != p.end()) pairs_.emplace_back(it->second, std::move(m_spans));
    }
}

int TraceMatcher::measured_steps() const {
    std::map<std::size_t, std::size_t> ratios;  // whole ratio -> keys
    for (const auto& [p_spans, m_spans] : pairs_)
        if (!p_spans.empty()) ++ratios[m_spans.size() / p_spans.size()];
    std::size_t best = 1, keys = 0;
    for (const auto& [ratio, n] : ratios)
        if (ratio >= 1 && n > keys) {
            best = ratio;
            keys = n;
        }
    return static_cast<int>(best);
}

int measured_step_count(const TraceModel& predicted, const TraceModel& measured) {
    return TraceMatcher(predicted, measured).measured_steps();
}

Comparison compare_traces(const TraceModel& predicted, const TraceModel& measured, int measured_step) {
    return TraceMatcher(predicted, measured).compare(measured_step);
}

Comparison TraceMatcher::compare(int measured_step) const {
    const TraceModel& predicted = *predicted_;
    const TraceModel& measured = *measured_;
    Comparison c;
    std::vector<char> predicted_matched(predicted.spans.size(), 0);
    std::int32_t matched_measured = 0;
    for (const auto& [p_spans, m_spans] : pairs_) {
        const std::size_t offset = static_cast<std::size_t>(std::max(0, measured_step)) * p_spans.size();
        const std::size_t n = offset < m_spans.size() ? std::min(m_spans.size() - offset, p_spans.size()) : 0;
        for (std::size_t k = 0; k < n; ++k) {
            const Span& ps = predicted.spans[static_cast<std::size_t>(p_spans[k])];
            const Span& ms = measured.spans[static_cast<std::size_t>(m_spans[offset + k])];
            const double error = ps.dur_ns > 0 ? static_cast<double>(ms.dur_ns - ps.dur_ns) / static_cast<double>(ps.dur_ns)
                                               : (ms.dur_ns > 0 ? 1.0 : 0.0);
            c.matches.push_back({.predicted = p_spans[k], .measured = m_spans[offset + k], .error = error});
            predicted_matched[static_cast<std::size_t>(p_spans[k])] = 1;
        }
        matched_measured += static_cast<std::int32_t>(n);
    }
    c.unmatched_measured = static_cast<std::int32_t>(measured.spans.size()) - matched_measured;
    c.unmatched_predicted =
        static_cast<std::int32_t>(std::count(predicted_matched.begin(), predicted_matched.end(), char{0}));

    std::map<traces::SpanKind, std::vector<double>> errors;
    std::map<traces::SpanKind, KindError> kinds;
    for (const auto& match : c.matches) {
        const Span& ps = predicted.spans[static_cast<std::size_t>(match.predicted)];
        const Span& ms = measured.spans[static_cast<std::size_t>(match.measured)];
        KindError& k = kinds[ps.kind];
        k.kind = ps.kind;
        ++k.matched;
        k.predicted_ns += static_cast<double>(ps.dur_ns);
        k.measured_ns += static_cast<double>(ms.dur_ns);
        errors[ps.kind].push_back(std::fabs(match.error));
    }
    for (auto& [kind, k] : kinds) {
        k.total_error = k.predicted_ns > 0 ? (k.measured_ns - k.predicted_ns) / k.predicted_ns : 0;
        k.median_abs_error = median(errors[kind]);
        c.kinds.push_back(k);
    }
    return c;
}

}  // namespace dtsim::gui
