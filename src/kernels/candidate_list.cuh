// A block's list of top-k candidates in shared memory: every key >= a threshold that is known
// to be at most the row's K-th key. Appends are warp-aggregated (one atomic per warp and step),
// and a whole 16-byte vector is rejected by one compare of its maximum, the common case.
#pragma once

#include <math_constants.h>

#include <cstdint>

#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

struct CandidateList {
  TopkKey* keys;
  unsigned* count;    ///< may exceed capacity: then the list overflowed and is incomplete
  unsigned capacity;
  TopkKey threshold;  ///< keys >= threshold are candidates; kEmptyKey takes every key
  float threshold_value;

  __device__ __forceinline__ CandidateList(TopkKey* keys_, unsigned* count_, unsigned capacity_, TopkKey threshold_)
      : keys(keys_), count(count_), capacity(capacity_), threshold(threshold_) {
    threshold_value = threshold == kEmptyKey ? -CUDART_INF_F : key_value(threshold);
  }

  /// Appends the keys of a group's elements that reach the threshold. Callable from divergent
  /// code: the aggregation is over the lanes that arrive together.
  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t first_index) const {
    // One compare rejects the whole group, the common case. (-inf >= -inf keeps a masked
    // row's candidates when the threshold is itself -inf; NaN rows are never read back.)
    if (!(group_max(group) >= threshold_value)) return;
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const TopkKey key = make_key(group.x[n][i], first_index + group.offset[n] + i);
        const bool take = key >= threshold;
        const unsigned lanes = __activemask();
        const unsigned takers = __ballot_sync(lanes, take);
        if (takers == 0) continue;
        const int lane = static_cast<int>(threadIdx.x % 32);
        const int leader = __ffs(takers) - 1;
        unsigned base = 0;
        if (lane == leader) base = atomicAdd(count, static_cast<unsigned>(__popc(takers)));
        base = __shfl_sync(lanes, base, leader);
        if (take) {
          const unsigned slot = base + static_cast<unsigned>(__popc(takers & ((1u << lane) - 1u)));
          if (slot < capacity) keys[slot] = key;
        }
      }
    }
  }

  /// Visits the listed keys across the block (valid only when the list did not overflow).
  template <int kThreads, typename Visit>
  __device__ __forceinline__ void for_each(unsigned listed, Visit&& visit) const {
    for (unsigned i = threadIdx.x; i < listed; i += kThreads) visit(keys[i]);
  }
};

}  // namespace softk::kernels
