// Private to dtsim_traces: a streaming JSON tokenizer over fixed-size chunks
// of a file (plain, or gzip detected by its magic bytes), for the trace
// reader. It never holds more than one chunk of the text; strings are decoded
// into caller-owned buffers that keep their capacity, so steady-state reading
// allocates nothing per event.
//
// Contract: every method either advances over well-formed JSON (RFC 8259,
// strings checked to be UTF-8) or throws dtsim::ParseError naming the file,
// the JSON path being read, the byte offset and line, and what was expected.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::traces::detail {

// The bytes of one file, decompressed when it starts with gzip's magic bytes
// (1f 8b) whatever its name.
class ByteSource {
public:
    explicit ByteSource(const std::string& path);
    ~ByteSource();
    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;

    // The next bytes, about `chunk_bytes` of them; empty at the end. Valid
    // until the next call. Plain files of chunks of 64 KiB and up are mapped a
    // window at a time (no copy out of the page cache: that copy was 8 % of
    // the reading time); gzip and small chunks are read into a buffer.
    // Throws ParseError on a read error or corrupt gzip data.
    std::string_view next(std::size_t chunk_bytes);
    std::uint64_t file_size_bytes() const { return file_size_bytes_; }
    // How much of the file on disk has been consumed (compressed bytes for gzip).
    std::uint64_t consumed_file_bytes() const;
    bool gzip() const { return gz_ != nullptr; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::FILE* file_ = nullptr;
    void* gz_ = nullptr;  // gzFile, kept opaque so zlib.h stays out of this header
    std::uint64_t file_size_bytes_ = 0;
    std::uint64_t plain_consumed_bytes_ = 0;
    std::vector<char> buf_;
    void* map_ = nullptr;  // the mapped window of a plain file, if any
    std::size_t map_bytes_ = 0;
};

// The line (1-based) of byte `offset` of the (decompressed) text of `path`,
// found by reading it again: only error messages need it, and counting
// newlines as the text streams by cost 4 % of the reading time.
std::uint64_t line_of_offset(const std::string& path, std::uint64_t offset);

// Where the reader is, for error messages: "/traceEvents/12/ts".
struct JsonPath {
    std::string_view section;      // e.g. "traceEvents", "distributedInfo"; empty at the top
    std::int64_t element = -1;     // index inside the section's array, -1 if none
    const std::string* key = nullptr;  // the member being read inside that element
    std::string render() const;
};

class JsonCursor {
public:
    static constexpr std::size_t kDefaultChunkBytes = std::size_t{1} << 20;
    static constexpr int kMaxDepth = 64;  // nesting deeper than this is refused (no trace needs it)

    JsonCursor(ByteSource& source, std::size_t chunk_bytes,
               std::function<void(std::uint64_t, std::uint64_t)> progress);

    JsonPath path;

    // The next non-whitespace byte, not consumed; -1 at the end of the text.
    int peek() {
        for (;;) {
            // Locals, not members, in hot loops: a char read may alias `this`.
            const char* p = p_;
            const char* const end = end_;
            while (p < end) {
                const auto c = static_cast<unsigned char>(*p);
                // One comparison for most bytes: JSON's whitespace is all <= ' '.
                if (c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
                    ++p;
                    continue;
                }
                p_ = p;
                return c;
            }
            p_ = p;
            if (!fill()) return -1;
        }
    }
    // Consumes the byte peek() returned.
    void advance() { ++p_; }
    // Consumes `c` (after whitespace) or fails with "expected <what>".
    void expect(char c, std::string_view what) {
        if (peek() != static_cast<unsigned char>(c)) fail_expected(what);
        ++p_;
    }

    // After the opening quote: the decoded string into `out` (cleared first).
    void read_string(std::string& out);
    // After the opening quote: the string skipped, checked.
    void skip_string();
    // The number at the cursor as its JSON text into `out`, validated unless
    // the caller validates it itself (parse_us_to_ns does).
    void read_number(std::string& out, bool validate = true);
    // The number at the cursor, validated and skipped.
    void skip_number();
    // true / false / null at the cursor; returns which word.
    std::string_view read_literal();

    // Any value: skipped, or appended to `out` as compact JSON text (strings
    // verbatim, escapes kept). `depth` is the nesting depth of the value.
    void skip_value(int depth);
    void capture_value(std::string& out, int depth);

    // Object iteration: after '{' was consumed, next_member() reads `"key":`
    // into `key` and returns true, or consumes '}' and returns false.
    bool next_member(std::string& key, bool& first);
    // Array iteration: after '[' was consumed, returns true when another
    // element follows (cursor at it) or consumes ']' and returns false.
    bool next_element(bool& first, std::string_view after_what);

    void check_depth(int depth);

    [[noreturn]] void fail(std::string_view message) const;
    [[noreturn]] void fail_expected(std::string_view what) const;
    // Message for a value of the wrong type at the cursor.
    [[noreturn]] void fail_type(std::string_view expected);

    std::uint64_t offset_bytes() const { return chunk_offset_bytes_ + static_cast<std::uint64_t>(p_ - chunk_begin_); }
    std::uint64_t line() const;

private:
    bool fill();
    template <bool Keep>
    void scan_string(std::string* out);
    void read_escape(std::string* out);
    void read_utf8(std::string* out);
    int next_raw();  // one byte, -1 at the end

    ByteSource& source_;
    std::size_t chunk_bytes_;
    const char* chunk_begin_ = nullptr;
    const char* p_ = nullptr;
    const char* end_ = nullptr;
    std::uint64_t chunk_offset_bytes_ = 0;
    std::function<void(std::uint64_t, std::uint64_t)> progress_;
    std::string scratch_;
};

// "1234.567" (µs, as Chrome traces write it) -> 1234567 ns exactly, decimal
// digits handled as text, never through a double; more than three fraction
// digits round to the nearest ns (half away from zero); exponents allowed.
// Returns false when the text is not a number or does not fit in int64 ns.
bool parse_us_to_ns(std::string_view text, std::int64_t& ns);

// RFC 8259's number grammar.
bool valid_json_number(std::string_view text);

}  // namespace dtsim::traces::detail
