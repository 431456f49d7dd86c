// A thread's top-L keys in registers, descending, kept by a branch-free insertion network:
// every push costs the same 2L min/max operations, so a warp never diverges on it (a
// branchy sorted insert diverges on nearly every step early in a row, when some lane always
// has something to insert).
#pragma once

#include "kernels/topk_key.cuh"

namespace softk::kernels {

template <int L>
struct TopkBuffer {
  TopkKey keys[L];  // indexed only by compile-time constants, so it stays in registers

  __device__ __forceinline__ TopkBuffer() {
#pragma unroll
    for (int i = 0; i < L; ++i) keys[i] = kEmptyKey;
  }

  __device__ __forceinline__ void push(TopkKey key) {
    TopkKey carry = key;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const TopkKey kept = max(keys[i], carry);
      carry = min(keys[i], carry);
      keys[i] = kept;
    }
  }

  /// Visits the keys held (empty slots skipped).
  template <typename Visit>
  __device__ __forceinline__ void for_each(Visit&& visit) const {
#pragma unroll
    for (int i = 0; i < L; ++i)
      if (keys[i] != kEmptyKey) visit(keys[i]);
  }
};

}  // namespace softk::kernels
