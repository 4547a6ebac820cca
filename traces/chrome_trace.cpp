#include "dtsim/traces/chrome_trace.hpp"

#include "dtsim/common/json_io.hpp"

#include <fmt/format.h>

#include <iterator>

namespace dtsim::traces {
namespace {

void append_escaped(std::string& out, const std::string& s) {
    out += '"';
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20)
                    fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<int>(c));
                else
                    out += c;
        }
    }
    out += '"';
}

// One clock inside, microseconds with three decimals in the trace (style.md §5).
void append_us(std::string& out, std::int64_t ns) {
    fmt::format_to(std::back_inserter(out), "{}.{:03}", ns / 1000, ns % 1000);
}

void append_metadata(std::string& out, const char* what, int pid, int tid, const std::string& name) {
    out += fmt::format(R"(,{{"ph":"M","name":"{}","pid":{},"tid":{},"args":{{"name":)", what, pid, tid);
    append_escaped(out, name);
    out += "}}\n";
}

}  // namespace

std::string chrome_trace_json(const sim::Timeline& tl) {
    std::string out;
    out.reserve(256 + tl.events.size() * 200);
    out += R"({"displayTimeUnit":"ms","otherData":{"generator":"dtsim","title":)";
    append_escaped(out, tl.title);
    // The device-memory peak by category, per pid (dtsim's reader keeps it; viewers show otherData as is).
    if (!tl.device_memory_peak.empty()) {
        out += R"(,"device_memory_peak":{"0":{)";
        for (std::size_t i = 0; i < tl.device_memory_peak.size(); ++i) {
            if (i) out += ',';
            append_escaped(out, tl.device_memory_peak[i].first);
            out += ':' + std::to_string(tl.device_memory_peak[i].second);
        }
        out += "}}";
    }
    out += "},\"traceEvents\":[\n";
    // The first entry names the trace so every later entry can start with a comma.
    out += R"({"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":)";
    append_escaped(out, tl.ranks.empty() ? std::string("rank 0") : tl.ranks[0]);
    out += "}}\n";
    for (std::size_t r = 1; r < tl.ranks.size(); ++r)
        append_metadata(out, "process_name", static_cast<int>(r), 0, tl.ranks[r]);
    for (std::size_t r = 0; r < std::max<std::size_t>(tl.ranks.size(), 1); ++r)
        for (std::size_t s = 0; s < tl.streams.size(); ++s)
            append_metadata(out, "thread_name", static_cast<int>(r), static_cast<int>(s) + 1, tl.streams[s]);
    for (const auto& e : tl.events) {
        out += R"(,{"ph":"X","name":)";
        append_escaped(out, e.name);
        out += R"(,"cat":)";
        append_escaped(out, e.category);
        out += fmt::format(R"(,"pid":{},"tid":{},"ts":)", e.rank, e.stream + 1);
        append_us(out, e.start_ns);
        out += ",\"dur\":";
        append_us(out, e.dur_ns);
        out += ",\"args\":{";
        for (std::size_t i = 0; i < e.args.size(); ++i) {
            if (i) out += ',';
            append_escaped(out, e.args[i].key);
            out += ':';
            if (const auto* v = std::get_if<std::int64_t>(&e.args[i].value))
                out += std::to_string(*v);
            else
                append_escaped(out, std::get<std::string>(e.args[i].value));
        }
        out += "}}\n";
    }
    // Dependencies as flow arrows (Perfetto and chrome://tracing draw them):
    // the start binds to the slice the dependency is, at its start; the end,
    // with "bp":"e", to the waiting slice at its start.
    std::size_t flow_id = 0;
    for (const auto& e : tl.events)
        for (const std::int32_t d : e.deps) {
            if (d < 0 || static_cast<std::size_t>(d) >= tl.events.size()) continue;
            const auto& from = tl.events[static_cast<std::size_t>(d)];
            ++flow_id;
            out += fmt::format(R"(,{{"ph":"s","name":"dep","cat":"dep","id":{},"pid":{},"tid":{},"ts":)", flow_id,
                               from.rank, from.stream + 1);
            append_us(out, from.start_ns);
            out += fmt::format(
                "}}\n,{{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"dep\",\"cat\":\"dep\",\"id\":{},\"pid\":{},\"tid\":{},"
                "\"ts\":",
                flow_id, e.rank, e.stream + 1);
            append_us(out, e.start_ns);
            out += "}\n";
        }
    for (const auto& [name, samples] :
         {std::pair{"device memory", &tl.device_memory_bytes}, std::pair{"host memory", &tl.host_memory_bytes}})
        for (const auto& c : *samples) {
            out += fmt::format(R"(,{{"ph":"C","name":"{}","pid":{},"ts":)", name, c.rank);
            append_us(out, c.time_ns);
            out += fmt::format(R"(,"args":{{"bytes":{}}}}})", c.value);
            out += '\n';
        }
    out += "]}\n";
    return out;
}

void write_chrome_trace(const sim::Timeline& timeline, const std::string& path) {
    write_file_atomically(path, chrome_trace_json(timeline));
}

}  // namespace dtsim::traces
