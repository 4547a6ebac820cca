#include "dtsim/common/host_memory.hpp"

#include "dtsim/common/error.hpp"
#include "dtsim/common/format_bytes.hpp"

#include <fmt/format.h>

#include <malloc.h>
#include <unistd.h>
#include <cstdlib>
#include <limits>

namespace dtsim {
namespace {

std::string bytes_text(std::uint64_t b) {
    if (b > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return "more than 8 EiB";
    return format_bytes(static_cast<std::int64_t>(b));
}

}  // namespace

std::uint64_t host_memory_bytes() {
    if (const char* e = std::getenv("DTSIM_HOST_MEMORY_BYTES"); e != nullptr && *e != '\0') {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(e, &end, 10);
        if (end == nullptr || *end != '\0' || v == 0)
            throw ConfigError(
                fmt::format("DTSIM_HOST_MEMORY_BYTES='{}': expected a positive whole number of bytes", e));
        return v;
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_bytes <= 0) return 0;
    return saturating_mul(static_cast<std::uint64_t>(pages), static_cast<std::uint64_t>(page_bytes));
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
    if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::numeric_limits<std::uint64_t>::max();
    return a * b;
}

void check_fits_host_memory(std::uint64_t need, double fraction, const std::string& what, const std::string& advice) {
    const std::uint64_t total = host_memory_bytes();
    if (total == 0) return;
    const auto allowed = static_cast<std::uint64_t>(static_cast<double>(total) * fraction);
    if (need <= allowed) return;
    throw ConfigError(
        fmt::format("{} needs about {} but this machine has {}{}: {}", what, bytes_text(need), bytes_text(total),
                    fraction < 1.0 ? fmt::format(" (this allows {:.0f}% of it)", fraction * 100.0) : "", advice));
}

void keep_freed_memory() {
    // Setting either threshold also turns off glibc's dynamic threshold, which
    // otherwise moves with the sizes freed and makes the policy depend on history.
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);  // glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace dtsim
