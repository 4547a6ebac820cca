#include "dtsim/common/error.hpp"

#include <fmt/format.h>

namespace dtsim {
namespace {

std::string one_line(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '\n')
            out += "\\n";
        else if ((u < 0x20 && c != '\t') || u == 0x7f)
            out += fmt::format("\\x{:02x}", u);
        else
            out += c;
    }
    return out;
}

}  // namespace

Error::Error(const std::string& what) : std::runtime_error(one_line(what)) {}

ParseError::ParseError(std::string file, std::string field, const std::string& what)
    // An empty field is the whole file (empty, binary, not JSON).
    : Error(field.empty() ? fmt::format("{}: {}", file, what) : fmt::format("{}: field '{}': {}", file, field, what)),
      file_(std::move(file)),
      field_(std::move(field)) {}

void assert_failed(const char* expr, const char* file, int line, const std::string& message) {
    throw InternalError(fmt::format("internal error: {} ({}:{}: assertion `{}` failed). Please report this.", message,
                                    file, line, expr));
}

}  // namespace dtsim
