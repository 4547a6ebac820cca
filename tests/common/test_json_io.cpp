// read_json_file's checks before and around parsing, and JsonView's number
// accessors: what a user's file can hold that JSON parsers accept or trip on.
#include "dtsim/common/error.hpp"
#include "dtsim/common/json_io.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <string>

using dtsim::Json;
using dtsim::JsonView;
using dtsim::ParseError;

namespace {

std::string error_of(const std::string& text) {
    try {
        dtsim::parse_json_text(text, "f.json");
    } catch (const ParseError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("json_io: text that is not JSON is named for what it is") {
    CHECK(error_of("") == "f.json: the file is empty; expected a JSON object");
    CHECK(error_of("\x1f\x8b\x08") == "f.json: the file is gzip-compressed; decompress it first (gunzip)");
    CHECK(error_of(std::string("{\"a\":\0}", 7)) ==
          "f.json: the file is binary data, not text (byte 0x00 at offset 5); expected a JSON object");
    CHECK(error_of("{\n\"caf\xe9\": 1}") ==
          "f.json: the file is not UTF-8 text: byte 0xe9 at offset 6 (line 2, column 5) is not part of a UTF-8 "
          "character; save the file as UTF-8");
    // Overlong forms and surrogates are not UTF-8 either.
    CHECK_THAT(error_of("\"\xc0\xaf\""), Catch::Contains("byte 0xc0 at offset 1"));
    CHECK_THAT(error_of("\"\xed\xa0\x80\""), Catch::Contains("byte 0xed at offset 1"));
    CHECK(error_of("{\"caf\xc3\xa9\": \"\xf0\x9f\x98\x80\"}").empty());
    CHECK(error_of("{\"a\": [1, 2}") ==
          "f.json: not valid JSON at line 1, column 12 (byte 11): syntax error while parsing array - unexpected '}'; "
          "expected ']'");
}

TEST_CASE("json_io: nesting is bounded before the parser recurses") {
    const auto nested = [](int depth) {
        std::string s(static_cast<std::size_t>(depth), '[');
        return s.append(static_cast<std::size_t>(depth), ']');
    };
    CHECK(error_of(nested(dtsim::kMaxJsonDepth)).empty());
    CHECK_THAT(error_of(nested(dtsim::kMaxJsonDepth + 1)),
               Catch::StartsWith("f.json: arrays and objects nest deeper than 128 levels at line 1, column 129"));
    // Brackets inside strings, escaped quotes included, do not count.
    std::string brackets_in_string = "[\"";
    brackets_in_string.append(500, '[').append("\\\"\"]");
    CHECK(error_of(brackets_in_string).empty());
}

TEST_CASE("json_io: a file larger than a configuration is refused before it is read") {
    dtsim::test::TempDir dir;
    const std::string path = dir.file("big.json");
    std::ofstream(path) << '[' << std::string(dtsim::kMaxConfigFileBytes, ' ') << ']';
    CHECK_THROWS_WITH(dtsim::read_json_file(path), Catch::Contains("big.json: the file is 16.0 MiB; dtsim reads "
                                                                   "configuration, calibration and nccl-tests files "
                                                                   "of at most 16 MiB"));
}

TEST_CASE("json_io: numbers that overflow are refused with the field") {
    // 1e999 parses as an out_of_range error, not infinity; a Json built in code can hold one.
    CHECK(error_of("{\n  \"a\": 1e999}") ==
          "f.json: the number 1e999 at line 2, column 8 (byte 9) is too large for a double (magnitude over 1.8e308)");
    Json j = Json::parse(R"({"big": 18446744073709551615, "ok": 9223372036854775807, "f": 2.5, "neg": -3})");
    j["inf"] = std::numeric_limits<double>::infinity();
    const JsonView v(j, "f.json", "/x");
    CHECK_THROWS_WITH(v.number("inf"), "f.json: field '/x/inf': expected a finite number, found one too large for a "
                                       "double (magnitude over 1.8e308)");
    CHECK_THROWS_WITH(v.integer("big"), "f.json: field '/x/big': expected an integer that fits in 64 bits (at most "
                                        "9223372036854775807), found 18446744073709551615");
    CHECK(v.integer("ok") == 9223372036854775807);
    CHECK_THROWS_WITH(v.integer("f"), "f.json: field '/x/f': expected an integer, found 2.5");
    const dtsim::Bounds b{.min = 0, .min_exclusive = true, .max = 100, .why_max = "a percentage"};
    CHECK_THROWS_WITH(v.number_within("neg", b),
                      "f.json: field '/x/neg': expected a number > 0 and <= 100 (a percentage), found -3");
    CHECK(v.number_within("f", b) == 2.5);
}

TEST_CASE("json_io: errors are one line and quote values briefly") {
    CHECK(std::string(ParseError("f.json", "/a", "bad\nvalue").what()) == "f.json: field '/a': bad\\nvalue");
    Json many = Json::array();
    for (int i = 0; i < 100; ++i) many.push_back(1);
    CHECK(dtsim::json_excerpt(many) == "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,...");
    CHECK(dtsim::json_excerpt(Json(std::numeric_limits<double>::infinity())) == "a number too large for a double");
}
