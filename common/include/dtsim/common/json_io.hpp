// Reading JSON files with errors that name the file and the field, and writing
// files without ever leaving a half-written one behind.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtsim {

using Json = nlohmann::json;

// The range of a number field. The message of a value outside it states the
// range and why nothing larger is valid.
struct Bounds {
    double min = 0;
    bool min_exclusive = false;  // sizes, rates and times must be > 0
    double max = 1e15;
    std::string_view why_max = "";  // e.g. "no memory or link reaches 1 PB/s"
};

// A JSON value with the file it came from and its JSON-pointer path, so that
// every accessor can report exactly which field was wrong.
class JsonView {
public:
    JsonView(const Json& value, std::string file, std::string path = "")
        : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

    const Json& value() const { return *value_; }
    const std::string& file() const { return file_; }
    const std::string& path() const { return path_; }

    bool has(const std::string& key) const;
    JsonView at(const std::string& key) const;  // required member
    JsonView at(std::size_t index) const;       // array element
    std::size_t size() const;                   // array length; requires an array
    // Array length, refusing more than max_items elements (`what` names them and says why).
    std::size_t size_at_most(std::size_t max_items, std::string_view what) const;

    double number(const std::string& key) const;  // finite: 1e999 parses as infinity and is refused
    double number_or(const std::string& key, double fallback) const;
    double number_within(const std::string& key, const Bounds& bounds) const;
    std::int64_t integer(const std::string& key) const;  // fits in int64
    std::int64_t integer_within(const std::string& key, const Bounds& bounds) const;
    std::string string(const std::string& key) const;
    std::string string_or(const std::string& key, const std::string& fallback) const;
    bool boolean_or(const std::string& key, bool fallback) const;

    [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

private:
    const Json* value_;
    std::string file_;
    std::string path_;
};

// A value as a message quotes it: its JSON text, cut short after 40 characters
// (an array of a million points is not printed), and overflowing numbers named.
std::string json_excerpt(const Json& value);

// "a number > 0 and <= 1e+06 (why)": the range a Bounds allows, for messages.
std::string describe_bounds(const Bounds& bounds, std::string_view noun = "a number");
// Empty for a finite value within bounds, else "expected <range>, found <value>".
std::string check_bounds(double value, const Bounds& bounds, std::string_view noun = "a number");

// A JSON file nests its arrays and objects at most this deep: dtsim's formats
// need 4 levels, and a deeper file is no configuration but could exhaust the
// stack of a recursive reader.
inline constexpr int kMaxJsonDepth = 128;
// Configuration, calibration and nccl-tests files are at most this large: the
// largest calibration `dtsim calibrate` writes is under 1 MiB, and reading a
// trace or a data set by mistake should fail at once, not fill the memory.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{16} << 20;

// Reads a whole file of at most kMaxConfigFileBytes; errors name the file.
std::string read_config_file(const std::string& path);

// Checks that text read from `file` is text at all: not empty, not gzip, no
// NUL or control bytes, valid UTF-8. `expected` completes "expected ..." in
// the message for an empty file (e.g. "a JSON object").
void check_text(std::string_view text, const std::string& file, std::string_view expected);

// check_text, then nesting at most kMaxJsonDepth deep; throws ParseError.
void check_json_text(std::string_view text, const std::string& file, std::string_view expected);

// A parser's exception as a ParseError: a syntax error as "not valid JSON at
// line L, column C (byte B): <what was expected>", a number no double holds
// (1e999) with its line and column.
[[noreturn]] void throw_json_syntax_error(const Json::exception& e, std::string_view text, const std::string& file);

// check_json_text, then parses; a syntax error names the file, line and column.
Json parse_json_text(std::string_view text, const std::string& file, std::string_view expected = "a JSON object");

// Parses a JSON file; a missing, binary or malformed file names the file.
Json read_json_file(const std::string& path);

// Writes to path atomically: a temporary file beside it, then a rename, so an
// existing file is never truncated by a failed write.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace dtsim
