// A thread's L largest values in registers, descending, kept by a branch-free insertion network:
// every push costs the same 2L max/min, so a warp never diverges on it (a branchy sorted insert
// diverges on nearly every step early in a row, when some lane always has something to insert).
// Logits (float), where a lower bound is all the caller needs, or 32-bit keys that also say where
// each value lies (uint32_t: block_slotted_seeds.cuh).
#pragma once

#include <cstdint>
#include <type_traits>

#include <math_constants.h>

namespace softk::kernels {

template <int L, typename V = float>
struct SeedBuffer {
  V values[L];  // indexed only by compile-time constants, so it stays in registers

  __device__ __forceinline__ SeedBuffer() {
    // Placeholders below every value can only lower the bound taken from the buffer: still a
    // lower bound.
#pragma unroll
    for (int i = 0; i < L; ++i) values[i] = lowest();
  }

  __device__ __forceinline__ void push(V x) {
    V carry = x;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const V kept = larger(values[i], carry);
      carry = smaller(values[i], carry);
      values[i] = kept;
    }
  }

 private:
  static_assert(std::is_same_v<V, float> || std::is_same_v<V, uint32_t>, "logits or 32-bit keys");

  __device__ static __forceinline__ V lowest() {
    if constexpr (std::is_same_v<V, float>) return -CUDART_INF_F;
    else return 0u;
  }
  __device__ static __forceinline__ float larger(float a, float b) { return fmaxf(a, b); }
  __device__ static __forceinline__ float smaller(float a, float b) { return fminf(a, b); }
  __device__ static __forceinline__ uint32_t larger(uint32_t a, uint32_t b) { return max(a, b); }
  __device__ static __forceinline__ uint32_t smaller(uint32_t a, uint32_t b) { return min(a, b); }
};

}  // namespace softk::kernels
