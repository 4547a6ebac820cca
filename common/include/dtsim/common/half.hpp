// IEEE binary16 (fp16) and bfloat16 conversions, round to nearest even, bit
// exact: what torch's .half() / .bfloat16() casts and NCCL's and gloo's half
// sums do to one value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dtsim {

std::uint16_t fp16_bits(float f);
float fp16_value(std::uint16_t h);
std::uint16_t bf16_bits(float f);
float bf16_value(std::uint16_t h);
float round_to_fp16(float f);
float round_to_bf16(float f);

// Bulk fp16 conversions, bit-identical to fp16_value / fp16_bits for every
// finite value and infinity (NaNs stay NaN): eight at a time through the
// CPU's F16C instructions where it has them, else one element at a time.
void fp16_to_float(const std::uint16_t* in, float* out, std::size_t n);
void float_to_fp16(const float* in, std::uint16_t* out, std::size_t n);
// torch's `buffer.to(half).div_(divisor)` (fp16_compress_hook's compression):
// out[i] = fp16(fp16(in[i]) / divisor), the division in float, each step
// rounded to half, in two passes over the buffer as torch runs them.
void fp16_compress(const float* in, std::uint16_t* out, std::size_t n, float divisor);
// c[i] = fp16(a[i] + b[i]) in float, one rounding per element (c may alias a
// or b; a NaN comes out as the quiet NaN of its sign, 0x7e00 or 0xfe00). The
// sum torch's ProcessGroupGloo runs on Half tensors (torch >= 2.8:
// gloo::sum<c10::Half>), at its pace: element by element through c10::Half's
// software conversions (PyPI's x86-64 torch builds that file without F16C),
// in a loop the compiler vectorizes. Bulk F16C conversions summed in 0.5-0.6x
// torch's time, which priced the fp16 hook's allreduces 35 % below torch's
// (bench/results/torch_xcheck.md, stop 41).
void fp16_sum(std::uint16_t* c, const std::uint16_t* a, const std::uint16_t* b, std::size_t n);

}  // namespace dtsim
