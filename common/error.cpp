#include "dtsim/common/error.hpp"

#include <fmt/format.h>

namespace dtsim {

ParseError::ParseError(std::string file, std::string field, const std::string& what)
    : Error(fmt::format("{}: field '{}': {}", file, field.empty() ? "/" : field, what)),
      file_(std::move(file)),
      field_(std::move(field)) {}

void assert_failed(const char* expr, const char* file, int line, const std::string& message) {
    throw InternalError(fmt::format("internal error: {} ({}:{}: assertion `{}` failed). Please report this.", message,
                                    file, line, expr));
}

}  // namespace dtsim
