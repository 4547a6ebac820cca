// The catalogue of malformed inputs (tests/data/malformed/cases.txt) through
// the real dtsim binary: each case's stderr must be exactly its one expected
// line and its exit code the expected one. Lines are
//
//   dtsim arguments | expected stderr line | expected exit code
//
// run in tests/data/malformed/, so files are named as a user names them.
// {gen} stands for a scratch directory of inputs too large to commit (made
// here: a 17 MiB calibration, arrays of 20,000 elements). DTSIM_UPDATE_GOLDEN=1
// rewrites the expected lines and codes; review the diff as a newcomer would
// read each message: does it name the file, the field and what was expected?
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <sys/wait.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using dtsim::test::read_text;

namespace {

const fs::path kCatalogue = fs::path(DTSIM_SOURCE_DIR) / "tests/data/malformed";

struct Case {
    std::size_t line_index = 0;  // in the file's lines
    std::string args;
    std::string expected_err;
    int exit_code = 0;
};

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t");
    const auto e = s.find_last_not_of(" \t");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// "args | message | code": the first " | " ends the arguments, the last one starts the code.
std::vector<Case> parse_cases(const std::vector<std::string>& lines) {
    std::vector<Case> cases;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        if (trim(l).empty() || trim(l)[0] == '#') continue;
        const auto first = l.find(" | ");
        const auto last = l.rfind(" | ");
        if (first == std::string::npos || first == last) FAIL("cases.txt line " << i + 1 << ": expected args | stderr | code");
        cases.push_back({.line_index = i,
                         .args = trim(l.substr(0, first)),
                         .expected_err = trim(l.substr(first + 3, last - first - 3)),
                         .exit_code = std::stoi(l.substr(last + 3))});
    }
    return cases;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (auto pos = s.find(from); !from.empty() && pos != std::string::npos; pos = s.find(from, pos + to.size()))
        s.replace(pos, from.size(), to);
    return s;
}

struct Run {
    int exit_code = -1;
    std::string err;
};

Run run_in_catalogue(const std::string& args, const fs::path& scratch) {
    const std::string cmd = fmt::format("cd '{}' && '{}' {} >'{}' 2>'{}'", kCatalogue.string(), DTSIM_CLI_PATH, args,
                                        (scratch / "stdout.txt").string(), (scratch / "stderr.txt").string());
    const int status = std::system(cmd.c_str());
    return {.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1, .err = read_text(scratch / "stderr.txt")};
}

// A valid calibration (the catalogue's base) with `points` collective points.
std::string calibration_with_points(std::size_t points) {
    std::string pts;
    for (std::size_t i = 0; i < points; ++i) pts += fmt::format("{}[{},20.5]", i ? "," : "", 1024 * (i + 1));
    std::string base = read_text(kCatalogue / "cal_valid.json");
    return replace_all(base, "[[1024, 20.5], [1048576, 40.0]]", fmt::format("[{}]", pts));
}

// The inputs too large to commit.
void generate_inputs(const fs::path& gen) {
    std::ofstream(gen / "cal_20000_points.json") << calibration_with_points(20000);
    {
        // 17 MiB: a calibration whose notes are padded past the 16 MiB limit.
        std::string base = read_text(kCatalogue / "cal_valid.json");
        std::ofstream(gen / "cal_17mib.json") << replace_all(
            base, "\"source\": \"measured\"",
            fmt::format("\"source\": \"measured\", \"notes\": \"{}\"", std::string(17u << 20, 'x')));
    }
    fs::create_directories(gen / "a_directory.json");
    {
        std::string values;
        for (int i = 1; i <= 20000; ++i) values += fmt::format("{}{}", i > 1 ? "," : "", i);
        std::ofstream(gen / "space_20000_values.json") << "{\"micro_batch\": [" << values << "]}";
    }
    {
        std::string table = read_text(kCatalogue / "nccl_valid.txt");
        const auto footer = table.find("# Out of bounds");
        std::string rows;
        for (int i = 1; i <= 20001; ++i)
            rows += fmt::format("{} {} float sum -1 20.5 0.00 0.00 0 20.4 0.00 0.00 0\n", 4 * i, i);
        std::ofstream(gen / "nccl_20001_rows.txt") << table.substr(0, footer) << rows << table.substr(footer);
    }
    std::ofstream(gen / "kept.json") << "the previous file\n";
}

}  // namespace

TEST_CASE("malformed inputs: every case of tests/data/malformed/cases.txt gives its one-line error") {
    dtsim::test::TempDir scratch;
    const fs::path gen = scratch.path() / "gen";
    fs::create_directories(gen);
    generate_inputs(gen);

    const fs::path file = kCatalogue / "cases.txt";
    std::vector<std::string> lines = lines_of(read_text(file));
    const std::vector<Case> cases = parse_cases(lines);
    CHECK(cases.size() >= 40);
    const bool update = std::getenv("DTSIM_UPDATE_GOLDEN") != nullptr;
    for (const Case& c : cases) {
        const std::string args = replace_all(c.args, "{gen}", gen.string());
        INFO("cases.txt line " << c.line_index + 1 << ": dtsim " << args);
        const Run r = run_in_catalogue(args, scratch.path());
        std::string err = r.err;
        if (!err.empty() && err.back() == '\n') err.pop_back();
        CHECK(err.find('\n') == std::string::npos);  // one line
        if (update) {
            lines[c.line_index] = fmt::format("{} | {} | {}", c.args, replace_all(err, gen.string(), "{gen}"), r.exit_code);
            continue;
        }
        CHECK(err == replace_all(c.expected_err, "{gen}", gen.string()));
        CHECK(r.exit_code == c.exit_code);
    }
    if (update) {
        std::ofstream out(file, std::ios::binary);
        for (const auto& l : lines) out << l << '\n';
    }
    // The calibrate cases write --out {gen}/kept.json only on success: the previous file survives every failure.
    CHECK(read_text(gen / "kept.json") == "the previous file\n");
    CHECK(!fs::exists(gen / "kept.json.tmp"));
}
