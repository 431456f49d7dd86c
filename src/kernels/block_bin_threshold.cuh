// Block-wide threshold bin: a histogram of the keys' top 12 bits (sign, exponent, 3 mantissa
// bits of the logit) and a scan from the top that finds the bin holding the K-th largest key.
// Every key in a higher bin is a winner, so the keys at or above that bin are the top-K plus
// the rest of one bin: one pass of shared-memory adds and one scan, where a radix select of the
// K-th key takes up to 8 passes of ~1,300+ cycles each. Split-k uses it to cut a chunk down to a
// short candidate list and to cut the chunks' lists down to the row's winners, and the cluster
// kernel to agree on a row's threshold. Where a set's largest value is known, bins by distance
// below it (block_bin_prefix_below) cut its top keys finer.
#pragma once

#include "kernels/block_scan.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

constexpr int kBinBits = 12;
constexpr unsigned kBins = 1u << kBinBits;

__device__ __forceinline__ unsigned key_bin(TopkKey key) { return static_cast<unsigned>(key >> (64 - kBinBits)); }

/// The smallest key in `bin`: key >= bin_floor_key(b) exactly when key_bin(key) >= b.
__device__ __forceinline__ TopkKey bin_floor_key(unsigned bin) { return TopkKey{bin} << (64 - kBinBits); }

/// The digit of a key examined at each level of a select by bins: 12 bits at a time from the
/// top (level 0 is key_bin's), the last (level 5) the low 12, of which level 4 decided all but 4.
__device__ constexpr int digit_shift(int level) { return 64 - kBinBits * (level + 1) > 0 ? 64 - kBinBits * (level + 1) : 0; }

struct BinThreshold {
  unsigned bin;          ///< the bin of the K-th largest key (0 when there are fewer than K keys)
  unsigned at_or_above;  ///< keys in that bin or above: >= K, or every key when there are fewer
};

template <int kThreads>
struct BinHistogram {
  static_assert(kThreads % 32 == 0 && kBins % (4 * kThreads) == 0, "whole warps, whole uint4s of bins per thread");
  static constexpr int kBinsPerThread = kBins / kThreads;

  alignas(16) unsigned counts[kBins];
  unsigned warp_totals[kThreads / 32];
  BinThreshold found;

  /// Zeroes the counts; a barrier must separate this from the first add.
  __device__ __forceinline__ void clear() {
    for (unsigned b = threadIdx.x; b < kBins; b += kThreads) counts[b] = 0;
  }

  __device__ __forceinline__ void add_to_bin(unsigned bin) { atomicAdd(&counts[bin], 1u); }
  __device__ __forceinline__ void add(TopkKey key) { add_to_bin(key_bin(key)); }

  /// Counts every logit of a group (a bin depends on the value alone, so no index is needed).
  template <int N, int W>
  __device__ __forceinline__ void add_values(const ElementGroup<N, W>& group) {
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < W; ++i) add(make_key(group.x[n][i], 0));
  }

  /// Called by the whole block after its adds, with the same k everywhere; every thread gets the
  /// same answer. Thread t owns kBinsPerThread consecutive bins counted from the top, so an
  /// exclusive scan over threads gives each thread the count of keys above its bins.
  __device__ BinThreshold threshold(unsigned k) {
    __syncthreads();  // every add has landed
    const unsigned first = kBins - 1 - threadIdx.x * kBinsPerThread;  // this thread's top bin
    unsigned own[kBinsPerThread];  // own[i]: bin first - i
    {
      unsigned ascending[kBinsPerThread];
      load_words(&counts[first + 1 - kBinsPerThread], ascending);
#pragma unroll
      for (int i = 0; i < kBinsPerThread; ++i) own[i] = ascending[kBinsPerThread - 1 - i];
    }
    unsigned total = 0;
#pragma unroll
    for (int i = 0; i < kBinsPerThread; ++i) total += own[i];
    unsigned above = block_exclusive_sum(total, warp_totals);
    if (above < k && k <= above + total) {  // exactly one thread
      unsigned bin = first;
#pragma unroll
      for (int i = 0; i < kBinsPerThread; ++i) {
        if (above + own[i] >= k) break;
        above += own[i];
        --bin;
      }
      found = {bin, above + counts[bin]};
    } else if (threadIdx.x == kThreads - 1 && above + total < k) {  // fewer than k keys
      found = {0, above + total};
    }
    __syncthreads();
    return found;
  }
};

/// Where a select by bins stopped: every key >= prefix is a candidate for the k largest.
struct BinPrefix {
  TopkKey prefix;       ///< the k-th largest key's bits decided so far, zeros below
  unsigned candidates;  ///< keys >= prefix: at least k (every key where there are fewer)
};

/// The bin of the k-th largest of a set of unique keys, given a histogram holding every one of
/// them (added after a barrier that followed its clear). Where more than max_candidates (>= k)
/// keys lie at or above that bin, its keys are counted again by their next 12 bits, and so on
/// down (keys crowd a bin where it is wide: 1 x 64M fp32 at K = 256 lists ~2,100 keys at or
/// above [8, 9); or tie: a constant row). After level 4 a bin holds at most 16 keys and at
/// level 5 one, so the descent ends for any max_candidates >= k. Each level visits every key
/// again. Called by the whole block; ends on a barrier.
template <int kThreads, typename ForEachKey>
__device__ BinPrefix block_bin_prefix(unsigned k, unsigned max_candidates, const ForEachKey& for_each_key,
                                      BinHistogram<kThreads>& histogram) {
  BinThreshold cut = histogram.threshold(k);
  TopkKey prefix = bin_floor_key(cut.bin);   // the decided bits of the k-th key, zeros below
  TopkKey decided = bin_floor_key(kBins - 1);  // which bits those are
  unsigned above = 0;                         // keys above the prefix's bin at every level so far
  unsigned candidates = cut.at_or_above;      // keys >= prefix
  for (int level = 1; candidates > max_candidates; ++level) {
    above += cut.at_or_above - histogram.counts[cut.bin];
    __syncthreads();  // every thread has read that count before the clear
    histogram.clear();
    __syncthreads();
    const int shift = digit_shift(level);
    for_each_key([&](TopkKey key) {
      if ((key & decided) == prefix) histogram.add_to_bin(static_cast<unsigned>(key >> shift) & (kBins - 1));
    });
    cut = histogram.threshold(k - above);  // starts with a barrier: every add has landed
    prefix |= TopkKey{cut.bin} << shift;
    decided |= TopkKey{kBins - 1} << shift;
    candidates = above + cut.at_or_above;
  }
  return {prefix, candidates};
}

/// block_bin_prefix for a set whose largest keys sit near a known value, `top` (the ordered bits
/// of the set's largest value; a key above it counts as at it, so any top is exact, and a close
/// one is fast): the histogram (cleared before a barrier, and empty) first counts the keys by
/// their distance below top, 2^12 ordered steps a bin, 4096 bins (two octaves; lower values share
/// bin 0). The largest keys of a set spread over many such bins, where the keys' own top 12 bits
/// (3 mantissa bits) gather them in a few, so that the k-th key's bin holds many more than k, or
/// a level further down is needed: split-k's span maxima at 1 x 64M fp32, K = 50 spent ~2 us and
/// ~5 us a block that way, and its merge, which sorted the ~220 listed keys at or above that bin
/// with the bitonic network, ran 10.1 -> 9.0 us by distance (K = 256 on 64M bf16: 23.2 -> 19.2;
/// H200, ncu, clocks untouched). Where the k-th key's bin holds more than max_candidates or is bin
/// 0 (ties, a flat set, values spread past two octaves), the select by the keys' own bits takes
/// over. Called by the whole block; ends on a barrier.
///
/// The first count may take the keys' values from elsewhere: for_each_value visits, for some of
/// the set's keys, each at most once, the ordered bits of a value at most that key's
/// (block_span_top_k: each thread's largest value, which its fold holds, for its largest span
/// maximum). Fewer or lower values give a lower k-th, so the prefix stays at or below the set's
/// k-th key; the candidates then count only what was visited.
template <int kThreads, typename ForEachValue, typename ForEachKey>
__device__ BinPrefix block_bin_prefix_below(uint32_t top, unsigned k, unsigned max_candidates,
                                            const ForEachValue& for_each_value, const ForEachKey& for_each_key,
                                            BinHistogram<kThreads>& histogram) {
  constexpr int kStepBits = 12;
  for_each_value([&](uint32_t value) {
    const uint32_t below = value < top ? (top - value) >> kStepBits : 0u;
    histogram.add_to_bin(kBins - 1 - min(below, kBins - 1));
  });
  const BinThreshold near = histogram.threshold(k);
  // The largest distance below top in the k-th largest key's bin: a key is in that bin or above
  // exactly when its value is at least top - lowest_below.
  const uint32_t lowest_below = ((kBins - 1 - near.bin) << kStepBits) | ((1u << kStepBits) - 1);
  if (near.bin > 0 && near.at_or_above <= max_candidates && lowest_below <= top)
    return {TopkKey{top - lowest_below} << 32, near.at_or_above};
  histogram.clear();  // threshold() ended on a barrier after its last read
  __syncthreads();
  for_each_key([&](TopkKey key) { histogram.add(key); });
  return block_bin_prefix(k, max_candidates, for_each_key, histogram);
}

/// block_bin_prefix_below counting the keys themselves first.
template <int kThreads, typename ForEachKey>
__device__ BinPrefix block_bin_prefix_below(uint32_t top, unsigned k, unsigned max_candidates,
                                            const ForEachKey& for_each_key, BinHistogram<kThreads>& histogram) {
  const auto values = [&](auto&& visit) {
    for_each_key([&](TopkKey key) { visit(static_cast<uint32_t>(key >> 32)); });
  };
  return block_bin_prefix_below(top, k, max_candidates, values, for_each_key, histogram);
}

/// The k largest of a set of unique keys whose largest value has the ordered bits `top`, sorted
/// descending in shared memory, given a cleared histogram (as block_bin_prefix_below): the keys
/// at or above the floor of the k-th largest (k plus part of a bin, or of a bin a level down) are
/// gathered and sorted. With k <= kMaxFastTopK - 15 (every caller's k <= kLargeK) the candidates
/// always fit. Called by the whole block.
template <int kThreads, typename ForEachKey>
__device__ const TopkKey* block_topk_sorted_from_bins(unsigned k, uint32_t top, const ForEachKey& for_each_key,
                                                      BinHistogram<kThreads>& histogram, BlockTopkStorage& storage) {
  if (threadIdx.x == 0) storage.count = 0;  // block_bin_prefix_below's threshold starts with a barrier
  const BinPrefix cut = block_bin_prefix_below(top, k, kMaxFastTopK, for_each_key, histogram);
  for_each_key([&](TopkKey key) {
    if (key >= cut.prefix) storage.winners[atomicAdd(&storage.count, 1u)] = key;
  });
  __syncthreads();
  return block_sort_winners<kThreads>(cut.candidates, storage);
}

}  // namespace softk::kernels
