// Top-k ranks by one unsigned 64-bit key per token: the logit mapped to an order-preserving
// 32-bit pattern in the high word, the bit-inverted index in the low word. So a larger key is
// a larger logit, and among equal logits the smaller index: the contract's total order is
// plain integer comparison, and every key of a row is unique.
#pragma once

#include <cstdint>

#include <math_constants.h>

namespace softk::kernels {

using TopkKey = unsigned long long;

/// Below every real key (the smallest, -inf, has high word 0x007FFFFF), so unused buffer slots
/// never compete. A NaN's key can sort anywhere, but NaN rows never reach selection.
constexpr TopkKey kEmptyKey = 0;

/// A float's bits, mapped so that unsigned comparison orders them as the floats (-0 below +0).
__device__ __forceinline__ uint32_t ordered_bits(float x) {
  const uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ float float_of_ordered_bits(uint32_t ordered) {
  return __uint_as_float((ordered & 0x80000000u) ? (ordered & 0x7FFFFFFFu) : ~ordered);
}

/// The high word of x's keys: its ordered bits, with -0 taken as +0 (x + 0) so that the two zeros
/// tie, as they compare equal.
__device__ __forceinline__ uint32_t key_value_bits(float x) { return ordered_bits(x + 0.0f); }

__device__ __forceinline__ TopkKey make_key(float x, int64_t index) {
  return (TopkKey{key_value_bits(x)} << 32) | TopkKey{0xFFFFFFFFu - static_cast<uint32_t>(index)};
}

__device__ __forceinline__ float key_value(TopkKey key) { return float_of_ordered_bits(static_cast<uint32_t>(key >> 32)); }

/// A key whose index bits are zero, as a float threshold: for non-NaN x, x >= key_threshold(key)
/// exactly when make_key(x, i) >= key. A value half that decodes as a NaN lies below every real
/// key when it is kEmptyKey or a prefix floor in the bin of -inf (all-ones exponent, low mantissa
/// bits set): its threshold is -inf. (The NaN patterns above +inf are reached only by NaN rows,
/// whose candidates are never read.)
__device__ __forceinline__ float key_threshold(TopkKey key) {
  const float x = key_value(key);
  return x == x ? x : -CUDART_INF_F;
}

__device__ __forceinline__ int32_t key_index(TopkKey key) {
  return static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(key));
}

}  // namespace softk::kernels
