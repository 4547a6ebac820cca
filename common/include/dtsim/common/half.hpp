// IEEE binary16 (fp16) and bfloat16 conversions, round to nearest even, bit
// exact: what torch's .half() / .bfloat16() casts and NCCL's and gloo's half
// sums do to one value.
#pragma once

#include <cstdint>

namespace dtsim {

std::uint16_t fp16_bits(float f);
float fp16_value(std::uint16_t h);
std::uint16_t bf16_bits(float f);
float bf16_value(std::uint16_t h);
float round_to_fp16(float f);
float round_to_bf16(float f);

}  // namespace dtsim
