// How every command's result reaches the user: one place that knows the output
// formats. A command builds its result once and hands the Reporter a view of it
// per format it offers; the Reporter prints the one `--format` chose:
//   - text (named "text", or "table" for commands whose view is a table): for people;
//   - json: one document on stdout, for scripts;
//   - csv: one header and a row per item, where rows make sense (sweep).
// Notes for people ("trace written to ...") go to stdout with the text view
// and to stderr otherwise, so that a JSON or CSV stdout stays one document.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dtsim::cli {

class Reporter {
public:
    enum class Format { text, json, csv };

    // Adds --format to `cmd`, offering `choices` ("text" or "table", "json",
    // "csv"); the first is the default. `help` says what each one prints.
    void add_option(CLI::App& cmd, std::vector<std::string> choices, const std::string& help);

    Format format() const;
    bool text() const { return format() == Format::text; }
    bool json() const { return format() == Format::json; }
    const std::string& name() const { return chosen_; }

    // The result's views; each returns the whole output. Only the formats the
    // command offers need one.
    struct Views {
        std::function<std::string()> text = {};
        std::function<std::string()> json = {};
        std::function<std::string()> csv = {};
    };
    // Prints the chosen view (a JSON document ends with a newline).
    void print(const Views& views) const;
    // A line for people, beside the result.
    void note(std::string_view line) const;

private:
    std::string chosen_ = "text";
};

}  // namespace dtsim::cli
