// The host fp16/bf16 converters (src/cpu/half_convert.hpp) that the oracle and every test input
// rely on: exhaustive over all 65536 bit patterns of each type, and round-to-nearest-even on
// narrowing checked against an independent "pick the nearest representable value" search.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/inputs.hpp"
#include "cpu/half_convert.hpp"
#include "softk/types.hpp"

namespace {

using softk::detail::bf16_to_f32;
using softk::detail::f16_to_f32;
using softk::detail::f32_to_bf16;
using softk::detail::f32_to_f16;

// Independent decoders written from the IEEE definitions (ldexp on the fields), not from the
// bit tricks under test.
double f16_reference(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) magnitude = mantissa ? std::nan("") : INFINITY;
  else if (exponent == 0) magnitude = std::ldexp(mantissa, -24);
  else magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}
double bf16_reference(uint16_t h) {
  const int sign = (h >> 15) & 1, exponent = (h >> 7) & 0xff, mantissa = h & 0x7f;
  double magnitude;
  if (exponent == 0xff) magnitude = mantissa ? std::nan("") : INFINITY;
  else if (exponent == 0) magnitude = std::ldexp(mantissa, -133);
  else magnitude = std::ldexp(128 + mantissa, exponent - 134);
  return sign ? -magnitude : magnitude;
}
bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(HalfConvert, F16ToF32MatchesIeeeDefinitionForAll65536Patterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = f16_reference(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "f16 0x" << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "f16 0x" << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << "sign of zero lost for f16 0x" << std::hex << h;
    }
  }
}

TEST(HalfConvert, Bf16ToF32MatchesIeeeDefinitionForAll65536Patterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(static_cast<uint16_t>(h));
    const double want = bf16_reference(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "bf16 0x" << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << "bf16 0x" << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << "bf16 0x" << std::hex << h;
    }
  }
}

// f16 -> f32 -> f16 is the identity on every non-NaN pattern (including ±0, subnormals, ±inf);
// a NaN stays a NaN (its payload may be quietened).
TEST(HalfConvert, F16RoundTripIsExactAndNaNStaysNaN) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t back = f32_to_f16(f16_to_f32(half));
    if (f16_is_nan(half)) {
      ASSERT_TRUE(f16_is_nan(back)) << "f16 NaN 0x" << std::hex << h << " came back as 0x" << back;
    } else {
      ASSERT_EQ(back, half) << "f16 0x" << std::hex << h << " came back as 0x" << back;
    }
  }
}

TEST(HalfConvert, Bf16RoundTripIsExactAndNaNStaysNaN) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t back = f32_to_bf16(bf16_to_f32(half));
    if (bf16_is_nan(half)) {
      ASSERT_TRUE(bf16_is_nan(back)) << "bf16 NaN 0x" << std::hex << h << " came back as 0x" << back;
    } else {
      ASSERT_EQ(back, half) << "bf16 0x" << std::hex << h << " came back as 0x" << back;
    }
  }
}

// Round-to-nearest-even checked by search: the chosen half must be at least as close to x as
// both of its neighbours (in magnitude), and on an exact tie it must be the even one. Overflow
// is judged with the unbounded-exponent rule: the value past the largest finite (65504 for f16)
// is 2^16 (and 2^128 for bf16), which then becomes inf.
template <class Decode>
void check_nearest_even(float x, uint16_t got, Decode decode, uint16_t inf_bits, double beyond_max, const char* type) {
  const double target = std::fabs(static_cast<double>(x));
  const uint16_t mag = got & 0x7fff;
  ASSERT_EQ(got >> 15, bits(x) >> 31) << type << ": sign lost for " << x;
  const auto value_of = [&](uint16_t m) { return m == inf_bits ? beyond_max : std::fabs(decode(m)); };
  ASSERT_LE(mag, inf_bits) << type << ": " << x << " became NaN";
  const double chosen = value_of(mag);
  if (mag > 0) {
    const double below = value_of(static_cast<uint16_t>(mag - 1));
    ASSERT_LE(std::fabs(chosen - target), std::fabs(below - target)) << type << ": " << x << " -> 0x" << std::hex << got;
    if (std::fabs(chosen - target) == std::fabs(below - target)) {
      ASSERT_EQ(mag % 2, 0) << type << ": tie not to even for " << x;
    }
  }
  if (mag < inf_bits) {
    const double above = value_of(static_cast<uint16_t>(mag + 1));
    ASSERT_LE(std::fabs(chosen - target), std::fabs(above - target)) << type << ": " << x << " -> 0x" << std::hex << got;
    if (std::fabs(chosen - target) == std::fabs(above - target)) {
      ASSERT_EQ(mag % 2, 0) << type << ": tie not to even for " << x;
    }
  }
}

TEST(HalfConvert, F32ToF16RoundsToNearestEven) {
  std::vector<float> xs;
  // Exact midpoints between neighbouring f16 values (representable in f32: 12 significant bits)
  // and their float neighbours: the ties and the cases one ulp either side of them.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h));
    const float b = h + 1 == 0x7c00 ? 65536.0f : f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = (a + b) / 2;
    xs.insert(xs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid});
  }
  // Random finite f32 bit patterns concentrated on the f16 range and across all exponents.
  softk_test::Rng rng(42);
  for (int i = 0; i < 400000; ++i) {
    const uint32_t b = static_cast<uint32_t>(rng.next());
    const float any = from_bits(b);
    if (std::isfinite(any)) xs.push_back(any);
    const uint32_t in_range = (b & 0x80000000u) | (0x30000000u + (b & 0x1fffffffu));  // |x| in [2^-31, 2^33)
    xs.push_back(from_bits(in_range));
  }
  for (float x : xs) ASSERT_NO_FATAL_FAILURE(check_nearest_even(x, f32_to_f16(x), f16_reference, 0x7c00, 65536.0, "f16"));
  // Named edges.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00) << "65520 is the tie between 65504 and 2^16: rounds to even, i.e. inf";
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(5.9604644775390625e-8f), 0x0001);          // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.98023223876953125e-8f), 0x0000);         // half of it: tie to even (0)
  EXPECT_EQ(f32_to_f16(8.94069671630859375e-8f), 0x0002);         // 1.5 units: tie to even (2)
  EXPECT_TRUE(f16_is_nan(f32_to_f16(std::nanf(""))));
  EXPECT_TRUE(f16_is_nan(f32_to_f16(-std::nanf(""))));
}

TEST(HalfConvert, F32ToBf16RoundsToNearestEven) {
  std::vector<float> xs;
  for (uint32_t h = 0; h < 0x7f80; h += 1) {
    const float a = bf16_to_f32(static_cast<uint16_t>(h));
    if (h + 1 == 0x7f80) {
      xs.push_back(std::nextafter(INFINITY, 0.0f));  // FLT_MAX: above the bf16 max, below the overflow tie
      continue;
    }
    const float b = bf16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = from_bits((bits(a) + bits(b)) / 2);  // 9 significant bits: exact in f32
    xs.insert(xs.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid});
  }
  softk_test::Rng rng(43);
  for (int i = 0; i < 400000; ++i) {
    const float any = from_bits(static_cast<uint32_t>(rng.next()));
    if (std::isfinite(any)) xs.push_back(any);
  }
  for (float x : xs)
    ASSERT_NO_FATAL_FAILURE(check_nearest_even(x, f32_to_bf16(x), bf16_reference, 0x7f80, std::ldexp(1.0, 128), "bf16"));
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(std::nanf(""))));
  // A signalling-style NaN whose payload sits only in the low 16 bits must not truncate to inf.
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(from_bits(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16(from_bits(0xff800001u))));
}

// softk::convert_to_f32 (the public host helper used by the oracle) agrees with the decoders.
TEST(HalfConvert, ConvertToF32AgreesWithDecodersForEveryPattern) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> out(65536);
  softk::convert_to_f32(all.data(), softk::DType::f16, out.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits(out[h]), bits(f16_to_f32(static_cast<uint16_t>(h)))) << "f16 0x" << std::hex << h;
  softk::convert_to_f32(all.data(), softk::DType::bf16, out.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(bits(out[h]), bits(bf16_to_f32(static_cast<uint16_t>(h)))) << "bf16 0x" << std::hex << h;
  const float f32_in[3] = {1.5f, -INFINITY, -0.0f};
  float f32_out[3];
  softk::convert_to_f32(f32_in, softk::DType::f32, f32_out, 3);
  EXPECT_EQ(std::memcmp(f32_in, f32_out, sizeof f32_in), 0);
  EXPECT_THROW(softk::convert_to_f32(all.data(), static_cast<softk::DType>(7), out.data(), 1), softk::Error);
}

}  // namespace
