// nccl-tests output (formats.md §8) into collective curves: the text table the
// *_perf binaries print and the JSON they write with -J.
//
// Text: a preamble (`# Collective test starting: all_reduce_perf`, `# nThread
// .. nGpus ..`, `# Using devices`, one `#  Rank N Group ..` line per rank), the
// column header, one row per size (size count type redop root, then the
// out-of-place group time algbw busbw #wrong, then the in-place group), and a
// footer (`# Out of bounds values`, `# Avg bus bandwidth`). Column positions
// come from the header, so -C (cputime), -S (timestamp) and -I (per-iteration
// columns) need no special cases. The `type` column names the element type;
// the first time column is the out-of-place group's, the second the in-place
// group's. A file may hold several runs; a row whose size does not grow, or
// whose type changes, starts a new sweep (-d all, -o all, -R).
#include "dtsim/profiler/nccl_tests_import.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::profiler {
namespace {

using calib::CollectiveKind;

constexpr const char* kKindFix =
    "dtsim reads the collective from the `# Collective test starting: <name>_perf` line nccl-tests prints, then from "
    "any `<name>_perf` or AllReduce/AllGather/ReduceScatter/Broadcast mention in the output, then from the file "
    "name. Keep that line, or rename the file after the collective, e.g. all_reduce_perf.txt, all_gather_perf.json, "
    "reduce_scatter_perf.txt, broadcast_perf.txt or reduce_perf.txt";

// Bounds of what nccl-tests can have measured. Each lies far beyond a real run,
// so it refuses only a corrupt file, and keeps the fit's arithmetic finite.
constexpr double kMaxSizeBytes = 1125899906842624.0;  // 1 PiB; nccl-tests sweeps up to a few GiB
constexpr double kMaxTimeUs = 1e9;                    // 1,000 s for one collective is a broken run
constexpr double kMaxBandwidthGbps = 1e6;             // no link reaches 1 PB/s
constexpr std::int64_t kMaxRanks = 1 << 20;           // more GPUs than any cluster built
constexpr std::size_t kMaxRowsPerRun = 10000;         // nccl-tests sweeps a few dozen sizes

constexpr const char* kExpectedOutput = "nccl-tests output (the text a *_perf binary prints, or its -J JSON)";

// nccl-tests' type names (common.cu's test_typenames) that dtsim prices; the
// integer, double and fp8 types are read but priced by no curve.
std::optional<DType> dtype_of_type_name(const std::string& type) {
    if (type == "float") return DType::fp32;
    if (type == "half") return DType::fp16;
    if (type == "bfloat16") return DType::bf16;
    return std::nullopt;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// A collective named in a binary or file name ("all_reduce", "allreduce",
// "reduce_scatter", ...). Returns the canonical name; kinds dtsim does not
// model (alltoall, sendrecv, ...) come back too so that the error can name them.
std::optional<std::string> find_collective_name(std::string_view text, bool require_perf_suffix) {
    static const std::regex loose(
        "(^|[^a-z])(all_?reduce|reduce_?scatter|all_?gather|all_?to_?allv?|broadcast|send_?recv|hypercube|reduce|"
        "gather|scatter)(?=[^a-z]|$)");
    static const std::regex strict(
        "(^|[^a-z])(all_?reduce|reduce_?scatter|all_?gather|all_?to_?allv?|broadcast|send_?recv|hypercube|reduce|"
        "gather|scatter)_perf");
    std::string s = lower(text);
    std::smatch m;
    if (!std::regex_search(s, m, require_perf_suffix ? strict : loose)) return std::nullopt;
    std::string name = m[2].str();
    name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
    return name;
}

// CamelCase collective names as NCCL and nccl-tests write them in prose.
std::optional<std::string> find_camel_case_collective(std::string_view text) {
    static const std::regex camel("\\b(AllReduce|ReduceScatter|AllGather|Broadcast)\\b");
    std::string s(text);
    std::smatch m;
    if (!std::regex_search(s, m, camel)) return std::nullopt;
    return lower(m[1].str());
}

// Canonical name -> kind; names dtsim does not model give a ParseError.
CollectiveKind kind_from_name(const std::string& name, const std::string& file, const std::string& field) {
    if (name == "allreduce") return CollectiveKind::allreduce;
    if (name == "reducescatter") return CollectiveKind::reduce_scatter;
    if (name == "allgather") return CollectiveKind::allgather;
    if (name == "broadcast") return CollectiveKind::broadcast;
    if (name == "reduce") return CollectiveKind::reduce;
    throw ParseError(file, field,
                     fmt::format("the output is for `{}`, a collective dtsim does not model; import all_reduce_perf, "
                                 "all_gather_perf, reduce_scatter_perf, broadcast_perf or reduce_perf output",
                                 name));
}

// nccl-tests prints NCCL's version code: 22809 for 2.28.9 (2.9 and later),
// 2708 for 2.7.8 (older).
std::string version_from_code(long code) {
    if (code <= 0) return {};
    if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
    return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

std::vector<std::string> split_ws(std::string_view line) {
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
        std::size_t j = i;
        while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
        if (j > i) out.emplace_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

bool is_all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<std::int64_t> parse_int(const std::string& s) {
    if (!is_all_digits(s)) return std::nullopt;
    errno = 0;
    long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (errno != 0) return std::nullopt;
    return static_cast<std::int64_t>(v);
}

std::optional<double> parse_double(const std::string& s) {
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

// Text after "#" with leading spaces removed.
std::string_view comment_body(std::string_view line) {
    line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
    return line;
}

bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

struct Preamble {
    std::optional<std::string> collective;  // from "# Collective test starting:"
    int collective_line = 0;
    int rank_lines = 0;
    int threads_times_gpus = 0;
    std::string nccl_version;
};

struct PendingRun {
    Preamble preamble;
    int first_line = 0;
    std::string type;
    std::vector<calib::CollectivePoint> points;
};

// Resolves the kind and group size of each run once the whole file is read.
NcclTestsRun finish_run(const PendingRun& run, const std::string& text, const std::string& file) {
    NcclTestsRun out;
    std::string field = fmt::format("line {}", run.first_line);
    if (run.preamble.collective) {
        out.kind = kind_from_name(*run.preamble.collective, file, fmt::format("line {}", run.preamble.collective_line));
    } else if (auto named = find_collective_name(text, true)) {
        out.kind = kind_from_name(*named, file, field);
    } else if (auto camel = find_camel_case_collective(text)) {
        out.kind = kind_from_name(*camel, file, field);
    } else if (auto from_file = find_collective_name(std::filesystem::path(file).filename().string(), false)) {
        out.kind = kind_from_name(*from_file, file, field);
    } else {
        throw ParseError(file, field, fmt::format("cannot tell which collective this table measures. {}", kKindFix));
    }
    out.nranks = run.preamble.rank_lines > 0 ? run.preamble.rank_lines : run.preamble.threads_times_gpus;
    if (out.nranks == 1) {
        throw ParseError(file, field,
                         "the table was measured on 1 rank, where a collective moves no data; run nccl-tests on 2 or "
                         "more GPUs (-g 2, or mpirun -np 2)");
    }
    if (out.nranks <= 0) {
        throw ParseError(file, field,
                         "cannot tell how many ranks ran: keep nccl-tests' header with the `# nThread N nGpus N` line "
                         "and the `#  Rank N Group N ...` lines (one per rank) above the table");
    }
    out.points = run.points;
    out.nccl_version = run.preamble.nccl_version;
    out.type = run.type;
    out.dtype = dtype_of_type_name(run.type);
    return out;
}

}  // namespace

NcclTestsGroup nccl_tests_group_from_string(const std::string& name) {
    if (name == "out-of-place") return NcclTestsGroup::out_of_place;
    if (name == "in-place") return NcclTestsGroup::in_place;
    throw ConfigError(fmt::format("nccl-tests group `{}`: expected out-of-place or in-place", name));
}

std::string to_string(NcclTestsGroup g) {
    return g == NcclTestsGroup::in_place ? "in-place" : "out-of-place";
}

std::vector<NcclTestsRun> parse_nccl_tests_text(const std::string& text, const std::string& file,
                                                NcclTestsGroup group) {
    check_text(text, file, kExpectedOutput);
    static const std::regex library_version("nccl-library=([0-9]+)");
    static const std::regex headers_version("nccl-headers=([0-9]+)");
    static const std::regex nccl_version_line("NCCL version ([0-9]+\\.[0-9]+\\.[0-9]+)");
    static const std::regex nthread_line("^nThread +([0-9]+) +nGpus +([0-9]+)");

    std::vector<PendingRun> runs;
    Preamble preamble;
    bool preamble_used = false;  // a table followed the preamble: the next preamble line starts afresh
    bool in_table = false;
    std::size_t time_col = 5;  // column of the chosen group's time
    std::size_t type_col = 2;
    std::size_t min_cols = 9;  // size count type redop root time algbw busbw #wrong
    std::vector<std::string> header_cols;
    std::optional<PendingRun> current;

    auto close_sweep = [&] {
        if (current && !current->points.empty()) runs.push_back(std::move(*current));
        current.reset();
    };
    auto preamble_line = [&] {
        if (preamble_used) {
            preamble = Preamble{};
            preamble_used = false;
        }
    };

    std::istringstream in(text);
    std::string raw;
    int line_no = 0;
    while (std::getline(in, raw)) {
        ++line_no;
        if (!raw.empty() && raw.back() == '\r') raw.pop_back();
        std::string_view line = raw;
        std::size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos) continue;
        line.remove_prefix(first);

        std::smatch m;
        if (std::regex_search(raw, m, library_version) || std::regex_search(raw, m, headers_version)) {
            preamble_line();
            preamble.nccl_version = version_from_code(std::strtol(m[1].str().c_str(), nullptr, 10));
        } else if (std::regex_search(raw, m, nccl_version_line)) {
            // Older nccl-tests print "# NCCL version 2.18.1+cuda12.1" (sometimes after the table).
            if (preamble.nccl_version.empty()) preamble.nccl_version = m[1].str();
            for (auto& r : runs)
                if (r.preamble.nccl_version.empty()) r.preamble.nccl_version = m[1].str();
            if (current && current->preamble.nccl_version.empty()) current->preamble.nccl_version = m[1].str();
        }

        if (line.front() == '#') {
            std::string_view body = comment_body(line);
            std::string body_s(body);
            if (starts_with(body, "Collective test starting:")) {
                close_sweep();
                in_table = false;
                preamble_line();
                std::string rest(body.substr(std::string_view("Collective test starting:").size()));
                auto name = find_collective_name(rest, false);
                if (!name) {
                    throw ParseError(file, fmt::format("line {}", line_no),
                                     fmt::format("`{}` does not name a collective nccl-tests measures", rest));
                }
                preamble.collective = name;
                preamble.collective_line = line_no;
            } else if (std::regex_search(body_s, m, nthread_line)) {
                preamble_line();
                // Each at most kMaxRanks, so that their product cannot overflow.
                const auto threads = parse_int(m[1].str()), gpus = parse_int(m[2].str());
                if (!threads || !gpus || *threads > kMaxRanks || *gpus > kMaxRanks || *threads * *gpus > kMaxRanks)
                    throw ParseError(file, fmt::format("line {}", line_no),
                                     fmt::format("expected `nThread N nGpus G` with N x G at most {} ranks (more GPUs "
                                                 "than any cluster built), found `{}`",
                                                 kMaxRanks, m[0].str()));
                preamble.threads_times_gpus = static_cast<int>(*threads * *gpus);
            } else if (starts_with(body, "Using devices")) {
                preamble_line();
            } else if (starts_with(body, "Rank ")) {
                preamble_line();
                ++preamble.rank_lines;
            } else if (starts_with(body, "size ")) {
                // The column header: the type column and the groups' time columns.
                auto cols = split_ws(body);
                std::vector<std::size_t> time_cols;
                for (std::size_t c = 0; c < cols.size(); ++c)
                    if (cols[c] == "time" || cols[c] == "cputime") time_cols.push_back(c);
                auto wrong = std::find(cols.begin(), cols.end(), "#wrong");
                auto type = std::find(cols.begin(), cols.end(), "type");
                if (time_cols.empty() || wrong == cols.end() || type == cols.end() || cols.size() < 5) {
                    throw ParseError(file, fmt::format("line {}", line_no),
                                     "expected nccl-tests' column header `size count type redop root time algbw busbw "
                                     "#wrong ...`");
                }
                const std::size_t g = group == NcclTestsGroup::in_place ? 1 : 0;
                if (g >= time_cols.size()) {
                    throw ParseError(file, fmt::format("line {}", line_no),
                                     "the table has no in-place group (a second `time algbw busbw #wrong` block); "
                                     "import its out-of-place times instead");
                }
                close_sweep();
                header_cols = cols;
                time_col = time_cols[g];
                type_col = static_cast<std::size_t>(type - cols.begin());
                // A row reaches #wrong and, from the time column, time algbw busbw #wrong.
                min_cols = std::max(static_cast<std::size_t>(wrong - cols.begin()) + 1, time_col + 4);
                in_table = true;
                preamble_used = true;
            } else if (starts_with(body, "Out of bounds values") || starts_with(body, "Avg bus bandwidth")) {
                close_sweep();
                in_table = false;
            }
            continue;
        }

        // Not a comment: a data row inside a table, or noise (NCCL INFO lines, warnings).
        auto cols = split_ws(line);
        if (!in_table || cols.empty() || !is_all_digits(cols.front())) continue;
        std::string field = fmt::format("line {}", line_no);
        if (cols.size() < min_cols) {
            throw ParseError(file, field,
                             fmt::format("expected a row of at least {} columns (size count type redop root, then "
                                         "time algbw busbw #wrong), found {}: `{}`",
                                         min_cols, cols.size(), raw));
        }
        // Every error names the line and the column, as nccl-tests' header calls it.
        auto at = [&](std::size_t col) {
            return fmt::format("line {}, column {}", line_no, col < header_cols.size() ? header_cols[col] : "?");
        };
        auto size = parse_int(cols[0]);
        auto count = parse_int(cols[1]);
        if (!size || static_cast<double>(*size) > kMaxSizeBytes)
            throw ParseError(file, at(0),
                             fmt::format("expected the message size in bytes, an integer up to 2^50 (1 PiB; "
                                         "nccl-tests sweeps up to a few GiB), found `{}`",
                                         cols[0]));
        if (!count)
            throw ParseError(file, at(1), fmt::format("expected the element count, an integer, found `{}`", cols[1]));
        auto time = parse_double(cols[time_col]);
        if (!time || *time <= 0 || *time > kMaxTimeUs) {
            throw ParseError(file, at(time_col),
                             fmt::format("expected the {} time in microseconds, > 0 and <= 1e+09 (1,000 s "
                                         "for one collective is a broken run), found `{}`",
                                         to_string(group), cols[time_col]));
        }
        for (std::size_t col : {time_col + 1, time_col + 2}) {
            auto bw = parse_double(cols[col]);
            if (!bw || *bw < 0 || *bw > kMaxBandwidthGbps)
                throw ParseError(file, at(col),
                                 fmt::format("expected a bandwidth in GB/s, >= 0 and <= 1e+06 (no link reaches 1 "
                                             "PB/s), found `{}`",
                                             cols[col]));
        }
        const std::string& wrong = cols[time_col + 3];
        if (wrong != "N/A" && !parse_double(wrong)) {
            throw ParseError(file, at(time_col + 3),
                             fmt::format("expected #wrong to be a number or N/A, found `{}`", wrong));
        }
        // nccl-tests -b 0 prints a row of 0 bytes: it moves no data, so it says nothing of a curve.
        if (*size == 0) continue;
        const std::string& type = cols[type_col];
        if (current && !current->points.empty() &&
            (*size <= current->points.back().size_bytes || type != current->type))
            close_sweep();
        if (!current) {
            current = PendingRun{preamble, line_no, type, {}};
        }
        if (current->points.size() >= kMaxRowsPerRun)
            throw ParseError(file, fmt::format("line {}", line_no),
                             fmt::format("more than {} rows in one sweep; nccl-tests sweeps a few dozen sizes",
                                         kMaxRowsPerRun));
        current->points.push_back({*size, *time});
    }
    close_sweep();

    if (runs.empty()) {
        throw ParseError(file, "line 1",
                         "found no nccl-tests result table (a `#  size  count  type  redop  root  time  algbw  busbw "
                         "#wrong ...` header followed by rows); pass the output of an nccl-tests *_perf binary");
    }
    std::vector<NcclTestsRun> out;
    out.reserve(runs.size());
    for (const auto& r : runs) {
        out.push_back(finish_run(r, text, file));
        out.back().group = group;
    }
    return out;
}

std::vector<NcclTestsRun> parse_nccl_tests_json(const std::string& text, const std::string& file,
                                                NcclTestsGroup group) {
    Json doc = parse_json_text(text, file, "the JSON nccl-tests writes with -J");
    JsonView root(doc, file);
    if (!doc.is_object()) root.fail("", "expected a JSON object (the file nccl-tests writes with -J)");

    std::string version;
    if (root.has("nccl_version")) {
        const Json& v = doc["nccl_version"];
        if (v.is_number_integer()) {
            version = version_from_code(v.get<long>());
        } else if (v.is_string()) {
            version = v.get<std::string>();
        } else {
            root.fail("nccl_version", "expected NCCL's version code, e.g. 22809");
        }
    }

    // Group size: the device list (one entry per rank, gathered over MPI), else
    // an explicit nranks/world_size, else threads x GPUs of this process.
    const Bounds ranks{.min = 0, .max = static_cast<double>(kMaxRanks), .why_max = "more GPUs than any cluster built"};
    std::int64_t nranks = 0;
    if (root.has("nranks")) nranks = root.integer_within("nranks", ranks);
    if (nranks <= 0 && root.has("world_size")) nranks = root.integer_within("world_size", ranks);
    if (root.has("config")) {
        JsonView config = root.at("config");
        if (nranks <= 0 && config.has("nranks")) nranks = config.integer_within("nranks", ranks);
        if (nranks <= 0 && config.has("devices"))
            nranks = static_cast<std::int64_t>(config.at("devices").size_at_most(kMaxRanks, "devices (one per rank)"));
        if (nranks <= 0 && config.has("nthreads") && config.has("ngpus")) {
            nranks = config.integer_within("nthreads", ranks) * config.integer_within("ngpus", ranks);
            if (nranks > kMaxRanks)
                config.fail("ngpus", fmt::format("nthreads x ngpus = {} ranks; expected at most {} (more GPUs than "
                                                 "any cluster built)",
                                                 nranks, kMaxRanks));
        }
    }
    if (nranks <= 0) {
        root.fail("config",
                  "cannot tell how many ranks ran: expected config.devices (one per rank) or "
                  "config.nthreads and config.ngpus as nccl-tests writes them");
    }
    if (nranks == 1) {
        root.fail("config",
                  "the results were measured on 1 rank, where a collective moves no data; run nccl-tests on 2 or "
                  "more GPUs (-g 2, or mpirun -np 2)");
    }

    // Collective: the command line, then the rows' experiment names, then the file name.
    std::optional<std::string> name;
    std::string name_field = "/args";
    if (root.has("args") && doc["args"].is_array()) {
        for (const auto& a : doc["args"]) {
            if (a.is_string() && (name = find_collective_name(a.get<std::string>(), true))) break;
        }
    }
    JsonView results = root.at("results");
    std::size_t n = results.size_at_most(kMaxRowsPerRun, "result rows (nccl-tests sweeps a few dozen sizes)");
    for (std::size_t i = 0; !name && i < n; ++i) {
        JsonView row = results.at(i);
        if (row.has("experiment_name") && row.value()["experiment_name"].is_string()) {
            name = find_collective_name(row.value()["experiment_name"].get<std::string>(), false);
        }
    }
    if (!name) name = find_collective_name(std::filesystem::path(file).filename().string(), false);
    if (!name) {
        throw ParseError(file, "/args", fmt::format("cannot tell which collective this file measures. {}", kKindFix));
    }
    CollectiveKind kind = kind_from_name(*name, file, name_field);

    std::vector<NcclTestsRun> out;
    for (std::size_t i = 0; i < n; ++i) {
        JsonView row = results.at(i);
        const std::int64_t size = row.integer_within(
            "size", Bounds{.min = 0, .max = kMaxSizeBytes, .why_max = "1 PiB; nccl-tests sweeps up to a few GiB"});
        // The chosen group. Trace replay writes no out-of-place group, so an
        // out-of-place import falls back to in-place there, and says so.
        auto present = [&](const char* key) { return row.has(key) && !row.value()[key].is_null(); };
        NcclTestsGroup used = group;
        if (group == NcclTestsGroup::out_of_place && !present("out_of_place")) used = NcclTestsGroup::in_place;
        JsonView g = row.at(used == NcclTestsGroup::in_place ? "in_place" : "out_of_place");
        // The element type; JSON written before nccl-tests named it is float.
        std::string type = "float";
        if (row.has("type")) {
            if (!row.value()["type"].is_string())
                row.fail("type", "expected nccl-tests' type name, e.g. \"float\", \"half\" or \"bfloat16\"");
            type = row.value()["type"].get<std::string>();
        }
        const char* time_key = g.has("time") ? "time" : "cpu_time";
        if (!g.has(time_key)) g.fail("time", "missing: expected `time` (or `cpu_time` with -C 1) in microseconds");
        const double t = g.number_within(
            time_key, Bounds{.min = 0, .min_exclusive = true, .max = kMaxTimeUs,
                             .why_max = "1,000 s for one collective is a broken run"});
        // nccl-tests -b 0 writes a row of 0 bytes: it moves no data, so it says nothing of a curve.
        if (size == 0) continue;
        if (out.empty() || out.back().type != type || out.back().group != used ||
            (!out.back().points.empty() && size <= out.back().points.back().size_bytes)) {
            out.push_back(NcclTestsRun{kind, static_cast<int>(nranks), {}, version, type, dtype_of_type_name(type), used});
        }
        out.back().points.push_back({size, t});
    }
    if (out.empty()) root.fail("results", "expected at least one result row");
    return out;
}

std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text, const std::string& file, NcclTestsGroup group) {
    // nccl-tests' text output starts with '#' or NCCL log lines, never '{': a
    // file that starts with '{' is JSON, and a syntax error in it is reported as such.
    std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') return parse_nccl_tests_json(text, file, group);
    return parse_nccl_tests_text(text, file, group);
}

std::vector<NcclTestsRun> read_nccl_tests(const std::string& path, NcclTestsGroup group) {
    return parse_nccl_tests(read_config_file(path), path, group);
}

}  // namespace dtsim::profiler
