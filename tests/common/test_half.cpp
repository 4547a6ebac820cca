// The bulk fp16 conversions (F16C where the CPU has it) and the half sum (c10::Half's
// software conversions, as torch's gloo runs it) give exactly the scalar
// conversions' bits, which test_hooks_train checks against IEEE round-to-nearest-even.
#include "dtsim/common/half.hpp"

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

bool same_half(std::uint16_t a, std::uint16_t b) {
    const bool nan_a = (a & 0x7c00u) == 0x7c00u && (a & 0x3ffu) != 0;
    const bool nan_b = (b & 0x7c00u) == 0x7c00u && (b & 0x3ffu) != 0;
    return nan_a || nan_b ? nan_a == nan_b : a == b;
}

}  // namespace

TEST_CASE("bulk fp16 conversions equal the scalar ones for every half value and for rounding floats") {
    std::vector<std::uint16_t> all(65536);
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
    std::vector<float> f(all.size());
    dtsim::fp16_to_float(all.data(), f.data(), all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
        const float expected = dtsim::fp16_value(all[i]);
        if (std::isnan(expected))
            REQUIRE(std::isnan(f[i]));
        else
            REQUIRE(f[i] == expected);
    }
    // Floats between halves (ties, subnormals, overflow), in an odd-sized run so the scalar tail runs too.
    std::vector<float> in;
    for (std::uint32_t bits = 0x33000000u; bits < 0x47900000u; bits += 0x1235u) {
        in.push_back(std::bit_cast<float>(bits));
        in.push_back(-std::bit_cast<float>(bits));
    }
    in.push_back(1.0f + 0x1.0p-11f);  // a tie: even (1)
    in.push_back(65520.0f);           // rounds to infinity
    std::vector<std::uint16_t> out(in.size());
    dtsim::float_to_fp16(in.data(), out.data(), in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
        INFO(in[i]);
        REQUIRE(same_half(out[i], dtsim::fp16_bits(in[i])));
    }
}

TEST_CASE("the half sum rounds once per element, in place too") {
    std::vector<std::uint16_t> a, b;
    for (std::uint32_t i = 0; i < 1000; ++i) {
        a.push_back(dtsim::fp16_bits(static_cast<float>(i) * 0.37f - 100.0f));
        b.push_back(dtsim::fp16_bits(1.0f / (static_cast<float>(i) + 0.5f)));
    }
    // Subnormal operands and sums, a subnormal tie, overflow to infinity, infinities and signed zeros.
    const float edge[][2] = {{0x1.0p-24f, 0x1.0p-24f},
                             {0x1.8p-20f, -0x1.0p-22f},
                             {0x1.ffcp-15f, 0x1.0p-24f},
                             {-0x1.0p-14f, 0x1.0p-24f},
                             {65504.0f, 32.0f},
                             {65504.0f, 16.0f},
                             {-65504.0f, -65504.0f},
                             {INFINITY, 1.0f},
                             {-INFINITY, -2.0f},
                             {0.0f, -0.0f},
                             {-0.0f, -0.0f},
                             {0x1.0p-24f, -0x1.0p-24f}};
    for (const auto& e : edge) {
        a.push_back(dtsim::fp16_bits(e[0]));
        b.push_back(dtsim::fp16_bits(e[1]));
    }
    a.push_back(dtsim::fp16_bits(1.0f));
    b.push_back(dtsim::fp16_bits(0x1.0p-11f));  // 1 + 2^-11: a tie, even
    std::vector<std::uint16_t> c(a.size());
    dtsim::fp16_sum(c.data(), a.data(), b.data(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO(i << ": " << dtsim::fp16_value(a[i]) << " + " << dtsim::fp16_value(b[i]));
        REQUIRE(c[i] == dtsim::fp16_bits(dtsim::fp16_value(a[i]) + dtsim::fp16_value(b[i])));
    }
    CHECK(c.back() == dtsim::fp16_bits(1.0f));
    dtsim::fp16_sum(a.data(), a.data(), b.data(), a.size());
    CHECK(a == c);
}

TEST_CASE("the half sum gives back every half value plus negative zero, NaNs as the quiet NaN of their sign") {
    // Every one of the 65536 values through both of the sum's conversions: x + (-0) is x exactly, -0 + -0 is -0.
    std::vector<std::uint16_t> all(1u << 16), minus_zero(all.size(), 0x8000u), c(all.size());
    for (std::uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h);
    dtsim::fp16_sum(c.data(), all.data(), minus_zero.data(), all.size());
    for (std::uint32_t h = 0; h < all.size(); ++h) {
        INFO("0x" << std::hex << h);
        const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
        REQUIRE(c[h] == (nan ? ((h & 0x8000u) | 0x7e00u) : h));
    }
}

TEST_CASE("the fp16 hook's compression rounds to half, divides in float and rounds again") {
    std::vector<float> in;
    for (std::uint32_t i = 0; i < 3000; ++i) in.push_back((static_cast<float>(i) - 1500.0f) * 0.0137f);
    // Halving the smallest subnormals (ties to even), values that round up to the next binade, overflow, signed zeros.
    for (const float f : {0x1.0p-24f, 0x1.8p-23f, -0x1.0p-24f, 0x1.ffcp-15f, 65504.0f, 65520.0f, 1e6f, 0.0f, -0.0f,
                          INFINITY, 1.0f + 0x1.0p-11f, 3.0f + 0x1.8p-10f})
        in.push_back(f);
    for (const float divisor : {2.0f, 3.0f, 8.0f}) {
        std::vector<std::uint16_t> out(in.size());
        dtsim::fp16_compress(in.data(), out.data(), in.size(), divisor);
        for (std::size_t i = 0; i < in.size(); ++i) {
            INFO(in[i] << " / " << divisor);
            REQUIRE(out[i] == dtsim::fp16_bits(dtsim::fp16_value(dtsim::fp16_bits(in[i])) / divisor));
        }
    }
}
