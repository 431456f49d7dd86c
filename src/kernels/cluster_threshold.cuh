// How the CTAs of a cluster agree on a row's threshold (steps 2 and 3 of topk_cluster.cu): the
// leader sums the cluster's bin counts through distributed shared memory, walks them down from
// the row's maximum and mails every CTA its decision, a level at a time where winners tie in a
// bin. Apart from the finishes, which take the decision however it was reached.
#pragma once

#include <cooperative_groups.h>

#include "kernels/block_bin_threshold.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

namespace cg = cooperative_groups;

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// Bin b summed over the cluster's CTAs. The loop is unrolled to the largest cluster so that
/// every remote load is issued before the first add: a rolled loop waits one DSMEM round trip
/// (~200 ns) per CTA.
__device__ __forceinline__ unsigned cluster_count(const cg::cluster_group& cluster, ClusterShared& s, unsigned b) {
  const unsigned ranks = cluster.num_blocks();
  unsigned counts[kLargeCluster];
#pragma unroll
  for (unsigned r = 0; r < kLargeCluster; ++r) counts[r] = r < ranks ? cluster.map_shared_rank(s.counting.local.counts, r)[b] : 0u;
  unsigned sum = 0;
#pragma unroll
  for (unsigned r = 0; r < kLargeCluster; ++r) sum += counts[r];
  return sum;
}

/// Fetches every warp's value of a per-warp array of each of `ctas` CTAs into the calling warp:
/// lane l gets slots [kPerLane l, kPerLane (l + 1)) of the (rank, warp) order, fetch(rank, warp)
/// each, `none` past the last CTA. Independent loads: one round trip for all.
template <int kPerLane, typename T, typename Fetch>
__device__ __forceinline__ void gather_per_warp_by(unsigned ctas, const Fetch& fetch, T (&out)[kPerLane], T none) {
  const unsigned slots = ctas * kClusterWarps;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const unsigned slot = (threadIdx.x % 32) * kPerLane + i;
    out[i] = slot < slots ? fetch(slot / kClusterWarps, slot % kClusterWarps) : none;
  }
}

/// gather_per_warp_by from `per_warp`, kClusterWarps long in every CTA's shared memory, by remote
/// loads into the leader.
template <int kPerLane, typename T>
__device__ __forceinline__ void gather_per_warp(const cg::cluster_group& cluster, T* per_warp, T (&out)[kPerLane],
                                                T none) {
  gather_per_warp_by(
      cluster.num_blocks(), [&](unsigned rank, unsigned warp) { return *cluster.map_shared_rank(&per_warp[warp], rank); },
      out, none);
}
constexpr int kStatesPerLane = kLargeCluster * kClusterWarps / 32;

/// The row's (m, d) from every warp state of the cluster (one warp of the leader; every lane
/// gets the same bits). Not a chain of pairwise merges, whose two exponentials a step form the
/// leader's longest dependency chain: the maximum first, then every state rescaled to it at
/// once, summed in a fixed order (each lane its slots in order, then a butterfly, whose two
/// partners add the same two numbers), so the bits never depend on scheduling.
__device__ inline SoftmaxState merge_gathered_states(const SoftmaxState (&states)[kStatesPerLane], float k_exp) {
  float m = states[0].max;
#pragma unroll
  for (int i = 1; i < kStatesPerLane; ++i) m = fmaxf(m, states[i].max);
  m = warp_max(m);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kStatesPerLane; ++i) sum = __fadd_rn(sum, __fmul_rn(states[i].sum, rescale(states[i].max, m, k_exp)));
  return {m, warp_sum(sum)};
}
/// merge_gathered_states over every warp state of the cluster, gathered by one remote round trip.
__device__ inline SoftmaxState merge_row_state(const cg::cluster_group& cluster, SoftmaxState* warp_states, float k_exp) {
  SoftmaxState states[kStatesPerLane];
  gather_per_warp(cluster, warp_states, states, empty_state());
  return merge_gathered_states(states, k_exp);
}

struct WalkResult {
  bool nan_row;
  BinThreshold cut;
  unsigned in_bin;  ///< keys in cut.bin
};

/// Level 0 (warp 0 of the leader): the bin of the k-th largest key, walking the cluster's
/// counts down from the bin of the row's maximum, 32 bins a step (lane l reads bin top - l of
/// every CTA: one remote round trip a step). Logits put the K-th key within a few bins of the
/// maximum's, so this is one step where a full scan reads 4096 bins of every CTA; a row whose
/// maximum sits far above the rest (+inf) walks further. A NaN row (NaN keys lie outside the
/// walk) is reported before it.
template <bool kBucketSort>
__device__ WalkResult walk_from_max(const cg::cluster_group& cluster, ClusterShared& s, unsigned k) {
  SoftmaxState states[kStatesPerLane];
  gather_per_warp(cluster, s.warp_states, states, empty_state());
  float m = states[0].max;
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kStatesPerLane; ++i) {
    m = fmaxf(m, states[i].max);
    nan = nan || states[i].sum != states[i].sum;
  }
  if (__any_sync(0xffffffffu, nan)) return {true, {0, 0}, 0};
  m = warp_max(m);
  const unsigned lane = threadIdx.x % 32;
  unsigned above = 0;
  for (int top = static_cast<int>(key_bin(make_key(m, 0))); top >= 0; top -= 32) {
    const int bin = top - static_cast<int>(lane);
    const unsigned count = bin >= 0 ? cluster_count(cluster, s, static_cast<unsigned>(bin)) : 0u;
    const unsigned inclusive = warp_inclusive_sum(count);
    const unsigned reached = __ballot_sync(0xffffffffu, above + inclusive >= k);
    if (reached != 0) {
      const int first = __ffs(reached) - 1;
      const BinThreshold cut{static_cast<unsigned>(top - first), above + __shfl_sync(0xffffffffu, inclusive, first)};
      if constexpr (kBucketSort) {  // sent with the decision
        s.inbox.walk.counts[lane] = count;
        if (lane == 0) {
          s.inbox.walk.top = top;
          s.inbox.walk.above = above;
        }
      }
      return {false, cut, __shfl_sync(0xffffffffu, count, first)};
    }
    above += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  __trap();  // unreachable: a row without NaN has all its V >= k keys at or below its maximum's bin
}

/// Levels past the first (the whole leader CTA): the cluster's counts summed into `total`, then
/// scanned for the bin of the remaining-th largest matching key.
__device__ inline BinThreshold pull_and_scan(const cg::cluster_group& cluster, ClusterShared& s, unsigned remaining) {
  BinHistogram<kClusterThreads>& total = s.counting.total;
  for (unsigned b = threadIdx.x; b < kBins; b += kClusterThreads) total.counts[b] = cluster_count(cluster, s, b);
  return total.threshold(remaining);  // starts with a barrier: every sum is written
}

/// Sends the leader's inbox, where warp 0 of the leader composed the decision, to every other
/// CTA's, counted by its decision_mail (kDecisionBytes in 16-byte words, every store issued
/// before any completes), and marks the leader's own as arrived. (st.async into the sender's
/// own shared memory is refused in a cluster of one CTA.)
template <bool kBucketSort>
__device__ __forceinline__ void send_decision(const cg::cluster_group& cluster, ClusterShared& s) {
  constexpr unsigned kWords = kDecisionBytes<kBucketSort> / 16;
  const auto* words = reinterpret_cast<const uint4*>(&s.inbox);
  const unsigned lane = threadIdx.x % 32;
  for (unsigned i = lane; i < (cluster.num_blocks() - 1) * kWords; i += 32) {
    const unsigned word = i % kWords;
    send(words + word, words[word], s.decision_mail, 1 + i / kWords);
  }
  if (lane == 0) s.decision_mail.arrive();
}

/// The leader's step (the whole leader CTA, after the barrier that made every count visible):
/// find the digit of the remaining-th largest matching key, then fix the threshold or go one
/// level down, and send the decision to every CTA. Every remote read of the walk is done before
/// the decision leaves; warp 1's (the row's (m, d), read at level 0 while warp 0 walks) are
/// done by the next cluster barrier, which every path takes before a CTA exits.
template <bool kBucketSort>
__device__ void decide(const cg::cluster_group& cluster, ClusterShared& s, const LevelDecision& current, float k_exp) {
  LevelDecision next = current;
  if (current.level == 0) {
    if (threadIdx.x >= 64) return;  // warp 0 walks and sends the decision
    if (threadIdx.x >= 32) {
      // Warp 1 merges the row's (m, d) into its normalizer meanwhile, off the path every CTA waits on.
      const SoftmaxState merged = merge_row_state(cluster, s.warp_states, k_exp);
      if (threadIdx.x == 32) s.row_normalizer = Normalizer(merged, k_exp);
      return;
    }
    const WalkResult walk = walk_from_max<kBucketSort>(cluster, s, current.remaining);
    next.nan_row = walk.nan_row;
    next.prefix = bin_floor_key(walk.cut.bin);
    next.decided = TopkKey{kBins - 1} << digit_shift(0);
    next.candidates = walk.cut.at_or_above;
    next.done = walk.nan_row || next.candidates <= kGatherCapacity;
    next.remaining = current.remaining - (walk.cut.at_or_above - walk.in_bin);
    next.above = walk.cut.at_or_above - walk.in_bin;
  } else {
    const BinThreshold cut = pull_and_scan(cluster, s, current.remaining);  // its barrier: every remote read done
    if (threadIdx.x >= 32) return;
    const int shift = digit_shift(current.level);
    const unsigned above_bin = cut.at_or_above - s.counting.total.counts[cut.bin];
    next.prefix = current.prefix | (TopkKey{cut.bin} << shift);
    next.decided = current.decided | (TopkKey{kBins - 1} << shift);
    // Keys matching a level-4 prefix differ only in their low 4 bits, so at most 16 share that
    // level's bin and the count is at most K + 15: the search ends there at the latest (the
    // shift == 0 test only makes the bound visible to a reader).
    next.candidates = current.above + cut.at_or_above;
    next.done = next.candidates <= kGatherCapacity || shift == 0;
    next.remaining = current.remaining - above_bin;
    next.above = current.above + above_bin;
  }
  if (!next.done) ++next.level;
  if (threadIdx.x == 0) s.inbox.decision = next;
  __syncwarp();  // the message composed
  send_decision<kBucketSort>(cluster, s);
}

#endif  // sm_90+

}  // namespace softk::kernels
