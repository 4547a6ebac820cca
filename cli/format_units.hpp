// Human-readable numbers for terminal output.
#pragma once

#include <cstdint>
#include <string>

namespace dtsim::cli {

std::string format_bytes(std::int64_t bytes);  // "1.50 GiB", "25.0 MiB", "512 B"
std::string format_seconds(double s);          // "512.3 ms", "1.203 s", "85.1 us"
std::string format_count(double x);            // "1.56 B", "124.4 M", "12.3 k"
std::string format_thousands(std::int64_t n);  // "1,557,611,200"

}  // namespace dtsim::cli
