// Prefix sums over the threads of a block (the histogram scans of block_bin_threshold.cuh and
// block_range_bin_sort.cuh, which read each thread's run of counters by load_words).
#pragma once

#include "kernels/element.cuh"  // load_words
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

/// The sum of `value` over the block's threads below this one (an exclusive prefix sum in thread
/// order), called by every thread of the block. warp_totals: a shared word a warp, not to be
/// written again before a barrier after this. Contains one barrier.
__device__ __forceinline__ unsigned block_exclusive_sum(unsigned value, unsigned* warp_totals) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned inclusive = warp_inclusive_sum(value);
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  unsigned below = inclusive - value;
  for (unsigned w = 0; w < warp; ++w) below += warp_totals[w];
  return below;
}

/// The sum of `value` over all kWarps warps of the block, read from the warp_totals that
/// block_exclusive_sum(value, warp_totals) left (after it, before they are written again): the
/// same in every thread, with no second barrier.
template <int kWarps>
__device__ __forceinline__ unsigned block_total_after_exclusive_sum(const unsigned* warp_totals) {
  unsigned total = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += warp_totals[w];
  return total;
}

}  // namespace softk::kernels
