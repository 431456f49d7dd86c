// What every finish of the cluster top-k kernel (step 4 of topk_cluster.cu) does with a row's
// candidates once the threshold is known: append a CTA's keys at or above it to a list, write
// sorted keys at their ranks, write the row's status. Apart because the three finishes share
// it (cluster_finish_at_leader.cuh, cluster_finish_across.cuh, cluster_finish_in_buckets.cuh).
#pragma once

#include <cstdint>

#include "kernels/block_topk.cuh"
#include "kernels/cluster_chunk.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"

namespace softk::kernels {

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// The row's status, from the leader's thread 0 at the end of its work (written earlier, it sits
/// on the path every CTA waits on: the leader's warp 0 sends keys too).
__device__ __forceinline__ void write_row_status(const TopkProblem& problem, int64_t row,
                                                 const Normalizer& normalizer) {
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);
}

/// Writes sorted[0, count) (the whole block) as the row's entries offset, offset + 1, ...: those
/// that fall below K.
__device__ __forceinline__ void write_sorted_keys(const TopkKey* sorted, unsigned count, unsigned offset,
                                                  const Normalizer& normalizer, const TopkProblem& problem,
                                                  int64_t row) {
  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  for (unsigned j = threadIdx.x; j < count && offset + j < static_cast<unsigned>(problem.k); j += kClusterThreads)
    write_topk_entry(sorted[j], normalizer, problem.log_probs, probs + offset + j, indices + offset + j);
}

/// Appends every held key at or above `prefix` to keys[0, *count) (this CTA's, or the leader's).
template <typename Chunk>
__device__ __forceinline__ void send_candidates(const Chunk& held, TopkKey prefix, unsigned* count, TopkKey* keys) {
  // The decision bounded the cluster's count by kGatherCapacity.
  append_keys_at_least(
      prefix, [&](auto&& visit) { for_each_held_key_at_least(held, prefix, visit); }, count, keys, kGatherCapacity);
}

#endif  // sm_90+

}  // namespace softk::kernels
