// Element types of tensors and their sizes.
#pragma once

#include <cstdint>
#include <string_view>

namespace dtsim {

enum class DType : std::uint8_t { fp32, fp16, bf16 };

constexpr std::int64_t dtype_bytes(DType t) {
    return t == DType::fp32 ? 4 : 2;
}
std::string_view to_string(DType t);
DType dtype_from_string(std::string_view name);  // throws ConfigError listing the valid names

}  // namespace dtsim
