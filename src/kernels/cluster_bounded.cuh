// Steps 2-4 of the cluster top-k kernel (topk_cluster.cu) for small K, with no threshold that
// the cluster agrees on: a lower bound of the row's K-th key from the warps' largest keys, every
// CTA's keys at or above it mailed to the leader, and the leader's sort of them.
//
// Why: at batch 1 the threshold's steps cost K = 50 ~3 us more than K = 1 (1 x 128256 f32: 7.22
// against 4.13 us, H100): a shared-memory count a key, the leader's walk of the cluster's counts,
// its mailed decision, a remote atomic a candidate and a cluster.sync() that orders them. Here a
// CTA needs one number from each other CTA and sends its keys without waiting for anything. What
// it measured (H100, 2026-11-24): 1.02-1.10x the threshold's kernel on batches of up to 256000
// tokens, and 0.95-0.98x on larger ones (kBoundedMaxBatchTokens). The steps it adds cost about
// what the removed ones did: by clock64 on the leader of 1 x 128256 f32 K = 50 (H100), ~6,300
// cycles to the bound (the load, the fold, two barriers and a remote read), ~1,300-1,500 to fill
// its region, ~300 waiting for mail, ~3,700 to sort and write ~140 keys by range bins. A step run
// twice in a loop costs the same the second time, so it is not instruction fetch; and ranking the
// ~140 keys by compares lost to the bins in every form tried (~3,600-8,400 cycles: a thread pair a
// key reading the regions, every warp holding all keys in registers, a thread pair a key reading
// packed keys 16 bytes at a time), each compare step waiting on its read.
//
// The bound. CTA r's bound b_r is the q-th largest of its warps' largest keys, q = ceil(K / CTAs):
// the CTA holds q keys >= b_r (one a warp). So the cluster holds at least q x CTAs >= K keys >=
// W = min_r b_r, the row's K-th key is >= W, and so is every winner. A CTA whose chunk gives
// fewer than q warps a key has no bound; where the others then vouch for fewer than K keys, W is
// the empty key and every key passes. On logits W passes ~3 K keys (simulated, 128256 tokens in
// 16 CTAs, K = 50: ~145, at most ~25 in one CTA).
//
// Exactness does not rest on that count: a CTA with more keys >= W than its region holds (flat or
// tied rows, winners crowded into one chunk) selects its own top K (block_radix_select), which
// hold every winner it has, and mails those. The leader so holds every winner and at least K keys.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/block_radix_select.cuh"
#include "kernels/block_range_bin_sort.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_chunk.cuh"
#include "kernels/cluster_finish.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/cluster_threshold.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

namespace cg = cooperative_groups;

/// The largest K that takes the bound: W passes ~3 K keys, and past it a CTA's region would hold
/// more than kBoundedRegionKeys.
constexpr int32_t kBoundedMaxK = 64;
/// Keys a CTA mails to the leader without selecting its own top K first.
constexpr unsigned kBoundedRegionKeys = 64;
static_assert(kBoundedRegionKeys >= static_cast<unsigned>(kBoundedMaxK), "a CTA's own top K fits its region");

/// What a CTA tells the others before the cluster barrier.
struct CtaBound {
  TopkKey bound;  ///< b_r, kEmptyKey where fewer than q warps hold a key
  unsigned nan;   ///< nonzero where a warp's (m, d) holds NaN: the row is reported whole
};

struct RowBound {
  TopkKey floor;  ///< W: every winner is >= it
  unsigned nan;   ///< nonzero where the row holds NaN
};

struct BoundedShared {
  SoftmaxState warp_states[kClusterWarps];
  TopkKey warp_best[kClusterWarps];
  CtaBound cta;
  RowBound row_bound;   ///< W as this CTA's warp 0 read it
  ClusterMailbox mail;  ///< the leader's: one arrival a CTA besides it, counting its keys and their count
  unsigned appended;    ///< keys >= W this CTA met (past kBoundedRegionKeys, only the first are kept)
  unsigned selected;    ///< the CTA's own top K, where it met too many
  unsigned region_counts[kLargeCluster];  ///< the leader's: the keys in each CTA's region
  unsigned region_starts[kLargeCluster];  ///< the leader's: where each region's keys start, packed
  Normalizer row_normalizer;              ///< the leader's: the row's (m, d), merged by its warp 1
  RadixSelectStorage select;
  /// CTA r's keys in region r of its own shared memory, mailed to region r of the leader's.
  alignas(128) TopkKey regions[kLargeCluster][kBoundedRegionKeys];
  alignas(128) TopkKey gathered[kLargeCluster * kBoundedRegionKeys];  ///< the leader's: every region, packed
  alignas(128) TopkKey ranked[kRankSortMaxK];
  /// The leader's: block_write_topk_by_range_bins' bins and the keys it gathers (at most every region's).
  alignas(128) unsigned char sort_room[range_bin_sort_bytes<kClusterThreads>(kLargeCluster * kBoundedRegionKeys)];
};

constexpr std::size_t kBoundedSharedBytes =
    (sizeof(BoundedShared) + kDynamicSharedAlignment - 1) / kDynamicSharedAlignment * kDynamicSharedAlignment;

/// q: the keys a CTA's bound vouches for. cluster_plan_for gives this form only K and CTAs with
/// q <= kClusterWarps.
__host__ __device__ constexpr unsigned bound_depth(unsigned k, unsigned ctas) { return (k + ctas - 1) / ctas; }

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__device__ __forceinline__ BoundedShared& bounded_shared() {
  return *reinterpret_cast<BoundedShared*>(cluster_dynamic_shared());
}

/// Warp 0, once its CTA's warp results are visible: b_r and the CTA's NaN flag into s.cta. Lane
/// w counts the warps' keys above warp w's by broadcast reads, on the path to every CTA's cluster
/// barrier (~700-780 cycles by clock64, where shuffling the keys took ~850).
__device__ __forceinline__ void publish_cta_bound(BoundedShared& s, unsigned q) {
  const unsigned lane = threadIdx.x % 32;
  const TopkKey key = lane < kClusterWarps ? s.warp_best[lane] : kEmptyKey;
  unsigned above = 0;  // warps with a larger key than this lane's
#pragma unroll
  for (int w = 0; w < kClusterWarps; ++w) above += s.warp_best[w] > key ? 1u : 0u;
  // Keys are unique, so one lane's key has exactly q - 1 above it, unless fewer than q warps
  // hold a key (empty keys tie below them all): then there is no bound.
  const unsigned at_depth = __ballot_sync(0xffffffffu, key != kEmptyKey && above == q - 1);
  const TopkKey bound = at_depth != 0 ? s.warp_best[__ffs(at_depth) - 1] : kEmptyKey;
  const float sum = lane < kClusterWarps ? s.warp_states[lane].sum : 0.0f;
  const unsigned nan = __any_sync(0xffffffffu, sum != sum);
  if (lane == 0) s.cta = {bound, nan};
}

/// Warp 0, after the cluster barrier: W and the row's NaN flag from every CTA's CtaBound (one
/// remote round trip), into s.row_bound for the CTA's other warps. (Every warp reading them
/// itself sent 512 remote loads at each CTA's one address: ~5,000 cycles, where this takes a
/// round trip and a barrier.)
__device__ __forceinline__ void publish_row_bound(const cg::cluster_group& cluster, BoundedShared& s, unsigned k,
                                                  unsigned q) {
  const unsigned lane = threadIdx.x % 32;
  TopkKey bound = kEmptyKey;
  unsigned nan = 0;
  if (lane < cluster.num_blocks()) {
    const CtaBound* cta = cluster.map_shared_rank(&s.cta, lane);
    bound = cta->bound;
    nan = cta->nan;
  }
  const unsigned vouching = __ballot_sync(0xffffffffu, bound != kEmptyKey);
  const TopkKey lowest = ~warp_max(bound != kEmptyKey ? ~bound : TopkKey{0});  // the least bound
  const bool enough = static_cast<unsigned>(__popc(vouching)) * q >= k;
  const unsigned any_nan = __any_sync(0xffffffffu, nan != 0);
  if (lane == 0) s.row_bound = {enough ? lowest : kEmptyKey, any_nan};
}

/// Fills this CTA's region with its keys >= floor or, where they pass the region, with its own
/// top k; returns how many it holds (block-uniform). held_max: the thread's largest value, so
/// that only threads that may hold a key >= floor look at their keys (~140 threads of a cluster's
/// 8192 on logits), and a warp without one skips the scan. Ends on a barrier.
template <typename Chunk>
__device__ unsigned fill_region(BoundedShared& s, const Chunk& held, float held_max, TopkKey floor, unsigned k,
                                unsigned rank) {
  const auto at_least = [&](TopkKey threshold) {
    return [&held, held_max, threshold](auto&& visit) {
      if (held_max >= key_threshold(threshold)) for_each_held_key_at_least_by_value(held, threshold, visit);
    };
  };
  append_keys_at_least(floor, at_least(floor), &s.appended, s.regions[rank], kBoundedRegionKeys);
  __syncthreads();
  const unsigned appended = s.appended;
  if (appended <= kBoundedRegionKeys) return appended;
  const TopkKey own_kth = block_radix_select<kClusterThreads>(k, at_least(floor), s.select);
  append_keys_at_least(own_kth, at_least(own_kth), &s.selected, s.regions[rank], kBoundedRegionKeys);
  __syncthreads();
  return k;  // unique keys: exactly k are >= the k-th
}

/// A CTA besides the leader: its region and count into the leader's, announced by one arrival.
__device__ __forceinline__ void mail_region(BoundedShared& s, unsigned rank, unsigned count) {
  for (unsigned i = threadIdx.x; i < count; i += kClusterThreads) send(&s.regions[rank][i], s.regions[rank][i], s.mail, 0);
  if (threadIdx.x == 0) {
    send(&s.region_counts[rank], count, s.mail, 0);
    arrive_expecting(s.mail, 0, count * static_cast<unsigned>(sizeof(TopkKey)) + static_cast<unsigned>(sizeof(unsigned)));
  }
}

/// Calls visit(r, i) for every key i the leader holds in region r, spread over the block.
template <typename Visit>
__device__ __forceinline__ void for_each_region_key(const BoundedShared& s, unsigned ctas, Visit&& visit) {
  for (unsigned slot = threadIdx.x; slot < ctas * kBoundedRegionKeys; slot += kClusterThreads) {
    const unsigned r = slot / kBoundedRegionKeys;
    const unsigned i = slot % kBoundedRegionKeys;
    if (i < s.region_counts[r]) visit(r, i);
  }
}

/// The leader's keys, region by region: the for_each_key of block_write_topk_by_range_bins.
struct RegionKeys {
  const BoundedShared& s;
  unsigned ctas;

  template <typename Visit>
  __device__ __forceinline__ void operator()(Visit&& visit) const {
    for_each_region_key(s, ctas, [&](unsigned r, unsigned i) { visit(s.regions[r][i]); });
  }
};

/// Where the range-bin sort hands back (a bin of more than kMaxRankedBinKeys tied keys): the
/// regions packed into s.gathered and sorted whole. Returns the sorted keys and their count.
__device__ const TopkKey* sort_packed_regions(BoundedShared& s, unsigned ctas, unsigned& total) {
  if (threadIdx.x < 32) {
    const unsigned count = threadIdx.x < ctas ? s.region_counts[threadIdx.x] : 0u;
    const unsigned inclusive = warp_inclusive_sum(count);
    if (threadIdx.x < ctas) s.region_starts[threadIdx.x] = inclusive - count;
  }
  __syncthreads();
  total = s.region_starts[ctas - 1] + s.region_counts[ctas - 1];
  for_each_region_key(s, ctas, [&](unsigned r, unsigned i) { s.gathered[s.region_starts[r] + i] = s.regions[r][i]; });
  __syncthreads();
  return block_sort_descending<kClusterThreads>(s.gathered, total, s.ranked);
}

/// The leader, once every region has landed and warp 1's normalizer is stored: the row's top k
/// from its regions by one counting sort over bins of [W, the row's maximum] (block_range_bin_sort.cuh:
/// a few barriers and no pass a key over the others, where a rank sort of ~140 keys took ~2,600
/// cycles and a packing step ~760), each entry written by the thread that ranks it.
__device__ void write_bounded_row(BoundedShared& s, unsigned ctas, TopkKey floor, const TopkProblem& problem,
                                  int64_t row) {
  __syncthreads();  // the region counts visible to every thread
  const Normalizer normalizer = s.row_normalizer;
  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  const RangeBins bins(key_threshold(floor), normalizer.max);
  const bool written = block_write_topk_by_range_bins<kClusterThreads>(
      static_cast<unsigned>(problem.k), RegionKeys{s, ctas}, bins, s.sort_room, sizeof(s.sort_room),
      [&](unsigned rank, TopkKey key) {
        write_topk_entry(key, normalizer, problem.log_probs, probs + rank, indices + rank);
      });
  if (!written) {
    unsigned total = 0;
    const TopkKey* sorted = sort_packed_regions(s, ctas, total);
    write_sorted_keys(sorted, total, 0, normalizer, problem, row);  // total >= K: the bound's count
  }
  write_row_status(problem, row, normalizer);
}

#endif  // sm_90+

}  // namespace softk::kernels
