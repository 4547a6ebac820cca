// Reading JSON files with errors that name the file and the field, and writing
// files without ever leaving a half-written one behind.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace dtsim {

using Json = nlohmann::json;

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

    double number(const std::string& key) const;
    double number_or(const std::string& key, double fallback) const;
    std::int64_t integer(const std::string& key) const;
    std::string string(const std::string& key) const;
    std::string string_or(const std::string& key, const std::string& fallback) const;
    bool boolean_or(const std::string& key, bool fallback) const;

    [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

private:
    const Json* value_;
    std::string file_;
    std::string path_;
};

// Parses a JSON file; a missing file or a syntax error names the file.
Json read_json_file(const std::string& path);

// Writes to path atomically: a temporary file beside it, then a rename, so an
// existing file is never truncated by a failed write.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace dtsim
