// The sorted top-K of a block's candidates by one counting sort: bins of value spread over the
// candidates' own range [lowest, row max], a histogram, a scan, a scatter of the keys at or above
// the K-th key's bin into their bins' places, and each key's rank inside its bin.
//
// Why: a fused block's candidates are every key >= a lower bound of the row's K-th (a few
// thousand at K = 1024), and the radix select, gather and bitonic sort of the winners cost ~29,000
// cycles a block there (H200 trace, 256 x 128256 f32, both blocks of an SM at once; the sort alone
// 14,000), with DRAM idle, as every block of a one-wave batch runs them at the same time. This
// takes five barriers, and per key two shared-memory atomics and one compare for each other key
// of its bin. Bins fixed in the value's top bits (block_bin_threshold.cuh) would put hundreds of
// candidates in a bin; over the candidates' own range they hold a few (estimated from the llm
// logits' density: ~10 keys in the K-th key's bin in fp32 at K = 1024; in bf16 a value's ties, ~50).
//
// Exactness: a bin is a range of keys (bin_of is monotone), so bins in order and ranks inside
// them are the one order of unique keys, ties included. A bin too large to rank by compares, or
// a gather past the room given, hands the block back to the caller before anything is written.
#pragma once

#include <cstddef>

#include "kernels/block_scan.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

constexpr int kRangeBinBits = 11;
constexpr unsigned kRangeBins = 1u << kRangeBinBits;
/// The most keys a bin at or above the K-th key's may hold: ranking a key costs a compare with
/// each key of its bin, so a bin of n costs n^2 / threads compares a thread.
constexpr unsigned kMaxRankedBinKeys = 256;

/// Maps a key to its bin, 0 holding the largest values. Monotone: a larger key never lands in a
/// higher-numbered bin, so every bin is a range of keys, whatever the bounds (they set only how
/// evenly the keys spread).
class RangeBins {
 public:
  /// Bins spread over [lowest, top]: the candidates' lower bound and the row's largest value.
  __device__ __forceinline__ RangeBins(float lowest, float top) : top_(key_value_bits(top)) {
    const uint32_t bottom = key_value_bits(lowest);
    const uint32_t span = top_ > bottom ? top_ - bottom : 0u;
    shift_ = max(0, 32 - __clz(span) - kRangeBinBits);  // span >> shift_ < kRangeBins
  }

  __device__ __forceinline__ unsigned operator()(TopkKey key) const {
    const auto value = static_cast<uint32_t>(key >> 32);
    const uint32_t below_top = value >= top_ ? 0u : top_ - value;
    return min(below_top >> shift_, kRangeBins - 1);
  }

 private:
  uint32_t top_;
  int shift_;
};

template <int kThreads>
struct RangeBinSortStorage {
  static_assert(kThreads % 32 == 0 && kRangeBins % (4 * kThreads) == 0, "whole warps, whole uint4s of bins a thread");
  /// A bin's count, then the place of its first key (the keys in bins before it), then, as the
  /// scatter claims places, the place past its last.
  alignas(16) unsigned places[kRangeBins];
  unsigned warp_totals[kThreads / 32];
  unsigned cut_bin;   ///< the bin of the K-th largest key
  unsigned gathered;  ///< keys in bins up to cut_bin; ~0u when there are fewer than K keys
  unsigned too_large;  ///< nonzero when a bin up to cut_bin holds more than kMaxRankedBinKeys
};

/// The bytes block_write_topk_by_range_bins needs for `gathered` keys.
template <int kThreads>
__host__ __device__ constexpr std::size_t range_bin_sort_bytes(unsigned gathered) {
  return sizeof(RangeBinSortStorage<kThreads>) + std::size_t{gathered} * sizeof(TopkKey);
}

/// Writes the k largest of the unique keys `for_each_key` visits (across the block, twice) in
/// descending order, through write(rank, key) for ranks 0..k-1, each from one thread, and returns
/// true; or returns false, having written nothing, when a bin up to the k-th key's holds more
/// than kMaxRankedBinKeys keys, when there are fewer than k keys, or when `spare` (16-byte
/// aligned shared memory, spare_bytes long, apart from the keys) cannot hold those bins' keys.
/// The answer is block-uniform. Called by all kThreads threads with the same k and bins (built
/// from block-uniform bounds), which must have passed a barrier since the keys were written.
/// Unique keys matter: two equal keys would take one rank and leave a slot unwritten. Starts
/// with no barrier and ends on none, so `spare` may be used again only after a barrier.
template <int kThreads, typename ForEachKey, typename Write>
__device__ bool block_write_topk_by_range_bins(unsigned k, const ForEachKey& for_each_key, const RangeBins& bin_of,
                                               void* spare, std::size_t spare_bytes, Write&& write) {
  constexpr int kBinsPerThread = kRangeBins / kThreads;
  if (spare_bytes < range_bin_sort_bytes<kThreads>(k)) return false;
  auto& s = *static_cast<RangeBinSortStorage<kThreads>*>(spare);
  TopkKey* gathered = reinterpret_cast<TopkKey*>(&s + 1);
  const auto room = static_cast<unsigned>((spare_bytes - sizeof(s)) / sizeof(TopkKey));

  for (unsigned b = threadIdx.x; b < kRangeBins; b += kThreads) s.places[b] = 0;
  if (threadIdx.x == 0) {
    s.gathered = ~0u;
    s.too_large = 0;
  }
  __syncthreads();
  for_each_key([&](TopkKey key) { atomicAdd(&s.places[bin_of(key)], 1u); });
  __syncthreads();

  // Thread t owns bins [t kBinsPerThread, (t + 1) kBinsPerThread); an exclusive scan over the
  // threads gives each its first bin's place.
  const unsigned first_bin = threadIdx.x * kBinsPerThread;
  unsigned counts[kBinsPerThread];
  load_words(&s.places[first_bin], counts);
  unsigned total = 0;
#pragma unroll
  for (int i = 0; i < kBinsPerThread; ++i) total += counts[i];
  unsigned place = block_exclusive_sum(total, s.warp_totals);
  unsigned firsts[kBinsPerThread];  // firsts[i]: the place of bin first_bin + i
#pragma unroll
  for (int i = 0; i < kBinsPerThread; ++i) {
    firsts[i] = place;
    if (place < k) {  // a bin at or above the k-th key's
      if (counts[i] > kMaxRankedBinKeys) atomicOr(&s.too_large, 1u);
      if (k <= place + counts[i]) {  // exactly one thread, one bin
        s.cut_bin = first_bin + i;
        s.gathered = place + counts[i];
      }
    }
    place += counts[i];
  }
  // Only this thread touches its bins until the barrier; 16-byte stores, as the loads.
  auto* place_quads = reinterpret_cast<uint4*>(&s.places[first_bin]);
#pragma unroll
  for (int q = 0; q < kBinsPerThread / 4; ++q)
    place_quads[q] = make_uint4(firsts[4 * q], firsts[4 * q + 1], firsts[4 * q + 2], firsts[4 * q + 3]);
  __syncthreads();
  const unsigned gathered_count = s.gathered;
  if (s.too_large != 0 || gathered_count > room) return false;  // block-uniform; also fewer than k keys
  const unsigned cut_bin = s.cut_bin;

  for_each_key([&](TopkKey key) {
    const unsigned bin = bin_of(key);
    if (bin <= cut_bin) gathered[atomicAdd(&s.places[bin], 1u)] = key;
  });
  __syncthreads();  // every bin's keys placed; places[b] is now the place past bin b's last key

  // A key's rank: its bin's first place plus the keys of its bin above it. The lanes of a warp
  // mostly share a bin, so their loads of its keys are broadcasts.
  for (unsigned p = threadIdx.x; p < gathered_count; p += kThreads) {
    const TopkKey key = gathered[p];
    const unsigned bin = bin_of(key);
    const unsigned begin = bin == 0 ? 0u : s.places[bin - 1];
    const unsigned end = s.places[bin];
    unsigned rank = begin;
    for (unsigned j = begin; j < end; ++j) rank += gathered[j] > key ? 1u : 0u;
    if (rank < k) write(rank, key);
  }
  return true;
}

}  // namespace softk::kernels
