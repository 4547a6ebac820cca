// Byte counts for people: "1.50 GiB", "25.00 MiB", "512 B" (binary units).
// The one formatter the CLI, the readers' messages and the memory checks share.
#pragma once

#include <cstdint>
#include <string>

namespace dtsim {

std::string format_bytes(std::int64_t bytes);

}  // namespace dtsim
