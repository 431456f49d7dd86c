// Host-side fp16 / bf16 <-> fp32 conversion (bit exact, round-to-nearest-even on narrowing),
// so the CPU backend needs no CUDA headers.
#pragma once

#include <cstdint>
#include <cstring>

namespace softk::detail {

inline float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t bits_from_f32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t{h} << 16); }

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf / NaN
  if (exponent != 0) return f32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Subnormal half: mantissa * 2^-24 is exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t bits = bits_from_f32(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t bits = bits_from_f32(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;            // rounds to inf (>= 65520)
  if (magnitude < 0x38800000u) {                                  // below the smallest normal half
    // Scale into the subnormal grid (units of 2^-24) and round to nearest even.
    const float scaled = f32_from_bits(magnitude) * 16777216.0f;
    const auto units = static_cast<uint32_t>(scaled);
    const float remainder = scaled - static_cast<float>(units);
    const uint32_t rounded = units + ((remainder > 0.5f || (remainder == 0.5f && (units & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | rounded);
  }
  const uint32_t rebased = magnitude - (112u << 23);
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rebased + rounding) >> 13));
}

}  // namespace softk::detail
