// Chrome trace writer: the JSON of a real simulated step parses, follows the
// Trace Event Format (formats.md §1) and says what the schedule says.
#include "dtsim/common/error.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/chrome_trace.hpp"
#include "dtsim/traces/trace_reader.hpp"

#include <fmt/format.h>
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>

using namespace dtsim;
using dtsim::test::read_text;
using dtsim::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

sim::Config small_config() {
    sim::Config c;
    c.model = "gpt2";
    c.topology = {2, 4};
    c.micro_batch = 2;
    c.seq_len = 256;
    c.precision = sim::Precision::bf16_mixed;
    return c;
}

struct Simulated {
    sim::SimResult result;
    sim::Timeline timeline;
};

Simulated simulate_small() {
    const sim::Config config = small_config();
    const calib::Calibration hw = calib::load_hardware("a100-sxm");
    Simulated s{sim::simulate(config, hw), {}};
    s.timeline = sim::make_timeline(s.result, config, "a100-sxm");
    return s;
}

std::int64_t us_to_ns(double us) {
    return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

}  // namespace

TEST_CASE("a simulated step's trace is a Trace Event Format object whose X events match the schedule") {
    const Simulated s = simulate_small();
    const auto& plan = s.result.plan;
    const auto& schedule = s.result.schedule;
    REQUIRE_FALSE(plan.tasks.empty());

    const std::string text = traces::chrome_trace_json(s.timeline);
    json j;
    REQUIRE_NOTHROW(j = json::parse(text));
    REQUIRE(j.is_object());
    REQUIRE(j.contains("traceEvents"));
    REQUIRE(j["traceEvents"].is_array());
    REQUIRE(j.contains("displayTimeUnit"));
    CHECK(j["displayTimeUnit"].is_string());

    std::size_t x_events = 0;
    std::set<std::pair<int, int>> used_threads;
    std::set<std::size_t> tasks_seen;
    for (const auto& e : j["traceEvents"]) {
        REQUIRE(e.contains("ph"));
        if (e["ph"] != "X") continue;
        ++x_events;
        INFO(e.dump());
        REQUIRE(e.contains("name"));
        CHECK(e["name"].is_string());
        CHECK_FALSE(e["name"].get<std::string>().empty());
        REQUIRE(e.contains("cat"));
        CHECK(e["cat"].is_string());
        REQUIRE(e.contains("pid"));
        REQUIRE(e["pid"].is_number_integer());
        REQUIRE(e.contains("tid"));
        REQUIRE(e["tid"].is_number_integer());
        REQUIRE(e.contains("ts"));
        REQUIRE(e["ts"].is_number());
        REQUIRE(e.contains("dur"));
        REQUIRE(e["dur"].is_number());
        CHECK(e["dur"].get<double>() >= 0);
        REQUIRE(e.contains("args"));
        REQUIRE(e["args"].contains("task"));
        REQUIRE(e["args"]["task"].is_number_integer());
        used_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});

        // Microseconds with three decimals: ts * 1000 is the task's start in ns.
        const auto task = e["args"]["task"].get<std::size_t>();
        REQUIRE(task < plan.tasks.size());
        tasks_seen.insert(task);
        const auto& timing = schedule.timings[task];
        CHECK(us_to_ns(e["ts"].get<double>()) == timing.start_ns);
        CHECK(us_to_ns(e["dur"].get<double>()) == timing.end_ns - timing.start_ns);
        CHECK(e["cat"].get<std::string>() == sim::to_string(plan.tasks[task].kind));
    }
    CHECK(x_events == plan.tasks.size());
    CHECK(tasks_seen.size() == plan.tasks.size());
    // A DDP step on 2x4 GPUs runs on both streams, and the last task ends at the makespan.
    CHECK(used_threads.size() >= 2);
    std::int64_t last_end = 0;
    for (const auto& t : schedule.timings) last_end = std::max(last_end, t.end_ns);
    CHECK(last_end == schedule.makespan_ns);
    CHECK(schedule.makespan_ns > 0);
}

TEST_CASE("the trace names its process and every thread its events use") {
    const Simulated s = simulate_small();
    const json j = json::parse(traces::chrome_trace_json(s.timeline));

    std::map<int, std::string> process_names;
    std::map<std::pair<int, int>, std::string> thread_names;
    std::set<std::pair<int, int>> used_threads;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "M") {
            INFO(e.dump());
            REQUIRE(e["args"]["name"].is_string());
            const auto name = e["args"]["name"].get<std::string>();
            if (e["name"] == "process_name") process_names[e["pid"].get<int>()] = name;
            if (e["name"] == "thread_name") thread_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = name;
        } else if (e["ph"] == "X") {
            used_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
        }
    }
    REQUIRE(process_names.count(0) == 1);
    CHECK(process_names[0].find("rank 0") != std::string::npos);
    REQUIRE_FALSE(used_threads.empty());
    for (const auto& pt : used_threads) {
        INFO("pid " << pt.first << " tid " << pt.second);
        CHECK(thread_names.count(pt) == 1);
    }
    std::set<std::string> names;
    for (const auto& kv : thread_names) names.insert(kv.second);
    CHECK(names.count("compute") == 1);
    CHECK(names.count("nccl") == 1);
    // The X events on the "compute" thread are compute tasks, those on "nccl" collectives.
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] != "X") continue;
        const auto& thread = thread_names[{e["pid"].get<int>(), e["tid"].get<int>()}];
        if (thread == "compute") CHECK(e["cat"] == "compute");
        if (thread == "nccl") CHECK(e["cat"] == "collective");
    }
}

TEST_CASE("the device memory counter reaches the schedule's peak") {
    const Simulated s = simulate_small();
    const json j = json::parse(traces::chrome_trace_json(s.timeline));
    std::size_t counters = 0;
    std::int64_t max_bytes = -1;
    double prev_ts = -1;
    bool ts_sorted = true;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] != "C") continue;
        INFO(e.dump());
        REQUIRE(e["name"] == "device memory");
        REQUIRE(e["ts"].is_number());
        REQUIRE(e["args"]["bytes"].is_number_integer());
        ++counters;
        max_bytes = std::max(max_bytes, e["args"]["bytes"].get<std::int64_t>());
        ts_sorted = ts_sorted && e["ts"].get<double>() >= prev_ts;
        prev_ts = e["ts"].get<double>();
    }
    CHECK(counters > 0);
    CHECK(counters == s.result.schedule.memory.size());
    CHECK(ts_sorted);
    CHECK(s.result.schedule.peak_memory_bytes > 0);
    CHECK(max_bytes == s.result.schedule.peak_memory_bytes);
}

TEST_CASE("names with quotes, backslashes and control characters are escaped") {
    sim::Timeline tl;
    tl.title = "title \"quoted\"\nsecond line";
    tl.ranks = {"rank \"0\"\\"};
    tl.streams = {"comp\"ute", "line\nbreak\ttab"};
    sim::TimelineEvent e;
    e.stream = 1;
    e.name = "say \"hi\"\nnext line \\ and \x01 bell";
    e.category = "cat\"egory";
    e.start_ns = 1234567;
    e.dur_ns = 1001;
    e.args.push_back({"task", std::int64_t{0}});
    e.args.push_back({"layer \"k\"", std::string("h.0\n\"attn\"")});
    tl.events.push_back(e);
    tl.device_memory_bytes.push_back({0, 5, 42});

    json j;
    REQUIRE_NOTHROW(j = json::parse(traces::chrome_trace_json(tl)));
    CHECK(j["otherData"]["title"] == tl.title);
    const json* x = nullptr;
    std::set<std::string> thread_names;
    for (const auto& ev : j["traceEvents"]) {
        if (ev["ph"] == "X") x = &ev;
        if (ev["ph"] == "M" && ev["name"] == "process_name") CHECK(ev["args"]["name"] == tl.ranks[0]);
        if (ev["ph"] == "M" && ev["name"] == "thread_name") thread_names.insert(ev["args"]["name"].get<std::string>());
    }
    CHECK(thread_names == std::set<std::string>(tl.streams.begin(), tl.streams.end()));
    REQUIRE(x != nullptr);
    CHECK((*x)["name"] == e.name);
    CHECK((*x)["cat"] == e.category);
    CHECK((*x)["args"]["layer \"k\""] == "h.0\n\"attn\"");
    CHECK((*x)["args"]["task"] == 0);
    // Three decimals of microseconds, exactly.
    CHECK((*x)["ts"].get<double>() == Approx(1234.567).epsilon(1e-12));
    CHECK((*x)["dur"].get<double>() == Approx(1.001).epsilon(1e-12));
}

TEST_CASE("write_chrome_trace writes the same text to a file") {
    const Simulated s = simulate_small();
    TempDir dir;
    const fs::path path = dir.path() / "trace.json";
    traces::write_chrome_trace(s.timeline, path.string());
    REQUIRE(fs::exists(path));
    CHECK(read_text(path) == traces::chrome_trace_json(s.timeline));
    CHECK_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST_CASE("writing a trace into a missing directory is an error and leaves no file") {
    sim::Timeline tl;
    tl.ranks = {"rank 0"};
    tl.streams = {"compute"};
    TempDir dir;
    const fs::path missing_dir = dir.path() / "no-such-dir";
    const fs::path path = missing_dir / "trace.json";
    CHECK_THROWS_AS(traces::write_chrome_trace(tl, path.string()), dtsim::Error);
    CHECK_FALSE(fs::exists(path));
    CHECK_FALSE(fs::exists(path.string() + ".tmp"));
    CHECK_FALSE(fs::exists(missing_dir));
}

TEST_CASE("two runs give byte-identical traces") {
    const Simulated a = simulate_small();
    const Simulated b = simulate_small();
    const std::string ta = traces::chrome_trace_json(a.timeline);
    const std::string tb = traces::chrome_trace_json(b.timeline);
    CHECK(ta.size() > 1000);
    CHECK(ta == tb);
}

TEST_CASE("the Plan's dependencies are written as flow arrows that read back between the same spans") {
    const Simulated s = simulate_small();
    using Edge = std::pair<std::string, std::string>;  // (dependency, waiting task) by name
    std::multiset<Edge> want;
    for (std::size_t i = 0; i < s.timeline.events.size(); ++i) {
        const auto deps = s.result.plan.deps_of(s.result.plan.tasks[i]);
        REQUIRE(s.timeline.events[i].deps == std::vector<std::int32_t>(deps.begin(), deps.end()));
        for (const std::int32_t d : deps)
            want.insert({s.timeline.events[static_cast<std::size_t>(d)].name, s.timeline.events[i].name});
    }
    REQUIRE(want.size() > 10);
    const auto edges = [](const traces::TraceModel& m) {
        std::multiset<Edge> out;
        for (const auto& f : m.flows) {
            REQUIRE(f.from_span >= 0);
            REQUIRE(f.to_span >= 0);
            out.insert({std::string(m.str(m.spans[static_cast<std::size_t>(f.from_span)].name)),
                        std::string(m.str(m.spans[static_cast<std::size_t>(f.to_span)].name))});
        }
        return out;
    };
    TempDir dir;
    const std::string path = (dir.path() / "flows.json").string();
    traces::write_chrome_trace(s.timeline, path);
    const traces::TraceModel read = traces::read_trace(path);
    CHECK(read.stats.dropped_events == 0);
    CHECK(edges(read) == want);
    CHECK(edges(traces::from_timeline(s.timeline)) == want);
}

TEST_CASE("the device-memory peak's breakdown by category is written and reads back, summing to the peak") {
    const Simulated s = simulate_small();
    REQUIRE_FALSE(s.timeline.device_memory_peak.empty());
    std::int64_t total = 0;
    for (const auto& [category, bytes] : s.timeline.device_memory_peak) {
        CHECK(bytes > 0);
        CHECK(category != "host");
        total += bytes;
    }
    CHECK(total == s.result.metrics.peak_memory_bytes);
    TempDir dir;
    const std::string path = (dir.path() / "peak.json").string();
    traces::write_chrome_trace(s.timeline, path);
    const traces::TraceModel read = traces::read_trace(path);
    const traces::TraceModel direct = traces::from_timeline(s.timeline);
    // The same parts either way (the reader's order is by name).
    const auto parts = [](const traces::TraceModel& m) {
        std::map<std::string, double> out;
        for (const auto& p : m.device_memory_peak) {
            CHECK(p.rank == 0);
            out[p.category] = p.bytes;
        }
        return out;
    };
    std::map<std::string, double> want;
    for (const auto& [category, bytes] : s.timeline.device_memory_peak) want[category] = static_cast<double>(bytes);
    CHECK(parts(read) == want);
    CHECK(parts(direct) == want);
}
