// A thread's register-resident top-L list, sorted descending, plus the largest key it ever
// dropped. The dropped maximum is the exactness guard: the block's answer built from these
// lists is exact iff no thread dropped a key larger than the K-th key of that answer (a dropped
// key is below every key its thread kept, so if it is also below the answer's K-th key, nothing
// outside the lists could have displaced an answer key).
#pragma once

#include "kernels/topk_key.cuh"

namespace softk::kernels {

template <int L>
struct TopkBuffer {
  TopkKey keys[L];  // descending; indexed only by compile-time constants, so it stays in registers
  TopkKey max_dropped = kEmptyKey;

  __device__ __forceinline__ TopkBuffer() {
#pragma unroll
    for (int i = 0; i < L; ++i) keys[i] = kEmptyKey;
  }

  __device__ __forceinline__ void push(TopkKey key) {
    // The common case once the buffer is warm: the key loses to the smallest kept key.
    if (key <= keys[L - 1]) {
      max_dropped = max(max_dropped, key);
      return;
    }
    max_dropped = max(max_dropped, keys[L - 1]);
    keys[L - 1] = key;
    // One bubble pass restores the order (the new key only moves up).
#pragma unroll
    for (int i = L - 1; i > 0; --i) {
      const TopkKey hi = max(keys[i - 1], keys[i]);
      const TopkKey lo = min(keys[i - 1], keys[i]);
      keys[i - 1] = hi;
      keys[i] = lo;
    }
  }
};

}  // namespace softk::kernels
