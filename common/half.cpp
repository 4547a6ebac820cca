#include "dtsim/common/half.hpp"

#include <bit>
#include <cmath>

namespace dtsim {

std::uint16_t fp16_bits(float f) {
    const auto x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    const std::uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN (quiet)
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
    if (a < 0x38800000u) {                                                    // below 2^-14: subnormal or zero
        if (a <= 0x33000000u) return sign;                                    // <= 2^-25 rounds to 0 (tie: even)
        const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - (a >> 23);  // value / 2^-24 = mant >> shift
        std::uint32_t q = mant >> shift;
        const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) ++q;
        return static_cast<std::uint16_t>(sign | q);
    }
    std::uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
    const std::uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
    return static_cast<std::uint16_t>(sign | h);
}

float fp16_value(std::uint16_t h) {
    const std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
    const std::uint32_t e = (std::uint32_t{h} >> 10) & 0x1fu, m = std::uint32_t{h} & 0x3ffu;
    if (e == 0) {
        const float v = std::ldexp(static_cast<float>(m), -24);
        return sign ? -v : v;
    }
    if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
    return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

std::uint16_t bf16_bits(float f) {
    const auto x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
    const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);                               // round to nearest even
    return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_value(std::uint16_t h) {
    return std::bit_cast<float>(std::uint32_t{h} << 16);
}

float round_to_fp16(float f) {
    return fp16_value(fp16_bits(f));
}
float round_to_bf16(float f) {
    return bf16_value(bf16_bits(f));
}

}  // namespace dtsim
