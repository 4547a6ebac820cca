#include "format_units.hpp"

#include "dtsim/common/format_bytes.hpp"

#include <fmt/format.h>

#include <cmath>

namespace dtsim::cli {

std::string format_bytes(std::int64_t bytes) {
    return dtsim::format_bytes(bytes);
}

std::string format_seconds(double s) {
    if (s >= 1.0) return fmt::format("{:.3f} s", s);
    if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
    return fmt::format("{:.1f} us", s * 1e6);
}

std::string format_thousands(std::int64_t n) {
    std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return n < 0 ? "-" + out : out;
}

std::string format_count(double x) {
    if (x >= 1e9) return fmt::format("{:.2f} B", x / 1e9);
    if (x >= 1e6) return fmt::format("{:.1f} M", x / 1e6);
    if (x >= 1e3) return fmt::format("{:.1f} k", x / 1e3);
    return fmt::format("{:.0f}", x);
}

}  // namespace dtsim::cli
