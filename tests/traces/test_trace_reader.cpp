// The trace reader on hand-written traces (tests/data/traces/): both JSON
// forms, gzip, B/E, flows, metadata, counters, exact microsecond text; the
// round trip of a simulated step through its Chrome trace; and one clear
// error, with file, byte offset and line, for each kind of malformed input.
#include "dtsim/common/error.hpp"
#include "dtsim/common/format_bytes.hpp"
#include "dtsim/profiler/presets.hpp"
#include "dtsim/sim/simulate.hpp"
#include "dtsim/sim/timeline.hpp"
#include "dtsim/traces/chrome_trace.hpp"
#include "dtsim/traces/trace_reader.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

using namespace dtsim;
using namespace dtsim::traces;
using dtsim::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/tests/data/traces/" + name; }

void write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

void write_gzip(const std::string& path, const std::string& text) {
    gzFile g = gzopen(path.c_str(), "wb");
    REQUIRE(g != nullptr);
    gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
    gzclose(g);
}

const Track& track_named(const TraceModel& m, std::string_view name) {
    for (const Track& t : m.tracks)
        if (t.name == name) return t;
    FAIL("no track named " << name);
    return m.tracks.front();
}

std::vector<const Span*> spans_named(const TraceModel& m, std::string_view name) {
    std::vector<const Span*> out;
    for (const Span& s : m.spans)
        if (m.str(s.name) == name) out.push_back(&s);
    return out;
}

const Span& span_named(const TraceModel& m, std::string_view name) {
    const auto v = spans_named(m, name);
    REQUIRE(v.size() == 1);
    return *v[0];
}

// The error message reading `text` (written to a file) gives; "" if none.
std::string error_of(const std::string& text, const std::string& name = "bad.json") {
    TempDir dir;
    const std::string path = dir.file(name);
    write(path, text);
    try {
        read_trace(path);
    } catch (const ParseError& e) {
        const std::string what = e.what();
        CHECK(what.find('\n') == std::string::npos);  // one line
        CHECK(what.find(path) == 0);                  // names the file first
        return what.substr(path.size());
    }
    return "";
}

bool same_spans(const TraceModel& a, const TraceModel& b) {
    if (a.spans.size() != b.spans.size()) return false;
    for (std::size_t i = 0; i < a.spans.size(); ++i) {
        const Span& x = a.spans[i];
        const Span& y = b.spans[i];
        if (a.str(x.name) != b.str(y.name) || a.str(x.category) != b.str(y.category) || x.kind != y.kind ||
            x.start_ns != y.start_ns || x.dur_ns != y.dur_ns || x.track != y.track ||
            x.args_end - x.args_begin != y.args_end - y.args_begin)
            return false;
        for (std::int32_t k = 0; k < x.args_end - x.args_begin; ++k) {
            const Arg& p = a.args[static_cast<std::size_t>(x.args_begin + k)];
            const Arg& q = b.args[static_cast<std::size_t>(y.args_begin + k)];
            if (a.str(p.key) != b.str(q.key) || a.str(p.value) != b.str(q.value) || p.is_number != q.is_number)
                return false;
        }
    }
    return true;
}

}  // namespace

TEST_CASE("object form: metadata, exact microsecond text, instants, counters, skipped phases") {
    const TraceModel m = read_trace(data("object_form.json"));
    REQUIRE(m.ranks.size() == 1);
    CHECK(m.ranks[0].generator == "chrome");
    CHECK(m.ranks[0].source_file == data("object_form.json"));
    CHECK(m.stats.events == 11);
    CHECK(m.stats.unknown_phase_events == 1);  // the async "b"
    CHECK(m.stats.dropped_events == 1);        // the X without dur, as Perfetto drops it

    const Track& main = track_named(m, "main thread");
    CHECK(main.pid == "host A");
    CHECK(main.tid == "main");
    CHECK(main.sort_index == -3);
    CHECK(main.process_name == "trainer");

    // "1234.567" us is 1234567 ns exactly; "0.001" is 1 ns; 1e3 and 1.5E+1 are numbers too.
    const Span& load = span_named(m, "load");
    CHECK(load.start_ns == 1'234'567);
    CHECK(load.dur_ns == 1);
    CHECK(span_named(m, "step").dur_ns == 2'000'500);
    const Span& escaped = span_named(m, "esc\"aped \xc3\xa9\xf0\x9f\x98\x80");
    CHECK(escaped.start_ns == 1'000'000);
    CHECK(escaped.dur_ns == 15'000);
    // Sorted by track, start, longer first.
    CHECK(m.str(m.spans[0].name) == "step");
    CHECK(m.spans[1].name == escaped.name);
    CHECK(m.str(m.spans[2].name) == "load");

    REQUIRE(m.instants.size() == 1);
    CHECK(m.instants[0].time_ns == 1'500'250);
    CHECK(m.str(m.instants[0].name) == "tick");

    // A C event with several keys gives name.key series; one key, the name alone.
    std::map<std::string, double> counters;
    for (const Counter& c : m.counters) counters[std::string(m.str(c.name))] = c.value;
    CHECK(counters == std::map<std::string, double>{{"memory.free", 28.5}, {"memory.used", 100}, {"queue", 3}});

    // "file" is not an arg the analyses use: kept only on request.
    CHECK(m.arg(load, "file").empty());
    const TraceModel all = read_trace(data("object_form.json"), ReadOptions{.progress = {}, .keep_all_args = true});
    CHECK(all.arg(span_named(all, "load"), "file") == "a.bin");
}

TEST_CASE("gzip is read by its magic bytes, whatever the file is called") {
    const TraceModel plain = read_trace(data("object_form.json"));
    const TraceModel gz = read_trace(data("object_form.json.gz"));
    CHECK(same_spans(plain, gz));
    CHECK(gz.counters.size() == plain.counters.size());

    TempDir dir;
    fs::copy_file(data("object_form.json.gz"), dir.file("renamed.json"));
    CHECK(same_spans(plain, read_trace(dir.file("renamed.json"))));
}

TEST_CASE("traces whose model would not fit in this machine's memory are refused before reading, with the estimate") {
    // The machine is said to have 100 bytes (DTSIM_HOST_MEMORY_BYTES): the model
    // of object_form.json (of its gzip copy: the size its trailer records) needs more.
    const std::uint64_t plain_bytes = std::filesystem::file_size(data("object_form.json"));
    REQUIRE(plain_bytes > 400);  // 0.25 x the text is more than 100 bytes
    ::setenv("DTSIM_HOST_MEMORY_BYTES", "100", 1);
    for (const char* file : {"object_form.json", "object_form.json.gz"}) {
        INFO(file);
        CHECK_THROWS_WITH(read_trace(data(file)),
                          Catch::StartsWith(fmt::format("reading 1 trace file ({} of JSON text) needs about",
                                                        dtsim::format_bytes(static_cast<std::int64_t>(plain_bytes)))) &&
                              Catch::Contains("but this machine has 100 B: import fewer ranks"));
    }
    ::setenv("DTSIM_HOST_MEMORY_BYTES", "1073741824", 1);
    CHECK(read_trace(data("object_form.json.gz")).spans.size() == read_trace(data("object_form.json")).spans.size());
    ::unsetenv("DTSIM_HOST_MEMORY_BYTES");
}

TEST_CASE("array form without categories (torch 1.13's legacy output) classifies by name") {
    const TraceModel m = read_trace(data("array_form.json"));
    REQUIRE(m.ranks.size() == 1);
    CHECK(m.ranks[0].generator == "kineto-legacy");
    CHECK(span_named(m, "ProfilerStep#0").kind == SpanKind::annotation);
    CHECK(span_named(m, "aten::linear").kind == SpanKind::compute);
    CHECK(span_named(m, "gloo:all_reduce").kind == SpanKind::communication);
    const Span& relu = span_named(m, "aten::relu");
    CHECK(relu.start_ns == 460'500);
    CHECK(relu.dur_ns == 20'250);
    CHECK(m.arg(span_named(m, "aten::linear"), "Input Dims") == "[[8,16]]");  // compact JSON text
    for (const Track& t : m.tracks) CHECK(t.kind == TrackKind::cpu_thread);
}

TEST_CASE("B/E events are matched per track in time order, whatever the file order") {
    const TraceModel m = read_trace(data("begin_end.json"));
    const Span& outer = span_named(m, "outer");
    const Span& inner = span_named(m, "inner");
    CHECK(outer.start_ns == 10'000);
    CHECK(outer.dur_ns == 40'000);
    CHECK(inner.start_ns == 20'000);
    CHECK(inner.dur_ns == 10'000);
    CHECK(m.arg(outer, "Input Dims") == "[[2]]");
    CHECK(span_named(m, "zero").dur_ns == 0);
    CHECK(span_named(m, "other track").dur_ns == 1'500);
    CHECK(span_named(m, "other track").track != outer.track);
    CHECK(outer.kind == SpanKind::compute);
}

TEST_CASE("flows bind to the enclosing slice (bp e) or the next slice, and unmatched ends are counted") {
    const TraceModel m = read_trace(data("flows.json"));
    REQUIRE(m.flows.size() == 2);
    const auto name_of = [&](std::int32_t span) { return std::string(m.str(m.spans[static_cast<std::size_t>(span)].name)); };
    // ac2g: starts at 12 us inside "launch" (nested in "parent"), ends at 45 us inside k1.
    CHECK(m.str(m.flows[0].name) == "ac2g");
    CHECK(name_of(m.flows[0].from_span) == "launch");
    CHECK(name_of(m.flows[0].to_span) == "k1");
    // dep: its f comes first in the file; it starts at 50 us (inside "parent" only) and, with no
    // bp, ends at the next slice starting at or after 55 us: k2.
    CHECK(m.str(m.flows[1].name) == "dep");
    CHECK(name_of(m.flows[1].from_span) == "parent");
    CHECK(name_of(m.flows[1].to_span) == "k2");
    // id 2 under another cat is another flow that never ends; id 99 never starts.
    CHECK(m.stats.dropped_events == 2);
}

TEST_CASE("a directory reads one rank per file, in rank order, with Kineto's metadata") {
    const TraceModel m = read_trace(data("kineto_gpu"));
    REQUIRE(m.ranks.size() == 2);
    CHECK(m.ranks[0].rank == 0);
    CHECK(m.ranks[1].rank == 1);
    CHECK(m.ranks[0].generator == "kineto");
    CHECK(m.ranks[0].backend == "nccl");
    CHECK(m.ranks[0].world_size == 2);
    CHECK(m.ranks[0].base_time_ns == 1'000'000'000);
    CHECK(m.ranks[1].base_time_ns == 1'000'050'000);
    CHECK(m.ranks[0].device_names == std::vector<std::string>{"NVIDIA H100 80GB HBM3"});
    REQUIRE(m.ranks[0].process_groups.size() == 1);
    CHECK(m.ranks[0].process_groups[0].desc == "default_pg");
    CHECK(m.ranks[0].process_groups[0].ranks == std::vector<std::int32_t>{0, 1});

    CHECK(track_named(m, "stream 7").kind == TrackKind::gpu_stream);
    CHECK(track_named(m, "thread 100 (python)").kind == TrackKind::cpu_thread);
    CHECK(track_named(m, "stream 7").process_name == "GPU 0");
    // Both generations of NCCL kernel names, and a capitalised "Kernel" category.
    for (const Span& s : m.spans) {
        const std::string_view name = m.str(s.name);
        if (name.find("ncclDevKernel") == 0 || name.find("ncclKernel") == 0) CHECK(s.kind == SpanKind::communication);
        if (name == "ampere_sgemm_128x64_tn") CHECK(s.kind == SpanKind::compute);
        if (name == "record_param_comms") CHECK(s.kind == SpanKind::communication);
        if (name.find("Memcpy") == 0) CHECK(s.kind == SpanKind::memory);
        if (name == "cudaLaunchKernel") CHECK(s.kind == SpanKind::host);
    }
    CHECK(m.flows.size() == 6);  // five ac2g on rank 0, one on rank 1
    for (const Flow& f : m.flows) {
        CHECK(f.from_span >= 0);
        CHECK(f.to_span >= 0);
        CHECK(m.str(m.spans[static_cast<std::size_t>(f.from_span)].name).substr(0, 4) == "cuda");
    }

    // Files that name their ranks come out in rank order whatever the argument order.
    const TraceModel reversed =
        read_traces({data("kineto_gpu/rank1.pt.trace.json"), data("kineto_gpu/rank0.pt.trace.json")});
    CHECK(reversed.ranks[0].rank == 0);
    CHECK(reversed.ranks[1].rank == 1);
    for (const Track& t : reversed.tracks)
        if (t.name == "stream 20") CHECK(reversed.ranks[static_cast<std::size_t>(t.rank)].rank == 0);
}

TEST_CASE("chunk boundaries anywhere in the text give the same model") {
    const TraceModel whole = read_trace(data("kineto_gpu/rank0.pt.trace.json"));
    for (std::size_t chunk : {16, 17, 31, 64, 333}) {
        ReadOptions o;
        o.chunk_bytes = chunk;
        const TraceModel m = read_trace(data("kineto_gpu/rank0.pt.trace.json"), o);
        CHECK(same_spans(whole, m));
        CHECK(m.flows.size() == whole.flows.size());
        CHECK(m.ranks[0].device_names == whole.ranks[0].device_names);
    }
}

TEST_CASE("progress is reported in bytes up to the file size") {
    ReadOptions o;
    o.chunk_bytes = 256;
    std::uint64_t last = 0, total = 0;
    int calls = 0;
    o.progress = [&](std::uint64_t done, std::uint64_t all) {
        CHECK(done >= last);
        last = done;
        total = all;
        ++calls;
    };
    read_trace(data("kineto_gpu/rank0.pt.trace.json"), o);
    const auto size = fs::file_size(data("kineto_gpu/rank0.pt.trace.json"));
    CHECK(calls > 10);
    CHECK(last == size);
    CHECK(total == size);
}

TEST_CASE("microsecond text converts to nanoseconds exactly, never through a double") {
    TempDir dir;
    const auto ts_of = [&](const std::string& ts) {
        write(dir.file("t.json"), R"([{"ph":"X","name":"a","pid":1,"tid":1,"ts":)" + ts + R"(,"dur":0}])");
        return read_trace(dir.file("t.json")).spans.at(0).start_ns;
    };
    CHECK(ts_of("1234.567") == 1'234'567);
    CHECK(ts_of("4768563806119.778") == 4'768'563'806'119'778);  // a real Kineto ts; a double would lose the last digit
    CHECK(ts_of("0.0005") == 1);                                 // half a ns rounds away from zero
    CHECK(ts_of("0.0004999") == 0);
    CHECK(ts_of("-2.5") == -2'500);
    CHECK(ts_of("1e-3") == 1);
    CHECK(ts_of("1.5E+2") == 150'000);
    CHECK(ts_of("0") == 0);
    CHECK(ts_of("9223372036854775.807") == 9'223'372'036'854'775'807);
    CHECK_THAT(error_of(R"([{"ph":"X","ts":9223372036854775.808,"dur":1}])"), Catch::Contains("does not fit"));
}

TEST_CASE("a simulated step read back from its Chrome trace has the timeline's per-task times") {
    sim::Config c;
    c.model = "gpt2";
    c.topology = {2, 4};
    c.micro_batch = 2;
    c.seq_len = 256;
    c.precision = sim::Precision::bf16_mixed;
    const calib::Calibration hw = calib::load_hardware("a100-sxm");
    const sim::SimResult result = sim::simulate(c, hw);
    const sim::Timeline tl = sim::make_timeline(result, c, "a100-sxm");
    TempDir dir;
    write_chrome_trace(tl, dir.file("sim.json"));
    const TraceModel read = read_trace(dir.file("sim.json"));

    REQUIRE(read.ranks.size() == 1);
    CHECK(read.ranks[0].generator == "dtsim");
    CHECK(read.ranks[0].backend == "dtsim");
    REQUIRE(read.spans.size() == tl.events.size());
    std::map<std::int64_t, const Span*> by_task;
    for (const Span& s : read.spans) by_task[std::stoll(std::string(read.arg(s, "task")))] = &s;
    REQUIRE(by_task.size() == tl.events.size());
    for (std::size_t i = 0; i < tl.events.size(); ++i) {
        const sim::TimelineEvent& e = tl.events[i];
        const Span& s = *by_task.at(std::get<std::int64_t>(e.args[0].value));
        CHECK(s.start_ns == e.start_ns);
        CHECK(s.dur_ns == e.dur_ns);
        CHECK(read.str(s.name) == e.name);
        CHECK(read.tracks[static_cast<std::size_t>(s.track)].name == tl.streams[static_cast<std::size_t>(e.stream)]);
        CHECK(read.tracks[static_cast<std::size_t>(s.track)].kind == TrackKind::dtsim_stream);
        const SpanKind want = e.category == "compute"      ? SpanKind::compute
                              : e.category == "collective" ? SpanKind::communication
                              : e.category == "copy"       ? SpanKind::memory
                                                           : SpanKind::host;
        CHECK(s.kind == want);
    }

    // from_timeline builds the same model without the JSON.
    const TraceModel direct = from_timeline(tl);
    CHECK(same_spans(direct, read));
    REQUIRE(direct.tracks.size() == read.tracks.size());
    for (std::size_t t = 0; t < direct.tracks.size(); ++t) {
        CHECK(direct.tracks[t].name == read.tracks[t].name);
        CHECK(direct.tracks[t].sort_index == read.tracks[t].sort_index);
        CHECK(direct.tracks[t].process_name == read.tracks[t].process_name);
    }
    REQUIRE(direct.counters.size() == read.counters.size());
    for (std::size_t i = 0; i < direct.counters.size(); ++i) {
        CHECK(direct.counters[i].time_ns == read.counters[i].time_ns);
        CHECK(direct.counters[i].value == read.counters[i].value);
        CHECK(direct.str(direct.counters[i].name) == read.str(read.counters[i].name));
    }
}

TEST_CASE("malformed input: one line naming the file, the byte offset and line, and what was expected") {
    SECTION("empty, blank, binary, not JSON") {
        CHECK_THAT(error_of(""), Catch::Contains("not a JSON trace: the file is empty"));
        CHECK_THAT(error_of(" \n\t "), Catch::Contains("the file is empty"));
        CHECK_THAT(error_of(std::string("\x7f\x45\x4c\x46\x02\x01", 6)),
                   Catch::Contains("byte 0 (line 1)") && Catch::Contains("starts with binary data (byte 0x7f)"));
        CHECK_THAT(error_of(std::string("\0\0\0", 3)), Catch::Contains("binary data (byte 0x00)"));
        CHECK_THAT(error_of("hello"), Catch::Contains("expected '{' (object form) or '[' (array form)"));
        CHECK_THAT(error_of(R"({"other": 1})"), Catch::Contains("has no \"traceEvents\" array"));
        CHECK_THAT(error_of("[] x"), Catch::Contains("byte 3 (line 1): expected the end of the file"));
    }
    SECTION("truncated") {
        CHECK_THAT(error_of(R"({"traceEvents":[{"ph":"X","ts":1,)"),
                   Catch::Contains("but the file ends here (truncated?)") && Catch::Contains("/traceEvents/0"));
        CHECK_THAT(error_of(R"([{"ph":"X","name":"abc)"), Catch::Contains("the file ends inside it (truncated?)"));
        TempDir dir;
        const std::string text = std::string(R"({"traceEvents":[)") + std::string(5000, ' ') + "]}";
        write_gzip(dir.file("t.json.gz"), text);
        const auto size = fs::file_size(dir.file("t.json.gz"));
        fs::resize_file(dir.file("t.json.gz"), size - 10);
        try {
            read_trace(dir.file("t.json.gz"));
            FAIL("no error");
        } catch (const ParseError& e) {
            CHECK_THAT(std::string(e.what()), Catch::Contains("t.json.gz") && Catch::Contains("truncated"));
        }
    }
    SECTION("syntax, with the offset and line of the fault") {
        CHECK_THAT(error_of("{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1,\"dur\":1}\n {\"ph\":\"X\"}]}"),
                   Catch::Contains("field '/traceEvents/0'") && Catch::Contains("byte 43 (line 2)") &&
                       Catch::Contains("expected ',' or ']' after an event, found '{'"));
        CHECK_THAT(error_of("{\"traceEvents\":[\n\n{\"ph\" \"X\"}]}"),
                   Catch::Contains("(line 3)") && Catch::Contains("expected ':' after a member name"));
        CHECK_THAT(error_of(R"([{"ph":"X","ts":01,"dur":1}])"),
                   Catch::Contains("field '/0/ts'") && Catch::Contains("'01' is not a valid JSON number"));
        CHECK_THAT(error_of(R"([{"ph":"X","ts":1.,"dur":1}])"), Catch::Contains("'1.' is not a valid JSON number"));
        CHECK_THAT(error_of("[{\"ph\":\"X\",\"name\":\"a\tb\"}]"), Catch::Contains("control character 0x09"));
        CHECK_THAT(error_of("[{\"ph\":\"X\",\"name\":\"\xff\"}]"), Catch::Contains("byte 0xff is not UTF-8"));
        CHECK_THAT(error_of("[{\"ph\":\"X\",\"name\":\"\xc3\x28\"}]"), Catch::Contains("invalid UTF-8"));
        CHECK_THAT(error_of(R"([{"ph":"X","name":"\q"}])"), Catch::Contains("invalid escape \\'q'"));
        CHECK_THAT(error_of(R"([{"ph":"X","args":{"a":tru}}])"), Catch::Contains("expected a value, found 'tru'"));
    }
    SECTION("nesting deeper than 64 levels") {
        const std::string deep = R"([{"ph":"X","ts":1,"dur":1,"args":{"a":)" + std::string(100, '[') +
                                 std::string(100, ']') + "}}]";
        CHECK_THAT(error_of(deep), Catch::Contains("nested more than 64 levels deep"));
    }
    SECTION("wrong types") {
        CHECK_THAT(error_of(R"({"traceEvents":[{"ph":"X","ts":"12","dur":1}]})"),
                   Catch::Contains("field '/traceEvents/0/ts'") &&
                       Catch::Contains("expected a number of microseconds for ts, found a string"));
        CHECK_THAT(error_of(R"([{"ph":"X","pid":{},"ts":1}])"),
                   Catch::Contains("expected a number or string for pid, found an object"));
        CHECK_THAT(error_of(R"({"traceEvents":{}})"), Catch::Contains("expected an array of events for traceEvents"));
        CHECK_THAT(error_of(R"([1])"), Catch::Contains("expected an event object, found a number"));
        CHECK_THAT(error_of(R"([{"ph":"X","ts":1,"dur":-1}])"), Catch::Contains("dur is negative"));
        CHECK_THAT(error_of(R"([{"name":"x","ts":1}])"), Catch::Contains("the event has no \"ph\""));
        CHECK_THAT(error_of(R"([{"ph":"X","dur":1}])"), Catch::Contains("a 'X' event needs \"ts\""));
        CHECK_THAT(error_of(R"({"distributedInfo":{"rank":"zero"},"traceEvents":[]})"),
                   Catch::Contains("field '/distributedInfo/rank': expected an integer"));
    }
    SECTION("B/E that do not nest") {
        CHECK_THAT(error_of(R"([{"ph":"E","pid":1,"tid":1,"ts":5}])"),
                   Catch::Contains("event at byte 1") && Catch::Contains("closes nothing"));
        CHECK_THAT(error_of(R"([{"ph":"B","name":"a","pid":1,"tid":1,"ts":5}])"), Catch::Contains("is never closed"));
        CHECK_THAT(error_of(R"([{"ph":"B","name":"a","pid":1,"tid":1,"ts":1},{"ph":"B","name":"b","pid":1,"tid":1,"ts":2},
                                {"ph":"E","name":"a","pid":1,"tid":1,"ts":3}])"),
                   Catch::Contains("the 'E' event for 'a' on pid 1 tid 1 would close 'b'"));
    }
    SECTION("a missing file or an empty directory") {
        TempDir dir;
        CHECK_THROWS_WITH(read_trace(dir.file("nope.json")), Catch::Contains("cannot open the trace"));
        CHECK_THROWS_WITH(read_trace(dir.path().string()), Catch::Contains("holds no *.json or *.json.gz"));
    }
}

TEST_CASE("a measured two-rank dtsim trace reads back as two ranks, the same as from_timeline") {
    sim::Timeline tl;
    tl.title = "hand-made (measured)";
    tl.ranks = {"rank 0", "rank 1"};
    tl.streams = {"compute", "comm"};
    for (int r = 0; r < 2; ++r) {
        tl.events.push_back(sim::TimelineEvent{.rank = r,
                                               .stream = 0,
                                               .name = "gemm",
                                               .category = "compute",
                                               .start_ns = 1'000 * r,
                                               .dur_ns = 5'001,
                                               .args = {{.key = "task", .value = std::int64_t{0}}},
                                               .deps = {}});
        tl.events.push_back(sim::TimelineEvent{.rank = r,
                                               .stream = 1,
                                               .name = "allreduce bucket 0",
                                               .category = "collective",
                                               .start_ns = 6'000,
                                               .dur_ns = 2'000 + r,
                                               .args = {{.key = "task", .value = std::int64_t{1}},
                                                        {.key = "bytes", .value = std::int64_t{4096}},
                                                        {.key = "group_size", .value = std::int64_t{2}}},
                                               .deps = {2 * r}});  // the allreduce waits for the gemm
    }
    tl.events[1].args.push_back({.key = "waited_for_slowest_rank_ns", .value = std::int64_t{1'000}});
    tl.device_memory_bytes = {{.rank = 0, .time_ns = 0, .value = 10}, {.rank = 1, .time_ns = 5, .value = 20}};
    TempDir dir;
    write_chrome_trace(tl, dir.file("measured.json"));
    const TraceModel read = read_trace(dir.file("measured.json"));
    const TraceModel direct = from_timeline(tl);
    REQUIRE(read.ranks.size() == 2);
    CHECK(read.ranks[1].rank == 1);
    CHECK(same_spans(direct, read));
    REQUIRE(read.tracks.size() == 4);
    for (std::size_t t = 0; t < 4; ++t) {
        CHECK(read.tracks[t].rank == direct.tracks[t].rank);
        CHECK(read.tracks[t].sort_index == direct.tracks[t].sort_index);  // per rank: 0, 1, 0, 1
        CHECK(read.tracks[t].name == direct.tracks[t].name);
    }
    // dtsim's own args are kept by default, the wait for the slowest rank among them.
    int waited = 0;
    for (const auto& span : read.spans)
        if (read.arg(span, "waited_for_slowest_rank_ns") == "1000") {
            ++waited;
            CHECK(read.str(span.name) == "allreduce bucket 0");
            CHECK(read.tracks[static_cast<std::size_t>(span.track)].rank == 0);
        }
    CHECK(waited == 1);
    REQUIRE(read.counters.size() == 2);
    CHECK(read.counters[1].rank == 1);
    CHECK(read.counters[1].value == 20);
    // Each rank's allreduce waits for its gemm: one flow per rank, read back between the same spans.
    REQUIRE(read.flows.size() == 2);
    REQUIRE(direct.flows.size() == 2);
    for (std::size_t f = 0; f < 2; ++f) {
        CHECK(read.flows[f].from_span == direct.flows[f].from_span);
        CHECK(read.flows[f].to_span == direct.flows[f].to_span);
        CHECK(read.str(read.spans[static_cast<std::size_t>(read.flows[f].from_span)].name) == "gemm");
        CHECK(read.str(read.spans[static_cast<std::size_t>(read.flows[f].to_span)].name) == "allreduce bucket 0");
    }
}
