// Helpers for the GUI tests: one QApplication on the offscreen platform, and
// small hand-made traces whose pixels and texts are known.
#pragma once

#include "dtsim/traces/trace_model.hpp"

#include <QApplication>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtsim::test {

// The process's QApplication, created on first use (offscreen unless the environment says otherwise).
inline QApplication& gui_app() {
    static int argc = 1;
    static char name[] = "dtsim_test_gui";
    static char* argv[] = {name, nullptr};
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    // Never destroyed: destroying it among the other statics at exit crashes
    // in Qt's own teardown once a window has been shown.
    static auto* app = new QApplication(argc, argv);
    return *app;
}

// A tiny trace model built by hand: strings interned locally.
class ModelBuilder {
public:
    ModelBuilder& rank(std::int32_t rank) {
        traces::RankInfo info;
        info.rank = rank;
        m_.ranks.push_back(info);
        return *this;
    }
    std::int32_t track(std::int32_t rank_index, const std::string& name) {
        traces::Track t;
        t.rank = rank_index;
        t.name = name;
        t.sort_index = static_cast<std::int32_t>(m_.tracks.size());
        m_.tracks.push_back(t);
        return static_cast<std::int32_t>(m_.tracks.size()) - 1;
    }
    std::int32_t span(std::int32_t track, const std::string& name, traces::SpanKind kind, std::int64_t start_ns,
                      std::int64_t dur_ns, const std::vector<std::pair<std::string, std::string>>& args = {}) {
        traces::Span s;
        s.track = track;
        s.name = id(name);
        s.category = id(kind == traces::SpanKind::compute ? "compute" : "collective");
        s.kind = kind;
        s.start_ns = start_ns;
        s.dur_ns = dur_ns;
        s.args_begin = static_cast<std::int32_t>(m_.args.size());
        for (const auto& [k, v] : args) {
            traces::Arg a;
            a.key = id(k);
            a.value = id(v);
            a.is_number = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
            m_.args.push_back(a);
        }
        s.args_end = static_cast<std::int32_t>(m_.args.size());
        m_.spans.push_back(s);
        return static_cast<std::int32_t>(m_.spans.size()) - 1;
    }
    void counter(std::int32_t rank, const std::string& name, std::int64_t time_ns, double value) {
        traces::Counter c;
        c.rank = rank;
        c.name = id(name);
        c.time_ns = time_ns;
        c.value = value;
        m_.counters.push_back(c);
    }
    std::shared_ptr<const traces::TraceModel> build() { return std::make_shared<const traces::TraceModel>(m_); }
    traces::TraceModel& model() { return m_; }

private:
    traces::StringId id(const std::string& s) {
        for (std::size_t i = 0; i < m_.strings.size(); ++i)
            if (m_.strings[i] == s) return static_cast<traces::StringId>(i);
        m_.strings.push_back(s);
        return static_cast<traces::StringId>(m_.strings.size()) - 1;
    }
    traces::TraceModel m_;
};

}  // namespace dtsim::test
