// A block's list of top-k candidates in shared memory: the key of every element whose logit is
// >= a threshold known to be at most the row's K-th logit.
#pragma once

#include <cstdint>

#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

struct CandidateList {
  TopkKey* keys;
  unsigned* count;  ///< may exceed capacity: then the list overflowed and is incomplete
  unsigned capacity;
  float threshold;  ///< logits >= threshold are candidates

  /// Appends the keys of a group's elements whose logit reaches the threshold. A group below
  /// it (the common case) costs one compare of its maximum; a lane with candidates reserves
  /// its slots with one shared-memory atomic, so a warp step with one passing lane costs a few
  /// dozen instructions, not a ballot per element.
  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t first_index) const {
    // NaN compares false: NaN rows are never read back. -inf >= -inf keeps a masked row's
    // candidates when the threshold is itself -inf.
    static_assert(N * W <= 32, "one bit per element of the group");
    if (!(group.max >= threshold)) return;
    unsigned taken = 0;
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < W; ++i) taken |= (group.x[n][i] >= threshold ? 1u : 0u) << (n * W + i);
    unsigned slot = atomicAdd(count, static_cast<unsigned>(__popc(taken)));
    // A lane's passing elements are walked bit by bit, a run at a time, the value picked by a
    // select over the run: a branch for each of the N x W positions made a warp walk every
    // position where any lane passed, one key store after another (an ncu profile of 256 x
    // 128256 fp32 at K = 1024 had phase B issue-bound, ~26 instructions an element).
#pragma unroll
    for (int n = 0; n < N; ++n) {
      unsigned run_taken = (taken >> (n * W)) & ((1u << W) - 1u);
      while (run_taken != 0) {
        const int i = __ffs(run_taken) - 1;
        run_taken &= run_taken - 1;
        float value = group.x[n][0];
#pragma unroll
        for (int j = 1; j < W; ++j) value = j == i ? group.x[n][j] : value;
        if (slot < capacity) keys[slot] = make_key(value, first_index + group.offset[n] + i);
        ++slot;
      }
    }
  }

  /// The interface the fused core shares with CandidateVectors: this list holds keys already,
  /// so there is nothing to rewrite.
  __device__ __forceinline__ unsigned to_keys(unsigned listed, unsigned* /*key_count*/) const { return listed; }
  __device__ __forceinline__ unsigned key_capacity() const { return capacity; }
  __device__ __forceinline__ const TopkKey* listed_keys() const { return keys; }
};

}  // namespace softk::kernels
