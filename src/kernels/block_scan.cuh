// Prefix sums over the threads of a block, and the 16-byte reads of the per-thread runs of
// shared-memory counters that feed them (the histogram scans of block_bin_threshold.cuh and
// block_range_bin_sort.cuh).
#pragma once

#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

/// out[i] = words[i] for i < N (a multiple of 4; words 16-byte aligned), read 16 bytes at a time:
/// when each thread reads its own contiguous run, word loads would conflict N ways in the banks
/// (measured ~1 us for a 4096-bin scan on an H200).
template <int N>
__device__ __forceinline__ void load_words(const unsigned* words, unsigned (&out)[N]) {
  static_assert(N % 4 == 0, "whole uint4s");
  const auto* quads = reinterpret_cast<const uint4*>(words);
#pragma unroll
  for (int q = 0; q < N / 4; ++q) {
    const uint4 v = quads[q];
    out[4 * q] = v.x;
    out[4 * q + 1] = v.y;
    out[4 * q + 2] = v.z;
    out[4 * q + 3] = v.w;
  }
}

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
