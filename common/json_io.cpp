#include "dtsim/common/json_io.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace dtsim {
namespace {

const char* type_name(const Json& v) {
    return v.type_name();
}

// 1-based line and column of a byte offset.
struct Position {
    std::size_t line = 1;
    std::size_t column = 1;
};

Position position_of(std::string_view text, std::size_t offset) {
    Position p;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++p.line;
            p.column = 1;
        } else {
            ++p.column;
        }
    }
    return p;
}

// The length of the UTF-8 sequence at text[i], or 0 where it is invalid
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    if (c < 0x80) return 1;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (i + n > text.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (std::size_t k = 2; k < n; ++k)
        if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
    return n;
}

// 1e+06 and 1e+15 as such, 1048576 and 2.5 exactly: the shortest text a reader takes in.
std::string format_number(double x) {
    const bool integral = x == std::floor(x) && std::fabs(x) < 9e15;
    if (integral && std::fabs(x) < 1e6) return fmt::format("{}", static_cast<std::int64_t>(x));
    const std::string short_form = fmt::format("{:g}", x);
    if (std::strtod(short_form.c_str(), nullptr) == x) return short_form;
    if (integral) return fmt::format("{}", static_cast<std::int64_t>(x));
    return fmt::format("{}", x);
}

}  // namespace

std::string json_excerpt(const Json& value) {
    if (value.is_number_float() && !std::isfinite(value.get<double>())) return "a number too large for a double";
    std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > 40) {
        std::size_t cut = 37;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
        text = text.substr(0, cut) + "...";
    }
    return text;
}

std::string describe_bounds(const Bounds& b, std::string_view noun) {
    std::string lower = b.min_exclusive ? fmt::format("> {}", format_number(b.min))
                                        : fmt::format(">= {}", format_number(b.min));
    std::string out = fmt::format("{} {} and <= {}", noun, lower, format_number(b.max));
    if (!b.why_max.empty()) out += fmt::format(" ({})", b.why_max);
    return out;
}

std::string check_bounds(double x, const Bounds& b, std::string_view noun) {
    if (!std::isfinite(x)) return fmt::format("expected {}, found {}", describe_bounds(b, noun), x);
    if (x < b.min || (b.min_exclusive && x == b.min) || x > b.max)
        return fmt::format("expected {}, found {}", describe_bounds(b, noun), format_number(x));
    return {};
}

bool JsonView::has(const std::string& key) const {
    return value_->is_object() && value_->contains(key);
}

void JsonView::fail(const std::string& key, const std::string& expected) const {
    std::string field = key.empty() ? path_ : path_ + "/" + key;
    throw ParseError(file_, field, expected);
}

JsonView JsonView::at(const std::string& key) const {
    if (!value_->is_object()) fail("", fmt::format("expected an object, found {}", type_name(*value_)));
    auto it = value_->find(key);
    if (it == value_->end()) fail(key, "missing required field");
    return JsonView(*it, file_, path_ + "/" + key);
}

JsonView JsonView::at(std::size_t index) const {
    if (!value_->is_array()) fail("", fmt::format("expected an array, found {}", type_name(*value_)));
    if (index >= value_->size()) fail(std::to_string(index), "index out of range");
    return JsonView((*value_)[index], file_, path_ + "/" + std::to_string(index));
}

std::size_t JsonView::size() const {
    if (!value_->is_array()) fail("", fmt::format("expected an array, found {}", type_name(*value_)));
    return value_->size();
}

std::size_t JsonView::size_at_most(std::size_t max_items, std::string_view what) const {
    const std::size_t n = size();
    if (n > max_items) fail("", fmt::format("{} elements; expected at most {} {}", n, max_items, what));
    return n;
}

double JsonView::number(const std::string& key) const {
    JsonView v = at(key);
    if (!v.value().is_number()) fail(key, fmt::format("expected a number, found {}", type_name(v.value())));
    const double x = v.value().get<double>();
    if (!std::isfinite(x))
        fail(key, "expected a finite number, found one too large for a double (magnitude over 1.8e308)");
    return x;
}

double JsonView::number_or(const std::string& key, double fallback) const {
    return has(key) ? number(key) : fallback;
}

double JsonView::number_within(const std::string& key, const Bounds& bounds) const {
    const double x = number(key);
    if (std::string why = check_bounds(x, bounds); !why.empty()) fail(key, why);
    return x;
}

std::int64_t JsonView::integer(const std::string& key) const {
    JsonView v = at(key);
    if (v.value().is_number_float()) {
        if (!std::isfinite(v.value().get<double>()))
            fail(key, "expected an integer, found a number too large for a double (magnitude over 1.8e308)");
        fail(key, fmt::format("expected an integer, found {}", v.value().dump()));
    }
    if (!v.value().is_number_integer()) fail(key, fmt::format("expected an integer, found {}", type_name(v.value())));
    if (v.value().is_number_unsigned() &&
        v.value().get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(key, fmt::format("expected an integer that fits in 64 bits (at most {}), found {}",
                              std::numeric_limits<std::int64_t>::max(), v.value().dump()));
    return v.value().get<std::int64_t>();
}

std::int64_t JsonView::integer_within(const std::string& key, const Bounds& bounds) const {
    const std::int64_t x = integer(key);
    if (!check_bounds(static_cast<double>(x), bounds).empty())
        fail(key, fmt::format("expected {}, found {}", describe_bounds(bounds, "an integer"), x));
    return x;
}

std::string JsonView::string(const std::string& key) const {
    JsonView v = at(key);
    if (!v.value().is_string()) fail(key, fmt::format("expected a string, found {}", type_name(v.value())));
    return v.value().get<std::string>();
}

std::string JsonView::string_or(const std::string& key, const std::string& fallback) const {
    return has(key) ? string(key) : fallback;
}

bool JsonView::boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    JsonView v = at(key);
    if (!v.value().is_boolean()) fail(key, fmt::format("expected true or false, found {}", type_name(v.value())));
    return v.value().get<bool>();
}

void check_text(std::string_view text, const std::string& file, std::string_view expected) {
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
        throw ParseError(file, "", fmt::format("the file is empty; expected {}", expected));
    if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
        throw ParseError(file, "", "the file is gzip-compressed; decompress it first (gunzip)");
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            throw ParseError(file, "",
                             fmt::format("the file is binary data, not text (byte 0x{:02x} at offset {}); expected {}",
                                         c, i, expected));
        }
        if (c == 0x7f) {
            throw ParseError(file, "",
                             fmt::format("the file is binary data, not text (byte 0x7f at offset {}); expected {}", i,
                                         expected));
        }
        const std::size_t n = utf8_sequence_length(text, i);
        if (n == 0) {
            const Position p = position_of(text, i);
            throw ParseError(file, "",
                             fmt::format("the file is not UTF-8 text: byte 0x{:02x} at offset {} (line {}, column {}) "
                                         "is not part of a UTF-8 character; save the file as UTF-8",
                                         c, i, p.line, p.column));
        }
        i += n;
    }
}

void check_json_text(std::string_view text, const std::string& file, std::string_view expected) {
    check_text(text, file, expected);
    // Nesting, counted outside strings, before a parser recurses into it.
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\')
                ++i;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth) {
                const Position p = position_of(text, i);
                throw ParseError(file, "",
                                 fmt::format("arrays and objects nest deeper than {} levels at line {}, column {} "
                                             "(byte {}); dtsim's files nest a few levels, so this is not one of them",
                                             kMaxJsonDepth, p.line, p.column, i));
            }
        } else if (c == ']' || c == '}') {
            if (depth > 0) --depth;
        }
    }
}

void throw_json_syntax_error(const Json::exception& e, std::string_view text, const std::string& file) {
    // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while ...".
    std::string what = e.what();
    if (auto bracket = what.find("] "); what.starts_with("[json.exception.") && bracket != std::string::npos)
        what = what.substr(bracket + 2);
    if (const auto* parse = dynamic_cast<const Json::parse_error*>(&e)) {
        if (auto colon = what.find(": ", what.find("parse error")); colon != std::string::npos)
            what = what.substr(colon + 2);
        // e.byte is 1-based: the byte after the last one read.
        const std::size_t offset = parse->byte > 0 ? std::min<std::size_t>(parse->byte - 1, text.size()) : 0;
        const Position p = position_of(text, offset);
        throw ParseError(file, "",
                         fmt::format("not valid JSON at line {}, column {} (byte {}): {}", p.line, p.column, offset,
                                     what));
    }
    // out_of_range 406: "number overflow parsing '1e999'", a number no double holds.
    const auto quote = what.find('\'');
    if (e.id == 406 && quote != std::string::npos && what.back() == '\'') {
        const std::string number = what.substr(quote + 1, what.size() - quote - 2);
        const std::size_t offset = std::min(text.find(number), text.size());
        const Position p = position_of(text, offset);
        throw ParseError(file, "",
                         fmt::format("the number {} at line {}, column {} (byte {}) is too large for a double "
                                     "(magnitude over 1.8e308)",
                                     number, p.line, p.column, offset));
    }
    throw ParseError(file, "", fmt::format("not valid JSON: {}", what));
}

Json parse_json_text(std::string_view text, const std::string& file, std::string_view expected) {
    check_json_text(text, file, expected);
    try {
        return Json::parse(text);
    } catch (const Json::exception& e) {
        throw_json_syntax_error(e, text, file);
    }
}

std::string read_config_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw ParseError(path, "", "is a directory, not a file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw ParseError(path, "", "cannot open the file (does it exist and is it readable?)");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0) throw ParseError(path, "", "cannot read the file (is it a regular file?)");
    if (static_cast<std::uint64_t>(size) > kMaxConfigFileBytes)
        throw ParseError(path, "",
                         fmt::format("the file is {:.1f} MiB; dtsim reads configuration, calibration and nccl-tests "
                                     "files of at most {} MiB (the largest calibration is under 1 MiB; is this a "
                                     "trace or a data set?)",
                                     static_cast<double>(size) / (1 << 20), kMaxConfigFileBytes >> 20));
    in.seekg(0, std::ios::beg);
    std::string text(static_cast<std::size_t>(size), '\0');
    in.read(text.data(), size);
    if (!in) throw ParseError(path, "", "cannot read the file");
    return text;
}

Json read_json_file(const std::string& path) {
    return parse_json_text(read_config_file(path), path);
}

void write_file_atomically(const std::string& path, const std::string& content) {
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(fmt::format("cannot write '{}': the directory does not exist or is not writable", path));
        out << content;
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw Error(fmt::format("writing '{}' failed (disk full?); the previous file is untouched", path));
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw Error(fmt::format("cannot replace '{}'; the previous file is untouched", path));
    }
}

}  // namespace dtsim
