// A thread's L largest logits in registers, descending, kept by a branch-free insertion network:
// every push costs the same 2L fmaxf/fminf, so a warp never diverges on it (a branchy sorted
// insert diverges on nearly every step early in a row, when some lane always has something to
// insert). Values only: the fused kernel needs no more than a lower bound from them.
#pragma once

#include <math_constants.h>

namespace softk::kernels {

template <int L>
struct SeedBuffer {
  float values[L];  // indexed only by compile-time constants, so it stays in registers

  __device__ __forceinline__ SeedBuffer() {
    // -inf placeholders can only lower the bound taken from the buffer: still a lower bound.
#pragma unroll
    for (int i = 0; i < L; ++i) values[i] = -CUDART_INF_F;
  }

  __device__ __forceinline__ void push(float x) {
    float carry = x;
#pragma unroll
    for (int i = 0; i < L; ++i) {
      const float kept = fmaxf(values[i], carry);
      carry = fminf(values[i], carry);
      values[i] = kept;
    }
  }
};

}  // namespace softk::kernels
