#include "json_cursor.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

namespace dtsim::traces::detail {
namespace {

// 1 for bytes that can appear in a string as they are: not '"', '\\', a
// control character or the start of a multi-byte UTF-8 sequence.
constexpr std::array<bool, 256> make_plain_table() {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = true;
    t['"'] = false;
    t['\\'] = false;
    return t;
}
constexpr std::array<bool, 256> kPlain = make_plain_table();

// The first byte in [p, end) that is not plain (see kPlain), eight bytes at a
// time: a word has none when no byte is '"', '\\', below 0x20 or above 0x7f.
// Strings are most of a trace's bytes; a byte-at-a-time loop was the largest
// single cost of reading.
static_assert(std::endian::native == std::endian::little, "skip_plain reads words little-endian");

inline const char* skip_plain(const char* p, const char* end) {
    constexpr std::uint64_t ones = 0x0101010101010101ULL;
    constexpr std::uint64_t highs = 0x8080808080808080ULL;
    while (end - p >= 8) {
        std::uint64_t w;
        std::memcpy(&w, p, 8);
        const std::uint64_t quote = w ^ (ones * '"');
        const std::uint64_t slash = w ^ (ones * '\\');
        const std::uint64_t special =
            (((quote - ones) & ~quote) | ((slash - ones) & ~slash) | (w - ones * 0x20) | w) & highs;
        // False positives only occur above a true one (borrows run upwards), so
        // the lowest flagged byte is the first special one (little-endian).
        if (special != 0) return p + (std::countr_zero(special) >> 3);
        p += 8;
    }
    while (p < end && kPlain[static_cast<unsigned char>(*p)]) ++p;
    return p;
}

void append_utf8(std::string* out, std::uint32_t cp) {
    if (out == nullptr) return;
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

}  // namespace

bool valid_json_number(std::string_view t) {
    // Most numbers in a trace are plain integers.
    if (!t.empty() && t.size() <= 18 && (t[0] != '0' || t.size() == 1)) {
        bool digits = true;
        for (char c : t) digits = digits && c >= '0' && c <= '9';
        if (digits) return true;
    }
    std::size_t i = 0;
    const auto digit = [&](std::size_t k) { return k < t.size() && t[k] >= '0' && t[k] <= '9'; };
    if (i < t.size() && t[i] == '-') ++i;
    if (!digit(i)) return false;
    if (t[i] == '0') {
        ++i;
    } else {
        while (digit(i)) ++i;
    }
    if (i < t.size() && t[i] == '.') {
        ++i;
        if (!digit(i)) return false;
        while (digit(i)) ++i;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
        if (!digit(i)) return false;
        while (digit(i)) ++i;
    }
    return i == t.size();
}

namespace {

std::string describe_byte(int c) {
    if (c < 0) return "the end of the file";
    if (c >= 0x21 && c < 0x7F) return fmt::format("'{}'", static_cast<char>(c));
    return fmt::format("byte 0x{:02x}", c);
}

}  // namespace

// ---- ByteSource ----------------------------------------------------------

ByteSource::ByteSource(const std::string& path) : path_(path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw ParseError(path, "", fmt::format("cannot open the trace: {}", std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw ParseError(path, "", "is a directory, not a trace file");
    file_size_bytes_ = static_cast<std::uint64_t>(st.st_size);
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) throw ParseError(path, "", fmt::format("cannot open the trace: {}", std::strerror(errno)));
    unsigned char magic[2] = {0, 0};
    const std::size_t n = std::fread(magic, 1, 2, file_);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        // gzip whatever the file is called; zlib reads the rest.
        std::fclose(file_);
        file_ = nullptr;
        gz_ = gzopen(path.c_str(), "rb");
        if (gz_ == nullptr) throw ParseError(path, "", "cannot open the gzip-compressed trace");
        gzbuffer(static_cast<gzFile>(gz_), 1u << 18);
    } else {
        std::rewind(file_);
    }
}

ByteSource::~ByteSource() {
    if (map_ != nullptr) ::munmap(map_, map_bytes_);
    if (file_ != nullptr) std::fclose(file_);
    if (gz_ != nullptr) gzclose(static_cast<gzFile>(gz_));
}

std::string_view ByteSource::next(std::size_t chunk_bytes) {
    if (gz_ != nullptr) {
        buf_.resize(chunk_bytes);
        const auto cap = static_cast<unsigned>(std::min<std::size_t>(chunk_bytes, std::numeric_limits<int>::max() / 2));
        const int got = gzread(static_cast<gzFile>(gz_), buf_.data(), cap);
        int code = Z_OK;
        const char* msg = gzerror(static_cast<gzFile>(gz_), &code);
        // zlib reports a stream cut short as Z_BUF_ERROR ("unexpected end of file").
        if (code == Z_BUF_ERROR) throw ParseError(path_, "", "the gzip stream is truncated (the file was cut short)");
        if (got < 0 || (code != Z_OK && code != Z_STREAM_END))
            throw ParseError(path_, "", fmt::format("corrupt gzip data: {}", msg != nullptr ? msg : "unknown error"));
        return {buf_.data(), static_cast<std::size_t>(got)};
    }
    if (map_ != nullptr) {
        ::munmap(map_, map_bytes_);
        map_ = nullptr;
    }
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    if (chunk_bytes >= (std::size_t{64} << 10) && plain_consumed_bytes_ % page == 0) {
        if (plain_consumed_bytes_ >= file_size_bytes_) return {};
        const std::size_t window = (chunk_bytes + page - 1) / page * page;
        map_bytes_ = static_cast<std::size_t>(std::min<std::uint64_t>(window, file_size_bytes_ - plain_consumed_bytes_));
        void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, ::fileno(file_),
                         static_cast<off_t>(plain_consumed_bytes_));
        if (m != MAP_FAILED) {
            map_ = m;
            plain_consumed_bytes_ += map_bytes_;
            return {static_cast<const char*>(m), map_bytes_};
        }
        // Not mappable (a pipe, /proc): read it instead.
    }
    buf_.resize(chunk_bytes);
    if (std::fseek(file_, static_cast<long>(plain_consumed_bytes_), SEEK_SET) != 0 && plain_consumed_bytes_ > 0)
        throw ParseError(path_, "", fmt::format("read error: {}", std::strerror(errno)));
    const std::size_t got = std::fread(buf_.data(), 1, chunk_bytes, file_);
    if (got < chunk_bytes && std::ferror(file_) != 0)
        throw ParseError(path_, "", fmt::format("read error: {}", std::strerror(errno)));
    plain_consumed_bytes_ += got;
    return {buf_.data(), got};
}

std::uint64_t line_of_offset(const std::string& path, std::uint64_t offset) {
    try {
        ByteSource again(path);
        std::uint64_t line = 1, seen = 0;
        for (;;) {
            const std::string_view chunk = again.next(std::size_t{1} << 20);
            if (chunk.empty()) break;
            const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(chunk.size(), offset - seen));
            line += static_cast<std::uint64_t>(std::count(chunk.data(), chunk.data() + take, '\n'));
            seen += take;
            if (seen >= offset) break;
        }
        return line;
    } catch (const ParseError&) {
        return 0;  // the file changed or cannot be read again: no line
    }
}

std::uint64_t ByteSource::consumed_file_bytes() const {
    if (gz_ != nullptr) return static_cast<std::uint64_t>(std::max<z_off_t>(gzoffset(static_cast<gzFile>(gz_)), 0));
    return plain_consumed_bytes_;
}

// ---- JsonPath ------------------------------------------------------------

std::string JsonPath::render() const {
    std::string out;
    if (!section.empty()) out += fmt::format("/{}", section);
    if (element >= 0) out += fmt::format("/{}", element);
    if (key != nullptr && !key->empty()) out += fmt::format("/{}", *key);
    return out.empty() ? std::string("/") : out;
}

// ---- JsonCursor ----------------------------------------------------------

JsonCursor::JsonCursor(ByteSource& source, std::size_t chunk_bytes,
                       std::function<void(std::uint64_t, std::uint64_t)> progress)
    : source_(source), chunk_bytes_(std::max<std::size_t>(chunk_bytes, 16)), progress_(std::move(progress)) {}

bool JsonCursor::fill() {
    chunk_offset_bytes_ += static_cast<std::uint64_t>(end_ - chunk_begin_);
    const std::string_view chunk = source_.next(chunk_bytes_);
    chunk_begin_ = p_ = chunk.data();
    end_ = chunk.data() + chunk.size();
    if (progress_) progress_(source_.consumed_file_bytes(), source_.file_size_bytes());
    return !chunk.empty();
}

std::uint64_t JsonCursor::line() const { return line_of_offset(source_.path(), offset_bytes()); }

void JsonCursor::fail(std::string_view message) const {
    throw ParseError(source_.path(), path.render(),
                     fmt::format("byte {} (line {}){}: {}", offset_bytes(), line(),
                                 source_.gzip() ? " of the decompressed text" : "", message));
}

void JsonCursor::fail_expected(std::string_view what) const {
    const int c = p_ < end_ ? static_cast<unsigned char>(*p_) : -1;
    if (c < 0) fail(fmt::format("expected {}, but the file ends here (truncated?)", what));
    fail(fmt::format("expected {}, found {}", what, describe_byte(c)));
}

void JsonCursor::fail_type(std::string_view expected) {
    const int c = peek();
    std::string_view found = "something else";
    switch (c) {
        case '"': found = "a string"; break;
        case '{': found = "an object"; break;
        case '[': found = "an array"; break;
        case 't':
        case 'f': found = "a boolean"; break;
        case 'n': found = "null"; break;
        case -1: fail_expected(expected);
        default:
            if (c == '-' || (c >= '0' && c <= '9')) found = "a number";
            else fail_expected(expected);
    }
    fail(fmt::format("expected {}, found {}", expected, found));
}

void JsonCursor::check_depth(int depth) {
    if (depth > kMaxDepth)
        fail(fmt::format("JSON nested more than {} levels deep; a trace never needs that (corrupt file?)", kMaxDepth));
}

int JsonCursor::next_raw() {
    if (p_ == end_ && !fill()) return -1;
    return static_cast<unsigned char>(*p_++);
}

template <bool Keep>
void JsonCursor::scan_string(std::string* out) {
    for (;;) {
        const char* p = p_;
        const char* const end = end_;
        p = skip_plain(p, end);
        if constexpr (Keep) out->append(p_, p);
        p_ = p;
        if (p == end) {
            if (!fill()) fail("a string is not closed: the file ends inside it (truncated?)");
            continue;
        }
        const auto c = static_cast<unsigned char>(*p);
        if (c == '"') {
            p_ = p + 1;
            return;
        }
        if (c == '\\') {
            ++p_;
            read_escape(out);
        } else if (c < 0x20) {
            fail(fmt::format("control character 0x{:02x} inside a string (binary data, or an unescaped newline?)", c));
        } else {
            read_utf8(out);
        }
    }
}

void JsonCursor::read_string(std::string& out) {
    out.clear();
    scan_string<true>(&out);
}

void JsonCursor::skip_string() { scan_string<false>(nullptr); }

void JsonCursor::read_escape(std::string* out) {
    const int c = next_raw();
    char plain = 0;
    switch (c) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
            const auto hex4 = [this]() -> std::uint32_t {
                std::uint32_t v = 0;
                for (int i = 0; i < 4; ++i) {
                    const int h = next_raw();
                    v <<= 4;
                    if (h >= '0' && h <= '9') v |= static_cast<std::uint32_t>(h - '0');
                    else if (h >= 'a' && h <= 'f') v |= static_cast<std::uint32_t>(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F') v |= static_cast<std::uint32_t>(h - 'A' + 10);
                    else fail("expected four hex digits after \\u in a string");
                }
                return v;
            };
            std::uint32_t cp = hex4();
            if (cp >= 0xD800 && cp < 0xDC00) {
                // A high surrogate must be followed by \u and a low one; a lone one becomes U+FFFD.
                if (p_ + 1 < end_ && p_[0] == '\\' && p_[1] == 'u') {
                    p_ += 2;
                    const std::uint32_t low = hex4();
                    if (low >= 0xDC00 && low < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    } else {
                        append_utf8(out, 0xFFFD);
                        cp = low >= 0xD800 && low < 0xE000 ? 0xFFFD : low;
                    }
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                cp = 0xFFFD;
            }
            append_utf8(out, cp);
            return;
        }
        case -1: fail("a string is not closed: the file ends inside it (truncated?)");
        default: fail(fmt::format("invalid escape \\{} in a string", describe_byte(c)));
    }
    if (out != nullptr) out->push_back(plain);
}

void JsonCursor::read_utf8(std::string* out) {
    const int lead = next_raw();
    int extra = 0;
    std::uint32_t min_cp = 0;
    std::uint32_t cp = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        extra = 1;
        cp = static_cast<std::uint32_t>(lead & 0x1F);
        min_cp = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        extra = 2;
        cp = static_cast<std::uint32_t>(lead & 0x0F);
        min_cp = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        extra = 3;
        cp = static_cast<std::uint32_t>(lead & 0x07);
        min_cp = 0x10000;
    } else {
        --p_;
        fail(fmt::format("byte 0x{:02x} is not UTF-8: the trace must be UTF-8 text (binary data?)", lead));
    }
    char bytes[4] = {static_cast<char>(lead), 0, 0, 0};
    for (int i = 1; i <= extra; ++i) {
        const int c = next_raw();
        if (c < 0x80 || c > 0xBF) {
            if (c >= 0 && p_ > chunk_begin_) --p_;
            fail("invalid UTF-8 sequence inside a string: the trace must be UTF-8 text");
        }
        bytes[i] = static_cast<char>(c);
        cp = (cp << 6) | static_cast<std::uint32_t>(c & 0x3F);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000))
        fail("invalid UTF-8 sequence inside a string: the trace must be UTF-8 text");
    if (out != nullptr) out->append(bytes, static_cast<std::size_t>(extra + 1));
}

namespace {
inline bool number_char(char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
}
}  // namespace

void JsonCursor::read_number(std::string& out, bool validate) {
    const char* p = p_;
    const char* const end = end_;
    while (p < end && *p >= '0' && *p <= '9') ++p;
    if (p < end && !number_char(*p) && p > p_ && (*p_ != '0' || p == p_ + 1)) {
        out.assign(p_, p);  // a plain integer, valid as it stands
        p_ = p;
        return;
    }
    while (p < end && number_char(*p)) ++p;
    if (p < end) {
        // The whole number is inside this chunk: one copy.
        out.assign(p_, p);
        p_ = p;
    } else {
        out.assign(p_, p);
        p_ = p;
        while (fill()) {
            p = p_;
            while (p < end_ && number_char(*p)) ++p;
            out.append(p_, p);
            p_ = p;
            if (p < end_) break;
        }
    }
    if (out.empty()) fail_expected("a number");
    if (validate && !valid_json_number(out)) fail(fmt::format("'{}' is not a valid JSON number", out));
}

void JsonCursor::skip_number() {
    const char* p = p_;
    const char* const end = end_;
    // Plain integers (most numbers in a trace) need no second look.
    while (p < end && *p >= '0' && *p <= '9') ++p;
    if (p < end && !number_char(*p) && p > p_ && (*p_ != '0' || p == p_ + 1)) {
        p_ = p;
        return;
    }
    while (p < end && number_char(*p)) ++p;
    if (p < end && p > p_) {
        if (!valid_json_number(std::string_view(p_, static_cast<std::size_t>(p - p_)))) {
            read_number(scratch_);  // reports the error
        }
        p_ = p;
        return;
    }
    read_number(scratch_);
}

std::string_view JsonCursor::read_literal() {
    scratch_.clear();
    for (;;) {
        while (p_ < end_ && *p_ >= 'a' && *p_ <= 'z' && scratch_.size() < 8) scratch_.push_back(*p_++);
        if (p_ < end_ || scratch_.size() >= 8 || !fill()) break;
    }
    if (scratch_ == "true") return "true";
    if (scratch_ == "false") return "false";
    if (scratch_ == "null") return "null";
    if (scratch_.empty()) fail_expected("a value");
    fail(fmt::format("expected a value, found '{}'", scratch_));
}

bool JsonCursor::next_member(std::string& key, bool& first) {
    int c = peek();
    if (first) {
        first = false;
        if (c == '}') {
            ++p_;
            return false;
        }
    } else {
        if (c == '}') {
            ++p_;
            return false;
        }
        if (c != ',') fail_expected("',' or '}' after a member of an object");
        ++p_;
        c = peek();
    }
    if (c != '"') fail_expected("a member name in double quotes");
    ++p_;
    // Member names are short and plain: find the quote and the colon in
    // place, and fall back to the general string reader otherwise.
    const char* q = skip_plain(p_, end_);
    if (q + 1 < end_ && *q == '"') {
        key.assign(p_, q);
        p_ = q + 1;
        if (*p_ == ':') {
            ++p_;
            return true;
        }
    } else {
        read_string(key);
    }
    expect(':', "':' after a member name");
    return true;
}

bool JsonCursor::next_element(bool& first, std::string_view after_what) {
    const int c = peek();
    if (c == ']') {
        ++p_;
        return false;
    }
    if (first) {
        first = false;
        return true;
    }
    if (c != ',') fail_expected(fmt::format("',' or ']' after {}", after_what));
    ++p_;
    return true;
}

void JsonCursor::skip_value(int depth) {
    const int c = peek();
    switch (c) {
        case '"':
            ++p_;
            skip_string();
            return;
        case '{': {
            check_depth(depth + 1);
            ++p_;
            bool first = true;
            while (next_member(scratch_, first)) skip_value(depth + 1);
            return;
        }
        case '[': {
            check_depth(depth + 1);
            ++p_;
            bool first = true;
            while (next_element(first, "an array element")) skip_value(depth + 1);
            return;
        }
        case 't':
        case 'f':
        case 'n': read_literal(); return;
        default:
            if (c == '-' || (c >= '0' && c <= '9')) {
                skip_number();
                return;
            }
            fail_expected("a value");
    }
}

void JsonCursor::capture_value(std::string& out, int depth) {
    const int c = peek();
    switch (c) {
        case '"': {
            ++p_;
            // Verbatim, escapes included, so the text stays valid JSON.
            out.push_back('"');
            for (;;) {
                const char* s = p_;
                p_ = skip_plain(p_, end_);
                out.append(s, p_);
                if (p_ == end_) {
                    if (!fill()) fail("a string is not closed: the file ends inside it (truncated?)");
                    continue;
                }
                const auto b = static_cast<unsigned char>(*p_);
                if (b == '"') {
                    ++p_;
                    break;
                }
                if (b == '\\') {
                    ++p_;
                    const int e = next_raw();
                    out.push_back('\\');
                    if (e == 'u') {
                        out.push_back('u');
                        for (int i = 0; i < 4; ++i) {
                            const int h = next_raw();
                            if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
                                fail("expected four hex digits after \\u in a string");
                            out.push_back(static_cast<char>(h));
                        }
                    } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                               e == 't') {
                        out.push_back(static_cast<char>(e));
                    } else {
                        fail(fmt::format("invalid escape \\{} in a string", describe_byte(e)));
                    }
                } else if (b < 0x20) {
                    fail(fmt::format("control character 0x{:02x} inside a string", b));
                } else {
                    read_utf8(&out);
                }
            }
            out.push_back('"');
            return;
        }
        case '{': {
            check_depth(depth + 1);
            ++p_;
            out.push_back('{');
            bool first = true;
            std::string key;
            while (next_member(key, first)) {
                if (out.back() != '{') out.push_back(',');
                // Re-escape the decoded key minimally (quotes, backslashes, controls).
                out.push_back('"');
                for (char k : key) {
                    if (k == '"' || k == '\\') {
                        out.push_back('\\');
                        out.push_back(k);
                    } else if (static_cast<unsigned char>(k) < 0x20) {
                        out += fmt::format("\\u{:04x}", static_cast<int>(k));
                    } else {
                        out.push_back(k);
                    }
                }
                out += "\":";
                capture_value(out, depth + 1);
            }
            out.push_back('}');
            return;
        }
        case '[': {
            check_depth(depth + 1);
            ++p_;
            out.push_back('[');
            bool first = true;
            while (next_element(first, "an array element")) {
                if (out.back() != '[') out.push_back(',');
                capture_value(out, depth + 1);
            }
            out.push_back(']');
            return;
        }
        case 't':
        case 'f':
        case 'n': out += read_literal(); return;
        default:
            if (c == '-' || (c >= '0' && c <= '9')) {
                read_number(scratch_);
                out += scratch_;
                return;
            }
            fail_expected("a value");
    }
}

// ---- exact microseconds -> nanoseconds ------------------------------------

bool parse_us_to_ns(std::string_view t, std::int64_t& ns) {
    // The JSON number grammar is checked on the way (no separate pass).
    if (t.empty()) return false;
    std::size_t i = 0;
    const bool negative = t[0] == '-';
    if (negative) ++i;
    // Collect the significant digits and where the decimal point sits.
    std::uint64_t mantissa = 0;
    int point_shift = 0;     // value = mantissa * 10^point_shift (before exponent)
    int dropped_first = -1;  // first digit that did not fit, for rounding
    bool overflow = false;
    const auto take = [&](char d, bool fractional) {
        const auto digit = static_cast<std::uint64_t>(d - '0');
        if (!overflow && mantissa <= (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
            mantissa = mantissa * 10 + digit;
            if (fractional) --point_shift;
        } else {
            if (!overflow) dropped_first = static_cast<int>(digit);
            overflow = true;
            if (!fractional) ++point_shift;
        }
    };
    const std::size_t int_begin = i;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) take(t[i], false);
    if (i == int_begin || (t[int_begin] == '0' && i > int_begin + 1)) return false;  // no digit, or a leading zero
    if (i < t.size() && t[i] == '.') {
        const std::size_t frac_begin = ++i;
        for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) take(t[i], true);
        if (i == frac_begin) return false;
    }
    int exponent = 0;
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        bool exp_negative = false;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) exp_negative = t[i++] == '-';
        const std::size_t exp_begin = i;
        for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) exponent = std::min(exponent * 10 + (t[i] - '0'), 100000);
        if (i == exp_begin) return false;
        if (exp_negative) exponent = -exponent;
    }
    if (i != t.size()) return false;
    // µs -> ns is a further factor of 1000.
    int shift = point_shift + exponent + 3;
    std::uint64_t value = mantissa;
    if (value == 0) shift = 0;
    if (shift >= 0) {
        for (; shift > 0; --shift) {
            if (value > std::numeric_limits<std::uint64_t>::max() / 10) return false;
            value *= 10;
        }
    } else {
        int last_dropped = dropped_first;
        for (; shift < 0 && value > 0; ++shift) {
            last_dropped = static_cast<int>(value % 10);
            value /= 10;
        }
        if (shift < 0) last_dropped = 0;  // everything shifted out: below 0.5 ns
        if (last_dropped >= 5) ++value;
    }
    if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    ns = negative ? -static_cast<std::int64_t>(value) : static_cast<std::int64_t>(value);
    return true;
}

}  // namespace dtsim::traces::detail
