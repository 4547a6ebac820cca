// The streaming trace reader: one pass over each file's text through
// JsonCursor, each event decoded into reused scratch buffers and appended to
// the model as compact records; B/E pairs, flows, span kinds, track kinds
// and rank order are resolved once the files are read.
#include "dtsim/traces/trace_reader.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/format_bytes.hpp"
#include "dtsim/common/host_memory.hpp"
#include "json_cursor.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

namespace dtsim::traces {

const std::vector<std::string_view>& kept_arg_keys() {
    static const std::vector<std::string_view> keys = {
        // Kineto collective metadata (MetadataFieldCatalog.h; HTA's event_args yaml)
        "Collective name", "dtype", "In msg nelems", "Out msg nelems", "In msg size", "Out msg size", "In split size",
        "Out split size", "Group size", "Process Group Name", "Process Group Description", "Process Group Ranks",
        "Rank", "Src Rank", "Dst Rank", "Seq",
        // CPU op inputs (gloo collective sizes), memcpy sizes, where a kernel ran
        "Input Dims", "Input type", "bytes", "memory bandwidth (GB/s)", "stream", "device",
        // dtsim's own
        "task", "phase", "micro_step", "layer", "bucket", "group_size", "standalone_ns", "waited_for_slowest_rank_ns"};
    return keys;
}

namespace {

namespace fs = std::filesystem;
using detail::JsonCursor;

struct PendingBeginEnd {
    std::int32_t track = 0;
    StringId name = kNoString;
    StringId category = kNoString;
    std::int64_t time_ns = 0;
    std::int32_t args_begin = 0;
    std::int32_t args_end = 0;
    std::uint64_t offset_bytes = 0;
    std::uint32_t seq = 0;  // file order, to keep ties stable
    bool begin = false;
};

struct FlowEnd {
    std::uint64_t key = 0;  // hash of (file, id, cat, name)
    std::int64_t time_ns = 0;
    std::int32_t track = 0;
    StringId name = kNoString;
    std::uint32_t seq = 0;
    char phase = 's';
    bool enclosing = true;  // bind to the enclosing slice; false: the next slice starting at time_ns
    std::int32_t span = -1;  // the slice it binds to, once resolved
};

// One arg of the event being read, decoded into buffers reused for every event.
struct KeyInfo {
    bool keep = false;
    StringId id = kNoString;
};

struct ArgScratch {
    std::string key;
    std::string value;
    bool is_number = false;
    const KeyInfo* info = nullptr;  // keep: kept on a span (kept_arg_keys or keep_all_args)
};

// A direct-mapped cache in front of the arg-key table: Kineto repeats the
// same dozen keys in every event, and a hash of the whole key per arg was
// a tenth of the reading time.
struct KeyCacheEntry {
    std::string key;
    const KeyInfo* info = nullptr;
};

// Per-file state: processes and tracks by their written pid / tid.
struct FileState {
    std::string path;
    std::int32_t file_index = 0;
    std::unordered_map<std::string, std::int32_t> track_by_key;  // pid '\x1f' tid -> track
    std::unordered_map<std::string, std::int32_t> process_by_pid;
    std::vector<std::string> process_pid;
    std::vector<std::string> process_name;
    std::vector<std::int32_t> process_sort_index;
    std::vector<std::int32_t> thread_sort_index;  // by local track, INT32_MIN when unset
    std::int32_t first_track = 0;
    std::int32_t first_span = 0;
    std::size_t first_counter = 0;
    std::size_t first_peak_part = 0;
    std::size_t first_instant = 0;
    bool object_form = false;
    bool kineto_markers = false;
    bool any_category = false;
    std::string generator;
    RankInfo info;
    bool has_distributed_rank = false;
};

// A key against a literal: a size test and a memcmp of constant size, inlined.
template <std::size_t N>
bool is(const std::string& key, const char (&literal)[N]) {
    return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

class Reader {
public:
    Reader(TraceModel& model, const ReadOptions& options) : m_(model), options_(options) {
        for (std::string_view k : kept_arg_keys()) kept_.emplace(std::string(k), KeyInfo{.keep = true, .id = m_.intern(k)});
    }

    void read_file(const std::string& path, std::int32_t file_index);
    void finish();

private:
    // ---- top level ----
    void read_top(JsonCursor& c);
    void read_events(JsonCursor& c, int depth);
    void read_event(JsonCursor& c, int depth);
    void read_args(JsonCursor& c, int depth);
    void read_text_or_number(JsonCursor& c, std::string& out, std::string_view what);
    std::int64_t read_us(JsonCursor& c, std::string_view what);
    nlohmann::json read_small_json(JsonCursor& c, int depth);
    void apply_distributed_info(const nlohmann::json& j);
    void finish_event(JsonCursor& c);
    void finish_file();

    std::int32_t track_of(const std::string& pid, const std::string& tid);
    std::int32_t track_of_slow(const std::string& pid, const std::string& tid);
    std::int32_t process_of(const std::string& pid);
    const KeyInfo& key_info(const std::string& key);
    const KeyInfo& key_info_slow(const std::string& key);
    void keep_args(std::int32_t& begin, std::int32_t& end);
    void add_memory_counter(const std::string& pid);

    // ---- resolution ----
    void match_begin_end(std::vector<PendingBeginEnd>& pending);
    void classify_file_spans_and_tracks();
    void resolve_flows();
    void order_ranks();
    void bind_flow_ends();

    TraceModel& m_;
    const ReadOptions& options_;
    FileState f_;
    std::vector<PendingBeginEnd> begin_end_;
    std::vector<FlowEnd> flow_ends_;
    std::unordered_map<std::string, KeyInfo> kept_;
    std::unordered_map<std::string, KeyInfo> seen_keys_;
    std::vector<KeyCacheEntry> key_cache_ = std::vector<KeyCacheEntry>(256);
    struct TrackCacheEntry {
        std::string pid, tid;
        std::int32_t track = -1;  // -1: empty
    };
    std::array<TrackCacheEntry, 4> track_cache_;
    std::size_t track_cache_next_ = 0;
    std::uint64_t progress_base_bytes_ = 0;

    // Scratch for the event being read; capacities are kept between events.
    std::string key_, name_, cat_, ph_, pid_, tid_, id_, bp_, scope_, num_;
    std::int64_t ts_ns_ = 0, dur_ns_ = 0;
    bool has_ts_ = false, has_dur_ = false, has_name_ = false, has_cat_ = false, has_pid_ = false, has_tid_ = false,
         has_id_ = false;
    std::vector<ArgScratch> args_;
    std::size_t arg_count_ = 0;
    std::uint64_t event_offset_ = 0;
    std::uint32_t seq_ = 0;
};

// ---- reading ---------------------------------------------------------------

void Reader::read_file(const std::string& path, std::int32_t file_index) {
    f_ = FileState{};
    track_cache_ = {};  // tracks are per file
    f_.path = path;
    f_.file_index = file_index;
    f_.first_track = static_cast<std::int32_t>(m_.tracks.size());
    f_.first_span = static_cast<std::int32_t>(m_.spans.size());
    f_.first_counter = m_.counters.size();
    f_.first_peak_part = m_.device_memory_peak.size();
    f_.first_instant = m_.instants.size();
    f_.info.source_file = path;
    detail::ByteSource source(path);
    std::function<void(std::uint64_t, std::uint64_t)> progress;
    if (options_.progress)
        progress = [this](std::uint64_t done, std::uint64_t total) {
            options_.progress(progress_base_bytes_ + done, total == 0 ? 0 : progress_base_bytes_ + total);
        };
    JsonCursor c(source, options_.chunk_bytes, progress);
    read_top(c);
    progress_base_bytes_ += source.file_size_bytes();
    finish_file();
}

void Reader::read_top(JsonCursor& c) {
    int first = c.peek();
    if (first == 0xEF) {  // a UTF-8 byte order mark is allowed
        c.advance();
        if (c.peek() != 0xBB) c.fail("not a JSON trace: the file starts with binary data (byte 0xef)");
        c.advance();
        if (c.peek() != 0xBF) c.fail("not a JSON trace: the file starts with binary data (byte 0xef)");
        c.advance();
        first = c.peek();
    }
    if (first < 0) c.fail("not a JSON trace: the file is empty (or only whitespace)");
    if (first != '{' && first != '[') {
        if (first < 0x20 || first >= 0x7F)
            c.fail(fmt::format("not a JSON trace: the file starts with binary data (byte 0x{:02x}); a trace is "
                               "JSON text, plain or gzip-compressed",
                               first));
        c.fail(fmt::format("not a JSON trace: expected '{{' (object form) or '[' (array form) at the start, found '{}'",
                           static_cast<char>(first)));
    }
    if (first == '[') {
        read_events(c, 1);
    } else {
        f_.object_form = true;
        c.advance();
        bool first_member = true;
        std::string key;
        bool have_events = false;
        while (c.next_member(key, first_member)) {
            c.path.key = &key;
            if (key == "traceEvents") {
                if (c.peek() != '[') c.fail_type("an array of events for traceEvents");
                c.path.key = nullptr;
                c.path.section = "traceEvents";
                read_events(c, 2);
                c.path.section = {};
                have_events = true;
            } else if (key == "distributedInfo") {
                f_.kineto_markers = true;
                c.path.section = "distributedInfo";
                c.path.key = nullptr;
                if (c.peek() != '{') c.fail_type("an object for distributedInfo");
                apply_distributed_info(read_small_json(c, 1));
                c.path.section = {};
            } else if (key == "deviceProperties") {
                f_.kineto_markers = true;
                const nlohmann::json j = read_small_json(c, 1);
                if (j.is_array())
                    for (const auto& d : j)
                        if (d.is_object() && d.contains("name") && d["name"].is_string())
                            f_.info.device_names.push_back(d["name"].get<std::string>());
            } else if (key == "baseTimeNanoseconds") {
                f_.kineto_markers = true;
                const int v = c.peek();
                if (v != '-' && (v < '0' || v > '9')) c.fail_type("an integer number of nanoseconds");
                c.read_number(num_);
                std::int64_t base = 0;
                const auto r = std::from_chars(num_.data(), num_.data() + num_.size(), base);
                if (r.ec != std::errc{} || r.ptr != num_.data() + num_.size())
                    c.fail(fmt::format("baseTimeNanoseconds '{}' is not an integer that fits in 64 bits", num_));
                f_.info.base_time_ns = base;
            } else if (key == "otherData") {
                const nlohmann::json j = read_small_json(c, 1);
                if (j.is_object() && j.contains("generator") && j["generator"].is_string())
                    f_.generator = j["generator"].get<std::string>();
                // dtsim's device-memory peak by category, per pid; anything else there is left alone.
                if (j.is_object() && j.contains("device_memory_peak") && j["device_memory_peak"].is_object())
                    for (const auto& [pid, parts] : j["device_memory_peak"].items()) {
                        if (!parts.is_object()) continue;
                        for (const auto& [category, bytes] : parts.items())
                            if (bytes.is_number() && bytes.get<double>() >= 0)
                                m_.device_memory_peak.push_back(MemoryPart{
                                    .rank = process_of(pid), .category = category, .bytes = bytes.get<double>()});
                    }
            } else {
                if (key == "schemaVersion" || key == "traceName") f_.kineto_markers = true;
                c.skip_value(1);
            }
            c.path.key = nullptr;
        }
        if (!have_events) c.fail("not a trace: the JSON object has no \"traceEvents\" array");
    }
    if (c.peek() >= 0) c.fail_expected("the end of the file after the trace's JSON value");
}

nlohmann::json Reader::read_small_json(JsonCursor& c, int depth) {
    std::string text;
    c.capture_value(text, depth);
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        c.fail(fmt::format("unreadable metadata: {}", e.what()));
    }
}

void Reader::apply_distributed_info(const nlohmann::json& j) {
    const std::string where = "/distributedInfo";
    const auto get_int = [&](const nlohmann::json& o, const char* key, std::int32_t& out, const std::string& at) {
        if (!o.contains(key)) return false;
        const auto& v = o[key];
        if (v.is_number_integer()) out = v.get<std::int32_t>();
        else if (v.is_string()) {
            const std::string s = v.get<std::string>();
            const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
            if (r.ec != std::errc{}) throw ParseError(f_.path, at + "/" + key, "expected an integer");
        } else {
            throw ParseError(f_.path, at + "/" + key, "expected an integer");
        }
        return true;
    };
    const auto get_str = [&](const nlohmann::json& o, const char* key) {
        if (!o.contains(key) || !o[key].is_string()) return std::string();
        return o[key].get<std::string>();
    };
    std::int32_t rank = 0;
    if (get_int(j, "rank", rank, where)) {
        f_.info.rank = rank;
        f_.has_distributed_rank = true;
    }
    get_int(j, "world_size", f_.info.world_size, where);
    f_.info.backend = get_str(j, "backend");
    if (j.contains("pg_config") && j["pg_config"].is_array()) {
        std::size_t k = 0;
        for (const auto& pg : j["pg_config"]) {
            const std::string at = fmt::format("{}/pg_config/{}", where, k++);
            if (!pg.is_object()) throw ParseError(f_.path, at, "expected an object");
            ProcessGroup g{.name = get_str(pg, "pg_name"),
                           .desc = get_str(pg, "pg_desc"),
                           .backend_config = get_str(pg, "backend_config"),
                           .size = 0,
                           .ranks = {}};
            get_int(pg, "pg_size", g.size, at);
            if (pg.contains("ranks") && pg["ranks"].is_array())
                for (const auto& r : pg["ranks"])
                    if (r.is_number_integer()) g.ranks.push_back(r.get<std::int32_t>());
            f_.info.process_groups.push_back(std::move(g));
        }
    }
}

void Reader::read_events(JsonCursor& c, int depth) {
    c.check_depth(depth);
    c.advance();  // '['
    bool first = true;
    std::int64_t index = 0;
    // The path keeps naming the last event read, so that an error between
    // events points at the one before it.
    while (c.next_element(first, "an event")) {
        c.path.element = index++;
        read_event(c, depth + 1);
    }
    c.path.element = -1;
}

void Reader::read_text_or_number(JsonCursor& c, std::string& out, std::string_view what) {
    const int v = c.peek();
    if (v == '"') {
        c.advance();
        c.read_string(out);
    } else if (v == '-' || (v >= '0' && v <= '9')) {
        c.read_number(out);
    } else {
        c.fail_type(what);
    }
}

std::int64_t Reader::read_us(JsonCursor& c, std::string_view what) {
    const int v = c.peek();
    if (v != '-' && (v < '0' || v > '9')) c.fail_type(what);
    c.read_number(num_, /*validate=*/false);
    std::int64_t ns = 0;
    if (!detail::parse_us_to_ns(num_, ns)) {
        if (!detail::valid_json_number(num_)) c.fail(fmt::format("'{}' is not a valid JSON number", num_));
        c.fail(fmt::format("{} µs does not fit in 64-bit nanoseconds", num_));
    }
    return ns;
}

void Reader::read_event(JsonCursor& c, int depth) {
    if (c.peek() != '{') c.fail_type("an event object");
    c.check_depth(depth);
    event_offset_ = c.offset_bytes();
    c.advance();
    has_ts_ = has_dur_ = has_name_ = has_cat_ = has_pid_ = has_tid_ = has_id_ = false;
    ph_.clear();
    bp_.clear();
    scope_.clear();
    arg_count_ = 0;
    bool first = true;
    while (c.next_member(key_, first)) {
        c.path.key = &key_;
        const std::string& k = key_;
        switch (k.size()) {
            case 2:
                if (is(k, "ph")) {
                    if (c.peek() != '"') c.fail_type("a string for ph (the event's phase)");
                    c.advance();
                    c.read_string(ph_);
                    break;
                }
                if (is(k, "ts")) {
                    ts_ns_ = read_us(c, "a number of microseconds for ts");
                    has_ts_ = true;
                    break;
                }
                if (is(k, "id")) {
                    read_text_or_number(c, id_, "a number or string for id");
                    has_id_ = true;
                    break;
                }
                if (is(k, "bp")) {
                    if (c.peek() != '"') c.fail_type("a string for bp");
                    c.advance();
                    c.read_string(bp_);
                    break;
                }
                c.skip_value(depth);
                break;
            case 3:
                if (is(k, "pid")) {
                    read_text_or_number(c, pid_, "a number or string for pid");
                    has_pid_ = true;
                    break;
                }
                if (is(k, "tid")) {
                    read_text_or_number(c, tid_, "a number or string for tid");
                    has_tid_ = true;
                    break;
                }
                if (is(k, "cat")) {
                    if (c.peek() != '"') c.fail_type("a string for cat");
                    c.advance();
                    c.read_string(cat_);
                    has_cat_ = true;
                    break;
                }
                if (is(k, "dur")) {
                    dur_ns_ = read_us(c, "a number of microseconds for dur");
                    if (dur_ns_ < 0) c.fail("dur is negative");
                    has_dur_ = true;
                    break;
                }
                c.skip_value(depth);
                break;
            case 4:
                if (is(k, "name")) {
                    read_text_or_number(c, name_, "a string for name");
                    has_name_ = true;
                    break;
                }
                if (is(k, "args")) {
                    read_args(c, depth + 1);
                    break;
                }
                c.skip_value(depth);
                break;
            case 1:
                if (is(k, "s")) {
                    if (c.peek() != '"') c.fail_type("a string for s (the instant's scope)");
                    c.advance();
                    c.read_string(scope_);
                    break;
                }
                c.skip_value(depth);
                break;
            default: c.skip_value(depth); break;
        }
        c.path.key = nullptr;
    }
    finish_event(c);
}

const KeyInfo& Reader::key_info(const std::string& key) {
    std::size_t h = key.size() * 131;
    if (!key.empty())
        h += static_cast<unsigned char>(key[0]) * 31u + static_cast<unsigned char>(key[key.size() - 1]) * 7u +
             static_cast<unsigned char>(key[key.size() / 2]);
    KeyCacheEntry& entry = key_cache_[h & 255];
    if (entry.info != nullptr && entry.key == key) return *entry.info;
    const KeyInfo& info = key_info_slow(key);
    entry.key = key;
    entry.info = &info;
    return info;
}

const KeyInfo& Reader::key_info_slow(const std::string& key) {
    if (auto it = kept_.find(key); it != kept_.end()) return it->second;
    auto it = seen_keys_.find(key);
    if (it == seen_keys_.end()) {
        // Key names repeat across events; at most a few hundred distinct ones.
        it = seen_keys_.emplace(key, KeyInfo{.keep = options_.keep_all_args, .id = kNoString}).first;
        if (options_.keep_all_args) it->second.id = m_.intern(key);
    }
    return it->second;
}

void Reader::read_args(JsonCursor& c, int depth) {
    const int v = c.peek();
    if (v == 'n') {
        c.read_literal();
        return;
    }
    if (v != '{') c.fail_type("an object for args");
    c.check_depth(depth);
    c.advance();
    bool first = true;
    while (c.next_member(key_, first)) {
        const KeyInfo& info = key_info(key_);
        const bool wanted = info.keep || is(key_, "name") || is(key_, "sort_index");
        const int t = c.peek();
        const bool number = t == '-' || (t >= '0' && t <= '9');
        // Numbers are counter values in a 'C' event (or one whose ph comes
        // later), and in Kineto's [memory] instants.
        const bool maybe_counter = number && (ph_.empty() || ph_ == "C" || ph_ == "i" || ph_ == "I");
        if (!wanted && !maybe_counter) {
            // Not kept on a span and not a counter value: skipped unread.
            c.skip_value(depth);
            ++m_.stats.args_not_kept;
            continue;
        }
        if (arg_count_ == args_.size()) args_.emplace_back();
        ArgScratch& a = args_[arg_count_++];
        a.key = key_;
        a.info = &info;
        a.is_number = number;
        if (number) {
            c.read_number(a.value);
        } else if (t == '"') {
            c.advance();
            c.read_string(a.value);
        } else {
            a.value.clear();
            c.capture_value(a.value, depth);
        }
    }
}

std::int32_t Reader::process_of(const std::string& pid) {
    auto it = f_.process_by_pid.find(pid);
    if (it != f_.process_by_pid.end()) return it->second;
    const auto id = static_cast<std::int32_t>(f_.process_pid.size());
    f_.process_by_pid.emplace(pid, id);
    f_.process_pid.push_back(pid);
    f_.process_name.emplace_back();
    f_.process_sort_index.push_back(id);
    return id;
}

std::int32_t Reader::track_of(const std::string& pid, const std::string& tid) {
    // Kineto alternates between a CPU thread and a GPU stream: two recent tracks answer most lookups.
    for (TrackCacheEntry& e : track_cache_)
        if (e.track >= 0 && e.pid == pid && e.tid == tid) return e.track;
    const std::int32_t track = track_of_slow(pid, tid);
    TrackCacheEntry& victim = track_cache_[track_cache_next_];
    track_cache_next_ = (track_cache_next_ + 1) % track_cache_.size();
    victim.pid = pid;
    victim.tid = tid;
    victim.track = track;
    return track;
}

std::int32_t Reader::track_of_slow(const std::string& pid, const std::string& tid) {
    num_.assign(pid);
    num_.push_back('\x1f');
    num_.append(tid);
    auto it = f_.track_by_key.find(num_);
    if (it != f_.track_by_key.end()) return it->second;
    const std::int32_t process = process_of(pid);
    const auto id = static_cast<std::int32_t>(m_.tracks.size());
    f_.track_by_key.emplace(num_, id);
    // rank holds the file's process index until finish_file maps it to a rank.
    m_.tracks.push_back(Track{.rank = process,
                              .pid = pid,
                              .tid = tid,
                              .name = {},
                              .kind = TrackKind::other,
                              .sort_index = static_cast<std::int32_t>(m_.tracks.size()) - f_.first_track,
                              .process_name = {}});
    f_.thread_sort_index.push_back(INT32_MIN);
    return id;
}

void Reader::keep_args(std::int32_t& begin, std::int32_t& end) {
    begin = static_cast<std::int32_t>(m_.args.size());
    for (std::size_t i = 0; i < arg_count_; ++i) {
        const ArgScratch& a = args_[i];
        if (!a.info->keep) {
            ++m_.stats.args_not_kept;
            continue;
        }
        m_.args.push_back(Arg{.key = a.info->id, .value = m_.intern(a.value), .is_number = a.is_number});
    }
    end = static_cast<std::int32_t>(m_.args.size());
}

// A Kineto `[memory]` instant (profile_memory=True): one sample of its
// device's "Total Allocated", as the counter "[memory] CPU" or "[memory] GPU <id>"
// (Kineto's Device Type: 0 CPU, 1 CUDA).
void Reader::add_memory_counter(const std::string& pid) {
    double total = -1, type = 0, id = 0;
    for (std::size_t i = 0; i < arg_count_; ++i) {
        const ArgScratch& a = args_[i];
        if (!a.is_number) continue;
        double* out = a.key == "Total Allocated" ? &total
                      : a.key == "Device Type"   ? &type
                      : a.key == "Device Id"     ? &id
                                                 : nullptr;
        if (out != nullptr) std::from_chars(a.value.data(), a.value.data() + a.value.size(), *out);
    }
    if (total < 0) {  // not Kineto's shape: keep it as the instant it is
        m_.instants.push_back(Instant{.track = track_of(pid, has_tid_ ? tid_ : std::string()),
                                      .name = m_.intern(name_),
                                      .category = has_cat_ ? m_.intern(cat_) : kNoString,
                                      .time_ns = ts_ns_});
        return;
    }
    const std::string series = type == 0 ? std::string("[memory] CPU") : fmt::format("[memory] GPU {}", id);
    // rank holds the process index until finish_file.
    m_.counters.push_back(
        Counter{.rank = process_of(pid), .name = m_.intern(series), .time_ns = ts_ns_, .value = total});
}

void Reader::finish_event(JsonCursor& c) {
    ++m_.stats.events;
    const auto fail_here = [&](const std::string& message) {
        throw ParseError(f_.path, c.path.render(),
                         fmt::format("event at byte {}: {}", event_offset_, message));
    };
    if (ph_.empty()) fail_here("the event has no \"ph\" (phase)");
    if (has_cat_) f_.any_category = true;
    static const std::string empty;
    const std::string& pid = has_pid_ ? pid_ : empty;
    const std::string& tid = has_tid_ ? tid_ : empty;
    const char ph = ph_.size() == 1 ? ph_[0] : '\0';
    const auto need_ts = [&] {
        if (!has_ts_) fail_here(fmt::format("a '{}' event needs \"ts\"", ph_));
    };
    switch (ph) {
        case 'X': {
            need_ts();
            if (!has_dur_) {  // as Perfetto does: an X without dur is dropped
                ++m_.stats.dropped_events;
                return;
            }
            Span s{.track = track_of(pid, tid),
                   .name = m_.intern(has_name_ ? std::string_view(name_) : std::string_view()),
                   .category = has_cat_ ? m_.intern(cat_) : kNoString,
                   .kind = SpanKind::other,
                   .start_ns = ts_ns_,
                   .dur_ns = dur_ns_,
                   .args_begin = 0,
                   .args_end = 0};
            keep_args(s.args_begin, s.args_end);
            m_.spans.push_back(s);
            return;
        }
        case 'B':
        case 'E': {
            need_ts();
            PendingBeginEnd p{.track = track_of(pid, tid),
                              .name = has_name_ ? m_.intern(name_) : kNoString,
                              .category = has_cat_ ? m_.intern(cat_) : kNoString,
                              .time_ns = ts_ns_,
                              .args_begin = 0,
                              .args_end = 0,
                              .offset_bytes = event_offset_,
                              .seq = seq_++,
                              .begin = ph == 'B'};
            if (p.begin) keep_args(p.args_begin, p.args_end);
            begin_end_.push_back(p);
            return;
        }
        case 'i':
        case 'I': {
            need_ts();
            if (name_ == "[memory]") {  // Kineto's profile_memory events: kept as a counter per device
                add_memory_counter(pid);
                return;
            }
            m_.instants.push_back(Instant{.track = track_of(pid, tid),
                                          .name = m_.intern(has_name_ ? std::string_view(name_) : std::string_view()),
                                          .category = has_cat_ ? m_.intern(cat_) : kNoString,
                                          .time_ns = ts_ns_});
            return;
        }
        case 'C': {
            need_ts();
            const std::int32_t process = process_of(pid);
            std::size_t series = 0;
            for (std::size_t i = 0; i < arg_count_; ++i) series += args_[i].is_number ? 1 : 0;
            for (std::size_t i = 0; i < arg_count_; ++i) {
                const ArgScratch& a = args_[i];
                if (!a.is_number) continue;
                double value = 0;
                std::from_chars(a.value.data(), a.value.data() + a.value.size(), value);
                const StringId id =
                    series == 1 ? m_.intern(name_) : m_.intern(fmt::format("{}.{}", has_name_ ? name_ : "", a.key));
                // rank holds the process index until finish_file.
                m_.counters.push_back(Counter{.rank = process, .name = id, .time_ns = ts_ns_, .value = value});
            }
            return;
        }
        case 'M': {
            const ArgScratch* name_arg = nullptr;
            const ArgScratch* sort_arg = nullptr;
            for (std::size_t i = 0; i < arg_count_; ++i) {
                if (args_[i].key == "name") name_arg = &args_[i];
                if (args_[i].key == "sort_index") sort_arg = &args_[i];
            }
            std::int32_t sort_index = 0;
            if (sort_arg != nullptr) {
                double v = 0;
                std::from_chars(sort_arg->value.data(), sort_arg->value.data() + sort_arg->value.size(), v);
                sort_index = static_cast<std::int32_t>(std::clamp(v, -2e9, 2e9));
            }
            if (name_ == "thread_name" && name_arg != nullptr) {
                const std::int32_t t = track_of(pid, tid);
                m_.tracks[static_cast<std::size_t>(t)].name = name_arg->value;
            } else if (name_ == "process_name" && name_arg != nullptr) {
                f_.process_name[static_cast<std::size_t>(process_of(pid))] = name_arg->value;
            } else if (name_ == "thread_sort_index" && sort_arg != nullptr) {
                const std::int32_t t = track_of(pid, tid);
                f_.thread_sort_index[static_cast<std::size_t>(t - f_.first_track)] = sort_index;
            } else if (name_ == "process_sort_index" && sort_arg != nullptr) {
                f_.process_sort_index[static_cast<std::size_t>(process_of(pid))] = sort_index;
            }
            return;
        }
        case 's':
        case 't':
        case 'f': {
            need_ts();
            if (!has_id_) {
                ++m_.stats.dropped_events;
                return;
            }
            std::uint64_t key = mix(static_cast<std::uint64_t>(f_.file_index), std::hash<std::string>{}(id_));
            key = mix(key, std::hash<std::string>{}(cat_) * 3 + (has_cat_ ? 1 : 0));
            key = mix(key, std::hash<std::string>{}(name_) * 3 + (has_name_ ? 1 : 0));
            flow_ends_.push_back(FlowEnd{.key = key,
                                         .time_ns = ts_ns_,
                                         .track = track_of(pid, tid),
                                         .name = m_.intern(has_name_ ? std::string_view(name_) : std::string_view()),
                                         .seq = seq_++,
                                         .phase = ph,
                                         .enclosing = ph != 'f' || bp_ == "e"});
            return;
        }
        default: ++m_.stats.unknown_phase_events; return;
    }
}

// ---- per-file resolution ----------------------------------------------------

void Reader::finish_file() {
    const bool dtsim = f_.generator == "dtsim";
    if (dtsim) {
        f_.generator = "dtsim";
    } else if (f_.kineto_markers) {
        f_.generator = "kineto";
    } else if (!f_.object_form && !f_.any_category) {
        f_.generator = "kineto-legacy";
    } else if (f_.generator.empty()) {
        f_.generator = "chrome";
    }
    f_.info.generator = f_.generator;
    if (dtsim) f_.info.backend = "dtsim";

    // Ranks: a dtsim trace holds one rank per pid; any other file is one rank.
    std::vector<std::int32_t> rank_of_process(f_.process_pid.size(), 0);
    if (dtsim) {
        for (std::size_t p = 0; p < f_.process_pid.size(); ++p) {
            RankInfo info = f_.info;
            std::int32_t pid_rank = static_cast<std::int32_t>(m_.ranks.size());
            const std::string& pid = f_.process_pid[p];
            std::from_chars(pid.data(), pid.data() + pid.size(), pid_rank);
            info.rank = pid_rank;
            rank_of_process[p] = static_cast<std::int32_t>(m_.ranks.size());
            m_.ranks.push_back(std::move(info));
        }
        if (f_.process_pid.empty()) m_.ranks.push_back(f_.info);
    } else {
        if (!f_.has_distributed_rank) f_.info.rank = static_cast<std::int32_t>(m_.ranks.size());
        std::fill(rank_of_process.begin(), rank_of_process.end(), static_cast<std::int32_t>(m_.ranks.size()));
        m_.ranks.push_back(f_.info);
    }
    std::unordered_map<std::int32_t, std::int32_t> appearance_in_rank;
    for (std::size_t t = static_cast<std::size_t>(f_.first_track); t < m_.tracks.size(); ++t) {
        Track& track = m_.tracks[t];
        const auto process = static_cast<std::size_t>(track.rank);
        track.rank = rank_of_process[process];
        track.sort_index = appearance_in_rank[track.rank]++;
        track.process_name = f_.process_name[process];
        if (track.name.empty()) track.name = "tid " + track.tid;
        const std::int32_t sort = f_.thread_sort_index[t - static_cast<std::size_t>(f_.first_track)];
        if (sort != INT32_MIN) track.sort_index = sort;
    }
    for (std::size_t i = f_.first_counter; i < m_.counters.size(); ++i)
        m_.counters[i].rank = rank_of_process[static_cast<std::size_t>(m_.counters[i].rank)];
    for (std::size_t i = f_.first_peak_part; i < m_.device_memory_peak.size(); ++i)
        m_.device_memory_peak[i].rank = rank_of_process[static_cast<std::size_t>(m_.device_memory_peak[i].rank)];

    match_begin_end(begin_end_);
    begin_end_.clear();
    classify_file_spans_and_tracks();
}

void Reader::match_begin_end(std::vector<PendingBeginEnd>& pending) {
    // Per track in time order (file order for ties), B opens and E closes the
    // innermost open slice; anything else is not properly nested.
    std::sort(pending.begin(), pending.end(), [](const PendingBeginEnd& a, const PendingBeginEnd& b) {
        if (a.track != b.track) return a.track < b.track;
        if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
        return a.seq < b.seq;
    });
    std::vector<const PendingBeginEnd*> open;
    const auto where = [&](const PendingBeginEnd& p) {
        const Track& t = m_.tracks[static_cast<std::size_t>(p.track)];
        return fmt::format("pid {} tid {}", t.pid, t.tid);
    };
    const auto never_closed = [&] {
        const PendingBeginEnd& b = *open.back();
        throw ParseError(f_.path, "/traceEvents",
                         fmt::format("event at byte {}: the 'B' event '{}' on {} is never closed by an 'E' event",
                                     b.offset_bytes, m_.str(b.name), where(b)));
    };
    for (std::size_t i = 0; i < pending.size(); ++i) {
        const PendingBeginEnd& p = pending[i];
        if (i > 0 && pending[i - 1].track != p.track && !open.empty()) never_closed();
        if (p.begin) {
            open.push_back(&p);
            continue;
        }
        if (open.empty())
            throw ParseError(f_.path, "/traceEvents",
                             fmt::format("event at byte {}: an 'E' event on {} closes nothing: no 'B' is open there "
                                         "at that time (B/E events must nest on their track)",
                                         p.offset_bytes, where(p)));
        const PendingBeginEnd& b = *open.back();
        if (p.name != kNoString && b.name != kNoString && p.name != b.name)
            throw ParseError(f_.path, "/traceEvents",
                             fmt::format("event at byte {}: the 'E' event for '{}' on {} would close '{}' (opened at "
                                         "byte {}): B/E events must nest on their track",
                                         p.offset_bytes, m_.str(p.name), where(p), m_.str(b.name), b.offset_bytes));
        open.pop_back();
        m_.spans.push_back(Span{.track = b.track,
                                .name = b.name == kNoString ? m_.intern("") : b.name,
                                .category = b.category,
                                .kind = SpanKind::other,
                                .start_ns = b.time_ns,
                                .dur_ns = p.time_ns - b.time_ns,
                                .args_begin = b.args_begin,
                                .args_end = b.args_end});
    }
    if (!open.empty()) never_closed();
}

void Reader::classify_file_spans_and_tracks() {
    const bool dtsim = f_.generator == "dtsim";
    std::unordered_map<std::uint64_t, SpanKind> cache;
    const std::size_t track_count = m_.tracks.size() - static_cast<std::size_t>(f_.first_track);
    std::vector<std::uint8_t> gpu(track_count, 0), cpu(track_count, 0);
    for (std::size_t i = static_cast<std::size_t>(f_.first_span); i < m_.spans.size(); ++i) {
        Span& s = m_.spans[i];
        const std::uint64_t k =
            (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.category)) << 32) | static_cast<std::uint32_t>(s.name);
        auto it = cache.find(k);
        if (it == cache.end()) it = cache.emplace(k, classify_span(m_.str(s.category), m_.str(s.name), dtsim)).first;
        s.kind = it->second;
        const auto local = static_cast<std::size_t>(s.track - f_.first_track);
        const std::string_view cat = m_.str(s.category);
        const auto is = [&](std::string_view want) {
            if (cat.size() != want.size()) return false;
            for (std::size_t j = 0; j < cat.size(); ++j)
                if (static_cast<char>(std::tolower(static_cast<unsigned char>(cat[j]))) != want[j]) return false;
            return true;
        };
        if (is("kernel") || is("gpu_memcpy") || is("gpu_memset") || is("gpu_user_annotation"))
            gpu[local] = 1;
        else if (s.kind != SpanKind::other || cat.empty())
            cpu[local] = 1;
    }
    for (std::size_t t = 0; t < track_count; ++t) {
        Track& track = m_.tracks[static_cast<std::size_t>(f_.first_track) + t];
        track.kind = dtsim ? TrackKind::dtsim_stream
                     : gpu[t] ? TrackKind::gpu_stream
                     : cpu[t] ? TrackKind::cpu_thread
                              : TrackKind::other;
    }
}

// ---- whole-model resolution -------------------------------------------------

void Reader::bind_flow_ends() {
    // Ends visited in (track, time) order walk each track's sorted slices
    // once, instead of a binary search (a cache miss per step) per end.
    std::vector<std::uint32_t> order(flow_ends_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        const FlowEnd& x = flow_ends_[a];
        const FlowEnd& y = flow_ends_[b];
        if (x.track != y.track) return x.track < y.track;
        if (x.time_ns != y.time_ns) return x.time_ns < y.time_ns;
        return a < b;
    });
    std::int32_t track = -1;
    std::size_t begin = 0, end = 0, after = 0, at_or_after = 0;
    for (const std::uint32_t i : order) {
        FlowEnd& e = flow_ends_[i];
        if (e.track != track) {
            track = e.track;
            begin = after = at_or_after = static_cast<std::size_t>(m_.track_span_begin[static_cast<std::size_t>(track)]);
            end = static_cast<std::size_t>(m_.track_span_begin[static_cast<std::size_t>(track) + 1]);
        }
        while (after < end && m_.spans[after].start_ns <= e.time_ns) ++after;
        while (at_or_after < end && m_.spans[at_or_after].start_ns < e.time_ns) ++at_or_after;
        if (!e.enclosing) {
            e.span = at_or_after < end ? static_cast<std::int32_t>(at_or_after) : -1;
            continue;
        }
        // The latest-starting slice that still covers the time is the
        // innermost; a bounded look-back keeps a pathological file linear.
        constexpr int kLookBack = 1024;
        std::size_t k = after;
        for (int steps = 0; k > begin && steps < kLookBack; ++steps) {
            --k;
            if (m_.spans[k].start_ns + m_.spans[k].dur_ns >= e.time_ns) {
                e.span = static_cast<std::int32_t>(k);
                break;
            }
        }
    }
}

void Reader::resolve_flows() {
    bind_flow_ends();
    // Within one id, in time order (events need not be sorted in the file):
    // at one time a start goes before a step before an end, then file order.
    const auto phase_rank = [](char ph) { return ph == 's' ? 0 : ph == 't' ? 1 : 2; };
    std::sort(flow_ends_.begin(), flow_ends_.end(), [&](const FlowEnd& a, const FlowEnd& b) {
        if (a.key != b.key) return a.key < b.key;
        if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
        if (a.phase != b.phase) return phase_rank(a.phase) < phase_rank(b.phase);
        return a.seq < b.seq;
    });
    std::vector<std::pair<std::uint32_t, Flow>> flows;  // by seq of the start, for file order
    for (std::size_t i = 0; i < flow_ends_.size();) {
        std::size_t j = i;
        while (j < flow_ends_.size() && flow_ends_[j].key == flow_ends_[i].key) ++j;
        // Within one id: s opens, t steps are passed through, f closes.
        const FlowEnd* start = nullptr;
        for (std::size_t k = i; k < j; ++k) {
            const FlowEnd& e = flow_ends_[k];
            if (e.phase == 's') {
                if (start != nullptr) ++m_.stats.dropped_events;  // an s never closed
                start = &e;
            } else if (e.phase == 'f') {
                if (start == nullptr) {
                    ++m_.stats.dropped_events;
                    continue;
                }
                flows.emplace_back(start->seq, Flow{.name = start->name, .from_span = start->span, .to_span = e.span});
                start = nullptr;
            }
        }
        if (start != nullptr) ++m_.stats.dropped_events;
        i = j;
    }
    std::sort(flows.begin(), flows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    m_.flows.reserve(flows.size());
    for (const auto& [seq, flow] : flows) m_.flows.push_back(flow);
    flow_ends_.clear();
    flow_ends_.shrink_to_fit();
}

void Reader::order_ranks() {
    // Files that all name distinct ranks are put in rank order; otherwise argument order.
    std::vector<std::int32_t> order(m_.ranks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        return m_.ranks[static_cast<std::size_t>(a)].rank < m_.ranks[static_cast<std::size_t>(b)].rank;
    });
    for (std::size_t i = 1; i < order.size(); ++i)
        if (m_.ranks[static_cast<std::size_t>(order[i])].rank == m_.ranks[static_cast<std::size_t>(order[i - 1])].rank)
            return;
    std::vector<std::int32_t> new_index(order.size());
    std::vector<RankInfo> ranks;
    ranks.reserve(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        new_index[static_cast<std::size_t>(order[i])] = static_cast<std::int32_t>(i);
        ranks.push_back(std::move(m_.ranks[static_cast<std::size_t>(order[i])]));
    }
    m_.ranks = std::move(ranks);
    for (Track& t : m_.tracks) t.rank = new_index[static_cast<std::size_t>(t.rank)];
    for (Counter& c : m_.counters) c.rank = new_index[static_cast<std::size_t>(c.rank)];
    for (MemoryPart& p : m_.device_memory_peak) p.rank = new_index[static_cast<std::size_t>(p.rank)];
}

void Reader::finish() {
    order_ranks();
    sort_spans(m_);
    resolve_flows();
    std::stable_sort(m_.counters.begin(), m_.counters.end(), [&](const Counter& a, const Counter& b) {
        if (a.rank != b.rank) return a.rank < b.rank;
        if (a.name != b.name) return m_.str(a.name) < m_.str(b.name);
        return a.time_ns < b.time_ns;
    });
}

bool is_trace_file_name(const std::string& name) {
    const auto ends = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends(".json") || ends(".json.gz");
}

// The files a path stands for: itself, or a directory's *.json / *.json.gz by name.
std::vector<std::string> expand(const std::string& path) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) return {path};
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.is_regular_file() && is_trace_file_name(entry.path().filename().string()))
            files.push_back(entry.path().string());
    if (ec) throw ParseError(path, "", fmt::format("cannot list the directory: {}", ec.message()));
    // Where tensorboard_trace_handler's <worker>.<id>.pt.trace.json files are,
    // they are the traces and other JSON beside them (summaries) is not.
    const auto kineto_name = [](const std::string& f) {
        return f.find(".pt.trace.json") != std::string::npos;
    };
    if (std::any_of(files.begin(), files.end(), kineto_name))
        files.erase(std::remove_if(files.begin(), files.end(), [&](const std::string& f) { return !kineto_name(f); }),
                    files.end());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw ParseError(path, "", "the directory holds no *.json or *.json.gz trace files");
    return files;
}

// The JSON text a file holds: its size, or for gzip the uncompressed size its
// trailer records (ISIZE, modulo 4 GiB: the smallest value at least the
// compressed size is taken, a lower bound). 0 when the file cannot be read
// (reading it then reports why).
std::uint64_t text_bytes(const std::string& file) {
    std::error_code ec;
    const std::uint64_t size = fs::file_size(file, ec);
    if (ec || size < 18) return ec ? 0 : size;
    std::ifstream in(file, std::ios::binary);
    unsigned char magic[2] = {};
    if (!in.read(reinterpret_cast<char*>(magic), 2) || magic[0] != 0x1f || magic[1] != 0x8b) return size;
    unsigned char tail[4] = {};
    in.seekg(-4, std::ios::end);
    if (!in.read(reinterpret_cast<char*>(tail), 4)) return size;
    std::uint64_t isize = std::uint64_t{tail[0]} | std::uint64_t{tail[1]} << 8 | std::uint64_t{tail[2]} << 16 |
                          std::uint64_t{tail[3]} << 24;
    while (isize < size) isize += std::uint64_t{1} << 32;
    return isize;
}

// Memory the model takes per byte of JSON text, measured on a 1 GB Kineto GPU
// trace: 0.19 with the default kept args (bench/results/trace_import.md), so
// 0.25 with a margin. With every arg kept (the GUI, below 64 MiB) the bound is
// 1.0, NOT measured: Kineto's ~20 args per kernel at 12 bytes each plus their
// strings may approach the text's own size.
constexpr double kModelBytesPerTextByte = 0.25;
constexpr double kModelBytesPerTextByteAllArgs = 1.0;

// Refuses, before reading a byte, traces whose model would not fit in memory.
void check_fits_memory(const std::vector<std::string>& files, const ReadOptions& options) {
    std::uint64_t text = 0;
    for (const auto& f : files) text += text_bytes(f);
    const double per_byte = options.keep_all_args ? kModelBytesPerTextByteAllArgs : kModelBytesPerTextByte;
    check_fits_host_memory(static_cast<std::uint64_t>(static_cast<double>(text) * per_byte), 1.0,
                           fmt::format("reading {} trace file{} ({} of JSON text)", files.size(),
                                       files.size() == 1 ? "" : "s",
                                       format_bytes(static_cast<std::int64_t>(std::min<std::uint64_t>(text, INT64_MAX)))),
                           "import fewer ranks at a time, or record fewer steps (torch.profiler's schedule "
                           "active=N)");
}

}  // namespace

TraceModel read_traces(const std::vector<std::string>& paths, const ReadOptions& options) {
    std::vector<std::string> files;
    for (const std::string& p : paths)
        for (std::string& file : expand(p)) files.push_back(std::move(file));
    check_fits_memory(files, options);
    TraceModel model;
    Reader reader(model, options);
    std::int32_t index = 0;
    for (const std::string& file : files) reader.read_file(file, index++);
    reader.finish();
    return model;
}

TraceModel read_trace(const std::string& path, const ReadOptions& options) { return read_traces({path}, options); }

}  // namespace dtsim::traces
