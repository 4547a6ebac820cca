#include "dtsim/common/dtype.hpp"

#include "dtsim/common/error.hpp"

#include <fmt/format.h>

namespace dtsim {

std::string_view to_string(DType t) {
    switch (t) {
        case DType::fp32: return "fp32";
        case DType::fp16: return "fp16";
        case DType::bf16: return "bf16";
    }
    return "?";
}

DType dtype_from_string(std::string_view name) {
    if (name == "fp32" || name == "float32") return DType::fp32;
    if (name == "fp16" || name == "float16") return DType::fp16;
    if (name == "bf16" || name == "bfloat16") return DType::bf16;
    throw ConfigError(fmt::format("unknown dtype '{}'; valid: fp32, fp16, bf16", name));
}

}  // namespace dtsim
