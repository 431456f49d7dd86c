// The block-level steps of an exact top-k once keys can be visited: select the K-th key, gather
// the K winners into shared memory, sort them, and write them out as (probability, index).
#pragma once

#include <type_traits>

#include <math_constants.h>

#include "kernels/block_radix_select.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"
#include "softk/topk.hpp"

namespace softk::kernels {

struct BlockTopkStorage {
  RadixSelectStorage select;
  unsigned count;
  TopkKey winners[kMaxFastTopK];  ///< unordered, as gathered
  TopkKey sorted[kMaxFastTopK];   ///< descending
};

/// Visits the keys of every element of a row segment (streamed from memory) across the block:
/// the key source of the exact paths.
template <int kThreads, typename T>
struct RowKeys {
  RowSegment<T> segment;

  template <typename Visit>
  __device__ __forceinline__ void operator()(Visit&& visit) const {
    for_each_element<4>(segment, threadIdx.x, kThreads, [&](const auto& x, int64_t offset) {
      constexpr int W = std::extent_v<std::remove_reference_t<decltype(x)>>;
#pragma unroll
      for (int i = 0; i < W; ++i) visit(make_key(x[i], segment.first_index + offset + i));
    });
  }
};

/// Leaves the row's K largest keys, descending, in storage.sorted[0, k). k <= kMaxFastTopK.
/// Exact and deterministic: keys are unique, so the gather order cannot matter.
template <int kThreads, typename ForEachKey>
__device__ void block_topk_sorted(unsigned k, ForEachKey&& for_each_key, BlockTopkStorage& storage) {
  const TopkKey threshold = block_radix_select<kThreads>(k, for_each_key, storage.select);
  if (threadIdx.x == 0) storage.count = 0;
  __syncthreads();
  for_each_key([&](TopkKey key) {
    if (key >= threshold) {
      const unsigned slot = atomicAdd(&storage.count, 1u);
      if (slot < k) storage.winners[slot] = key;  // slot < k always; the test keeps a bug from writing out of bounds
    }
  });
  __syncthreads();
  // Rank sort: a key's rank is the number of larger keys. O(k^2 / threads) broadcast reads,
  // no barriers inside; cheap next to reading the row for the k this path serves.
  for (unsigned i = threadIdx.x; i < k; i += kThreads) {
    const TopkKey key = storage.winners[i];
    unsigned rank = 0;
    for (unsigned j = 0; j < k; ++j) rank += storage.winners[j] > key ? 1u : 0u;
    storage.sorted[rank] = key;
  }
  __syncthreads();
}

/// One output slot: index and probability (or log-probability) of the token behind `key`.
/// Masked tokens (-inf) are written as index -1 and probability 0 (log-probability -inf).
__device__ __forceinline__ void write_topk_entry(TopkKey key, const Normalizer& normalizer, bool log_probs,
                                                 float* prob, int32_t* index) {
  const float x = key_value(key);
  *index = x == -CUDART_INF_F ? -1 : key_index(key);
  *prob = log_probs ? normalizer.log_probability(x) : normalizer.probability(x);
}

/// A NaN row: every slot is index -1, probability NaN.
template <int kThreads>
__device__ void write_nan_row(unsigned k, float* probs, int32_t* indices) {
  for (unsigned j = threadIdx.x; j < k; j += kThreads) {
    probs[j] = CUDART_NAN_F;
    indices[j] = -1;
  }
}

}  // namespace softk::kernels
