// Step 4 of the cluster top-k kernel (topk_cluster.cu) for many candidates settled at the first
// level: the leader's last walk step cuts them into one range of keys a CTA, and each CTA sorts
// and writes one bucket, with no copies of other CTAs' runs. Only the kernels built for
// K > kLeaderSortMaxCandidates (kBucketSort) hold it, so it is apart from the finishes that
// every kernel holds.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_finish.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

namespace cg = cooperative_groups;

/// Past this many candidates, where the threshold came at the first level, the cluster sorts
/// them in buckets (finish_in_buckets): K = 1024 on rows 1-8 of 32000-256000 1.03-1.08x against
/// ranking them across the cluster. At K = 256 (~350 candidates) the buckets ran 0.95-0.96x on
/// rows of 32000 (H200, one run each), so those rows keep the ranking.
constexpr unsigned kBucketSortMinCandidates = 512;

/// Whether a row's `candidates`, settled at the first level or not, are sorted in buckets by a
/// kernel built with the bucket sort (kBucketSort: for K > kLeaderSortMaxCandidates only, so
/// that the kernels for smaller K hold none of its code).
template <bool kBucketSort>
__device__ __forceinline__ bool sorts_in_buckets(unsigned candidates, bool first_level, unsigned leader_sort_max) {
  return kBucketSort && first_level && candidates > leader_sort_max && candidates > kBucketSortMinCandidates;
}

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// Value bits below a level-0 bin: bin b holds the values (ordered bits) [b, b + 1) << kBinValueBits.
constexpr int kBinValueBits = 32 - kBinBits;

/// Lane l's splitter between buckets l and l + 1 of `ranks` (one warp): about (l + 1) / ranks of
/// the row's `total` candidates lie at or above it. From the leader's last walk step, where bin
/// top - l held `count` keys and `cumulative` lie at or above its floor (`above` of them in the
/// bins of earlier steps): the bin where the (l + 1)-th share ends, cut in proportion inside it,
/// as if its keys were spread evenly over its values. Only the buckets' balance rests on this,
/// never the answer: whatever splitters the CTAs share, the buckets are ranges of keys.
__device__ inline uint32_t bucket_splitter(unsigned ranks, unsigned total, unsigned above, unsigned cumulative,
                                    unsigned count, int top) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned target = (lane + 1) * total / ranks;
  int below = -1;  // the last lane whose bins hold fewer than `target` keys: a binary search over the lanes
  for (int step = 16; step > 0; step /= 2) {
    const unsigned reached = __shfl_sync(0xffffffffu, cumulative, below + step);
    if (reached < target) below += step;
  }
  const int last = below + 1;
  const unsigned reached = __shfl_sync(0xffffffffu, cumulative, last);
  const unsigned in_bin = __shfl_sync(0xffffffffu, count, last);
  const auto bin_end = [](int bin) {
    return static_cast<uint32_t>(min((static_cast<uint64_t>(bin) + 1) << kBinValueBits, uint64_t{0xFFFFFFFFu}));
  };
  if (target <= above) return bin_end(top);  // the share ends in an earlier step's bins
  const float share = __fdividef(static_cast<float>(target - (reached - in_bin)), static_cast<float>(in_bin));
  return bin_end(top - last) - static_cast<uint32_t>(share * static_cast<float>(1u << kBinValueBits));
}

/// The bucket of `key`: how many splitters lie above its value. Each term falls as the key
/// grows, so the buckets are ranges of keys, the largest in bucket 0, whatever the splitters.
__device__ __forceinline__ unsigned bucket_of(const ClusterShared& s, TopkKey key) {
  const auto value = static_cast<uint32_t>(key >> 32);
  unsigned bucket = 0;
#pragma unroll
  for (int i = 0; i < kLargeCluster; i += 4) {
    const uint4 cut = *reinterpret_cast<const uint4*>(&s.splitters[i]);
    bucket += (value < cut.x) + (value < cut.y) + (value < cut.z) + (value < cut.w);
  }
  return bucket;
}

/// Step 4 for more candidates, where the threshold came at the first level: every CTA sends its
/// keys at or above it to the CTA whose bucket holds them (bucket_of: the leader's splitters cut
/// the row's candidates into one range of keys a CTA), sorts what it received, and writes it at
/// its bucket's offset in the row, the candidates of the buckets before it.
template <typename Chunk>
__device__ void finish_in_buckets(const cg::cluster_group& cluster, ClusterShared& s, const Chunk& held,
                                  const LevelDecision& decision, const TopkProblem& problem, int64_t row) {
  ClusterCandidates& candidates = s.candidates;
  const unsigned ranks = cluster.num_blocks();
  if (threadIdx.x < 32) {  // the splitters, from the leader's walk step (the same bits in every CTA)
    const WalkStep& walk = s.inbox.walk;
    const unsigned count = walk.counts[threadIdx.x];
    const uint32_t splitter = bucket_splitter(ranks, decision.candidates, walk.above,
                                              walk.above + warp_inclusive_sum(count), count, walk.top);
    if (threadIdx.x < kLargeCluster) s.splitters[threadIdx.x] = threadIdx.x + 1 < ranks ? splitter : 0u;
  }
  // The keys are staged here first, then one remote atomic a bucket claims their room in its
  // owner: a remote atomic a key, serialised on each owner's counter, cost ~1.4 us at K = 1024
  // (H200).
  send_candidates(held, decision.prefix, &s.staged, candidates.row);
  __syncthreads();
  const unsigned staged = min(s.staged, kGatherCapacity);
  TopkKey keys[kGatheredPerThread];
  unsigned places[kGatheredPerThread];  // bucket << 16 | slot in this CTA's part of the bucket
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < staged) {
      keys[i] = candidates.row[j];
      const unsigned bucket = bucket_of(s, keys[i]);
      places[i] = bucket << 16 | atomicAdd(&s.bucket_sizes[bucket], 1u);
    }
  }
  __syncthreads();
  if (threadIdx.x < ranks && s.bucket_sizes[threadIdx.x] != 0)
    s.bucket_starts[threadIdx.x] = atomicAdd(cluster.map_shared_rank(&s.gathered, threadIdx.x), s.bucket_sizes[threadIdx.x]);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < staged) {
      const unsigned bucket = places[i] >> 16;
      const unsigned slot = s.bucket_starts[bucket] + (places[i] & 0xFFFFu);
      if (slot < kGatherCapacity) cluster.map_shared_rank(candidates.keys, bucket)[slot] = keys[i];
    }
  }
  cluster.sync();  // every key in its bucket
  // The offset and the row's normalizer: one remote round trip, taken by the last warp, which
  // has no part in the sort of a bucket of up to 512 keys.
  if (threadIdx.x >= kClusterThreads - 32) {
    const unsigned lane = threadIdx.x % 32;
    const unsigned rank = cluster.block_rank();
    const unsigned before = lane < rank ? *cluster.map_shared_rank(&s.gathered, lane) : 0u;
    const bool copies_state = lane == 31 && rank != 0;
    Normalizer row_normalizer{};
    if (copies_state) row_normalizer = *cluster.map_shared_rank(&s.row_normalizer, 0);
    const unsigned offset = warp_sum(before);
    if (lane == 0) s.bucket_offset = offset;
    if (copies_state) s.row_normalizer = row_normalizer;
  }
  const unsigned count = min(s.gathered, kGatherCapacity);
  const TopkKey* sorted = block_sort_descending<kClusterThreads>(candidates.keys, count, candidates.ranked);
  const Normalizer normalizer = s.row_normalizer;
  write_sorted_keys(sorted, count, s.bucket_offset, normalizer, problem, row);
  if (cluster.block_rank() == 0) write_row_status(problem, row, normalizer);
  // No CTA exits while another may still read its count. (A split arrive before the sort, as in
  // finish_across_cluster, had compute-sanitizer racecheck report the remote key stores against
  // the sort's reads, ordered though they are by the barrier before it.)
  cluster_arrive_relaxed();
  cluster_wait();
}

#endif  // sm_90+

}  // namespace softk::kernels
