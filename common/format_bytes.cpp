#include "dtsim/common/format_bytes.hpp"

#include <fmt/format.h>

#include <cstdlib>

namespace dtsim {

std::string format_bytes(std::int64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (std::llabs(bytes) >= (1LL << 30)) return fmt::format("{:.2f} GiB", b / (1LL << 30));
    if (std::llabs(bytes) >= (1LL << 20)) return fmt::format("{:.2f} MiB", b / (1LL << 20));
    if (std::llabs(bytes) >= (1LL << 10)) return fmt::format("{:.2f} KiB", b / (1LL << 10));
    return fmt::format("{} B", bytes);
}

}  // namespace dtsim
