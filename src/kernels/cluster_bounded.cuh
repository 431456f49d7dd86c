// Steps 2-4 of the cluster top-k kernel (topk_cluster.cu) for small K, with no threshold that
// the cluster agrees on: a lower bound W of the row's K-th key from the warps' largest keys;
// every CTA's keys at or above it (its region) sent to every other CTA; and each CTA ranking its
// own keys among all the regions' and writing those that rank below K.
//
// Why: at batch 1 the threshold's steps cost K = 50 ~3 us more than K = 1 (1 x 128256 f32: 7.22
// against 4.13 us, H100): a shared-memory count a key, the leader's walk of the cluster's counts,
// its mailed decision, a remote atomic a candidate and a cluster.sync() that orders them. Here a
// CTA needs one number from each other CTA and sends its keys without waiting for anything.
//
// Why every CTA ranks its own keys: when the leader alone sorted the ~140 keys (range bins), it
// spent ~3,700 cycles after the mail while 15 SMs waited; a rank by binary searches over sorted
// regions took ~2,800 there, and over 16 warps ~2,800 with the sort and packing. Here the
// regions go out all-to-all (a bulk copy each) and a CTA compares its ~10 keys with each region's
// ~10: by clock64 on 1 x 128256 f32 K = 50 (H100, 2026-11-24), ~6,350 cycles to W, ~1,600 to
// fill a region, ~800 until every region has landed, ~1,200 to rank and ~650 to write, ~10,700
// in all against ~13,000 at the leader (1.14-1.25x on batches of up to 256000 tokens at K = 50).
// The fill has since shed ~550-1,300 cycles (RegisterChunk::for_each_key_at_least).
// The row's (m, d) is the leader's warp 1's alone, from every CTA's warp states mailed to it,
// and mailed back with its region: merged by every CTA from remote reads, the cluster's 16 x 256
// remote reads took ~2,900 cycles after the barrier where the leader's alone took ~1,200. The
// leader's fill waits for that merge, but taking it off the fill lost in three forms (batches of
// up to 256000 tokens at K = 50, H100, 2026-11-24, with the states read remotely): merged after the
// fill and mailed apart, 0.92-1.00x; its remote reads before the fill and the merge after,
// 0.94-1.04x; every CTA's warp states sent to every CTA by bulk copies, each merging its own,
// 0.91-0.98x.
//
// The bound. CTA r's bound b_r is the q-th largest of the keys its warps offer, q = ceil(K / CTAs):
// each warp's largest key, or past K = 64 the largest keys of four of its threads (one a thread),
// so the CTA holds q keys >= b_r. So the cluster holds at least q x CTAs >= K keys >=
// W = min_r b_r, the row's K-th key is >= W, and so is every winner. A CTA whose chunk gives
// fewer than q keys to offer has no bound; where the others then vouch for fewer than K keys, W is
// the empty key and every key passes. On logits W passes ~3 K keys (simulated, 128256 tokens in
// 16 CTAs, K = 50: ~145, at most ~25 in one CTA; K = 256: ~390, at most ~50).
//
// Exactness does not rest on that count: a CTA with more keys >= W than its region holds (flat or
// tied rows, winners crowded into one chunk) selects its own top K (block_radix_select), which
// hold every winner it has, and shares those. So every winner is in one region, every key above a
// winner is a winner, and a winner's rank among the regions' keys is its rank in the row.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <cstring>

#include "kernels/block_radix_select.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_chunk.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/cluster_threshold.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

namespace cg = cooperative_groups;

/// The largest K that takes the bound (cluster_plan_for also asks for few enough rows and CTAs).
constexpr int32_t kBoundedMaxK = 256;
/// Up to this K a CTA vouches from its warps' largest keys (bound_warp_depth).
constexpr unsigned kBoundedShallowMaxK = 64;
/// Past kBoundedShallowMaxK, each warp offers its threads' kBoundedWarpDepth largest keys: with
/// one a warp, W is the least of a CTA's 16 warps' largest keys at K = 256 and passes ~1,500 keys
/// (simulated, 1 x 128256 in 16 CTAs), with two ~435, with four ~390, as many as every thread's
/// maximum would give (V 32000-256000, llm and normal logits).
constexpr unsigned kBoundedWarpDepth = 4;
/// The keys a CTA's region holds: its own top K where it meets more keys >= W than
/// region_capacity.
constexpr unsigned kBoundedRegionKeys = 256;
static_assert(kBoundedRegionKeys >= static_cast<unsigned>(kBoundedMaxK), "a CTA's own top K fits its region");

/// What a CTA mails every other CTA once its warps have folded their elements.
struct alignas(16) CtaBound {
  TopkKey bound;  ///< b_r, kEmptyKey where fewer than q warps hold a key
  unsigned nan;   ///< nonzero where a warp's (m, d) holds NaN: the row is reported whole
  unsigned unused;  ///< pads the mail to one 16-byte store
};
static_assert(sizeof(CtaBound) == 16, "one 16-byte st.async");

struct RowBound {
  TopkKey floor;  ///< W: every winner is >= it
  unsigned nan;   ///< nonzero where the row holds NaN
};

struct BoundedShared {
  /// The warp states by CTA: this CTA's own from its fold, and in the leader every other CTA's, mailed.
  alignas(16) SoftmaxState warp_states[kLargeCluster][kClusterWarps];
  TopkKey warp_best[kClusterWarps * kBoundedWarpDepth];  ///< warp w's bound_warp_depth keys from w x depth on
  /// By CTA: every other CTA's, mailed. This CTA's own slot stays unwritten: warp 0 keeps its own
  /// bound in registers (publish_row_bound).
  CtaBound bounds[kLargeCluster];
  RowBound row_bound;              ///< W as this CTA's warp 0 read it
  ClusterMailbox bounds_mail;      ///< the other CTAs' bounds: one arrival, the owner's expect
  ClusterMailbox states_mail;      ///< in the leader, the other CTAs' warp states: one arrival, its expect
  ClusterMailbox mail;             ///< one arrival from every other CTA, counting its region's keys and their count
  unsigned appended;    ///< keys >= W this CTA met (past region_capacity, only the first are kept)
  unsigned selected;    ///< the CTA's own top K, where it met too many
  unsigned region_counts[kLargeCluster];  ///< the keys in each CTA's region
  alignas(8) SoftmaxState row_state;     ///< the row's (m, d): merged by the leader's warp 1, mailed to the others
  RadixSelectStorage select;
  /// CTA r's keys in region r of its own shared memory, and of every other CTA's.
  alignas(128) TopkKey regions[kLargeCluster][kBoundedRegionKeys];
  unsigned own_ranks[kBoundedRegionKeys];  ///< each key of this CTA's region: the row's keys above it
};

constexpr std::size_t kBoundedSharedBytes =
    (sizeof(BoundedShared) + kDynamicSharedAlignment - 1) / kDynamicSharedAlignment * kDynamicSharedAlignment;

/// q: the keys a CTA's bound vouches for. cluster_plan_for gives this form only K and CTAs with
/// q <= kClusterWarps x bound_warp_depth(K).
__host__ __device__ constexpr unsigned bound_depth(unsigned k, unsigned ctas) { return (k + ctas - 1) / ctas; }

/// The keys a warp offers a CTA's bound: its largest up to kBoundedShallowMaxK (the one round of
/// K <= 64, as measured there), else its threads' kBoundedWarpDepth largest.
__host__ __device__ constexpr unsigned bound_warp_depth(unsigned k) {
  return k <= kBoundedShallowMaxK ? 1u : kBoundedWarpDepth;
}

/// The most keys >= W a CTA shares as they are: more, and it shares its own top K instead, which
/// costs a select but bounds what every CTA ranks (flat or tied rows).
__host__ __device__ constexpr unsigned region_capacity(unsigned k) {
  constexpr unsigned kFewest = 64;  // K = 50's ~25 keys at most in one CTA on logits, with room
  return k > kFewest ? k : kFewest;
}

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__device__ __forceinline__ BoundedShared& bounded_shared() {
  return *reinterpret_cast<BoundedShared*>(cluster_dynamic_shared());
}

/// One thread of every CTA, first: its mailboxes, expecting every other CTA's bound and, in the
/// leader, their warp states. Ready for sends once every CTA has passed a cluster barrier after it.
__device__ __forceinline__ void init_bounded_mail(BoundedShared& s, unsigned ctas, bool leader) {
  s.mail.init(ctas - 1);
  s.bounds_mail.init();
  s.bounds_mail.expect((ctas - 1) * static_cast<unsigned>(sizeof(CtaBound)));
  if (leader) {
    s.states_mail.init();
    s.states_mail.expect((ctas - 1) * static_cast<unsigned>(sizeof(s.warp_states[0])));
  }
}

/// Warp 0, once its CTA's warp results are visible: b_r, the q-th largest of the kClusterWarps x
/// kDepth keys its warps offer (each from a thread of its own, so the CTA holds q keys >= it), and
/// the CTA's NaN flag, to every lane. Lane l counts the offered keys above keys l and l + 32 by
/// broadcast reads (~700-780 cycles by clock64 at one key a warp, where shuffling the keys took
/// ~850).
template <unsigned kDepth>
__device__ __forceinline__ CtaBound cta_bound(const BoundedShared& s, unsigned q, unsigned rank) {
  constexpr unsigned kOffered = kClusterWarps * kDepth;
  constexpr unsigned kPerLane = (kOffered + 31) / 32;
  static_assert(kPerLane <= 2, "two keys a lane");
  const unsigned lane = threadIdx.x % 32;
  TopkKey key[kPerLane];
  unsigned above[kPerLane];  // offered keys larger than key[j]
#pragma unroll
  for (unsigned j = 0; j < kPerLane; ++j) {
    key[j] = lane + 32 * j < kOffered ? s.warp_best[lane + 32 * j] : kEmptyKey;
    above[j] = 0;
  }
#pragma unroll 16
  for (unsigned w = 0; w < kOffered; ++w) {
    const TopkKey offered = s.warp_best[w];
#pragma unroll
    for (unsigned j = 0; j < kPerLane; ++j) above[j] += offered > key[j] ? 1u : 0u;
  }
  // Keys are unique, so one offered key has exactly q - 1 above it, unless fewer than q are
  // real (empty keys tie below them all): then there is no bound.
  TopkKey bound = kEmptyKey;
#pragma unroll
  for (unsigned j = 0; j < kPerLane; ++j) {
    const unsigned at_depth = __ballot_sync(0xffffffffu, key[j] != kEmptyKey && above[j] == q - 1);
    if (at_depth != 0) bound = s.warp_best[32 * j + __ffs(at_depth) - 1];
  }
  const float sum = lane < kClusterWarps ? s.warp_states[rank][lane].sum : 0.0f;
  const unsigned nan = __any_sync(0xffffffffu, sum != sum);
  return {bound, nan, 0};
}

/// Warp 0, once its CTA's warp results are visible and every mailbox is ready: this CTA's bound
/// mailed to every other CTA (lane r to CTA r), then W and the row's NaN flag from every CTA's,
/// into s.row_bound for the CTA's other warps. Why mailed: read remotely after a cluster barrier,
/// the bounds took that barrier (~390 cycles) and a remote round trip on the path every CTA waits
/// on; and every warp reading them itself sent 512 remote loads at each CTA's one address.
template <unsigned kDepth>
__device__ __forceinline__ void publish_row_bound(BoundedShared& s, unsigned k, unsigned q, unsigned ctas,
                                                  unsigned rank) {
  const unsigned lane = threadIdx.x % 32;
  const CtaBound own = cta_bound<kDepth>(s, q, rank);
  if (lane < ctas && lane != rank) {
    uint4 bits;
    memcpy(&bits, &own, sizeof bits);
    send(reinterpret_cast<const uint4*>(&s.bounds[rank]), bits, s.bounds_mail, lane);
  }
  s.bounds_mail.wait(0);
  TopkKey bound = kEmptyKey;
  unsigned nan = 0;
  if (lane < ctas) {
    const CtaBound cta = lane == rank ? own : s.bounds[lane];
    bound = cta.bound;
    nan = cta.nan;
  }
  const unsigned vouching = __ballot_sync(0xffffffffu, bound != kEmptyKey);
  const TopkKey lowest = ~warp_max(bound != kEmptyKey ? ~bound : TopkKey{0});  // the least bound
  const bool enough = static_cast<unsigned>(__popc(vouching)) * q >= k;
  const unsigned any_nan = __any_sync(0xffffffffu, nan != 0);
  if (lane == 0) s.row_bound = {enough ? lowest : kEmptyKey, any_nan};
}

/// Every thread, after publish_row_bound (warp 0) and the leader's (m, d) merge (its warp 1): W
/// from s.row_bound made visible. Warp 1 takes it through a barrier of its own, which warp 0
/// passes without waiting, so that the leader's other warps go on to their fill while warp 1
/// merges (~1,200 cycles after W; the fill's barrier waits for warp 1, and the row state is read
/// only after it). Measured with the leader's sort: 1.02-1.04x at batch 1 (H100, 2026-11-24).
/// Named barriers 1 and 2: the kernels use no others but 0.
__device__ __forceinline__ void await_row_bound() {
  constexpr int kOthersBarrier = 1;
  constexpr int kWarpOneBarrier = 2;
  const unsigned warp = threadIdx.x / 32;
  if (warp == 0) asm volatile("bar.arrive %0, %1;" ::"n"(kWarpOneBarrier), "n"(64) : "memory");
  if (warp == 1)
    asm volatile("bar.sync %0, %1;" ::"n"(kWarpOneBarrier), "n"(64) : "memory");
  else
    asm volatile("bar.sync %0, %1;" ::"n"(kOthersBarrier), "n"(kClusterThreads - 32) : "memory");
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
      if (held_max >= key_threshold(threshold)) held.for_each_key_at_least(threshold, visit);
    };
  };
  const unsigned capacity = region_capacity(k);
  append_keys_at_least(floor, at_least(floor), &s.appended, s.regions[rank], capacity);
  fence_shared_for_bulk_copy();  // the region goes out by share_region's bulk copies
  __syncthreads();
  const unsigned appended = s.appended;
  if (appended <= capacity) return appended;
  const TopkKey own_kth = block_radix_select<kClusterThreads>(k, at_least(floor), s.select);
  append_keys_at_least(own_kth, at_least(own_kth), &s.selected, s.regions[rank], kBoundedRegionKeys);
  fence_shared_for_bulk_copy();
  __syncthreads();
  return k;  // unique keys: exactly k are >= the k-th
}

/// Warp 1 of every CTA but the leader, once its warp states are fenced for bulk copies and every
/// mailbox is ready: them into the leader's slot `rank`, by one bulk copy.
__device__ __forceinline__ void send_warp_states_to_leader(BoundedShared& s, unsigned rank) {
  constexpr auto kBytes = static_cast<unsigned>(sizeof(s.warp_states[0]));
  static_assert(kBytes % 16 == 0, "whole 16-byte units");
  if (threadIdx.x % 32 == 0) send_bulk(s.warp_states[rank], s.warp_states[rank], kBytes, s.states_mail, 0);
}

/// The leader's warp 1, once the other CTAs' warp states have landed: the row's (m, d), merged
/// as merge_row_state merges them (the K = 1 kernel's bits), from its own shared memory.
__device__ __forceinline__ SoftmaxState merge_mailed_states(BoundedShared& s, unsigned ctas, float k_exp) {
  s.states_mail.wait(0);
  SoftmaxState states[kStatesPerLane];
  gather_per_warp_by(ctas, [&](unsigned rank, unsigned warp) { return s.warp_states[rank][warp]; }, states,
                     empty_state());
  return merge_gathered_states(states, k_exp);
}

/// The leader's warp 1: the row's (m, d) into every CTA's s.row_state (its own by a store, the
/// others' by mail), so that every CTA writes its own winners with the same bits.
__device__ __forceinline__ void share_row_state(BoundedShared& s, unsigned ctas, const SoftmaxState& state) {
  static_assert(sizeof(SoftmaxState) == sizeof(unsigned long long), "(m, d) in one 8-byte store");
  const unsigned lane = threadIdx.x % 32;
  unsigned long long bits;
  memcpy(&bits, &state, sizeof bits);
  if (lane == 0)
    s.row_state = state;
  else if (lane < ctas)
    send(reinterpret_cast<const unsigned long long*>(&s.row_state), bits, s.mail, lane);
}

/// This CTA's region and its count into region `rank` of every other CTA, each announced by one
/// arrival at that CTA's mailbox (the leader's counting the row's state too): lane 0 of warp `to`
/// sends to CTA `to`, the region by one bulk copy. After fill_region (its fence and barrier).
__device__ __forceinline__ void share_region(BoundedShared& s, unsigned ctas, unsigned rank, unsigned count) {
  static_assert(kClusterWarps >= kLargeCluster, "a warp a receiver");
  const unsigned to = threadIdx.x / 32;
  if (threadIdx.x % 32 != 0 || to >= ctas || to == rank) return;
  // Whole 16-byte units: an odd count carries one slot past it, which the receiver never reads.
  const unsigned bytes = (count * static_cast<unsigned>(sizeof(TopkKey)) + 15u) / 16u * 16u;
  const unsigned state_bytes = rank == 0 ? static_cast<unsigned>(sizeof(SoftmaxState)) : 0u;
  if (bytes != 0) send_bulk(s.regions[rank], s.regions[rank], bytes, s.mail, to);
  send(&s.region_counts[rank], count, s.mail, to);
  arrive_expecting(s.mail, to, bytes + static_cast<unsigned>(sizeof(unsigned)) + state_bytes);
}

/// Once every region has landed and s.own_ranks is zeroed: this CTA's keys written where they rank
/// below k among all the regions' keys. Warp w counts the keys of region w above each of this
/// CTA's (~10 compares a key on logits, spread over the SM's four schedulers). Every winner is in
/// one region, and every key above a winner is a winner, so ranks 0..k-1 are each written once,
/// by the CTA that holds that key. `own_count`: this CTA's region's, block-uniform. No barrier
/// before the counts: each thread waited for the mail itself, and the CTA's own region and count
/// are its fill's.
__device__ void write_own_winners(BoundedShared& s, unsigned ctas, unsigned rank, unsigned own_count,
                                  const Normalizer& normalizer, const TopkProblem& problem, int64_t row) {
  static_assert(kClusterWarps >= kLargeCluster, "a warp a region");
  const unsigned warp = threadIdx.x / 32;
  if (warp < ctas) {
    const unsigned n = warp == rank ? own_count : s.region_counts[warp];
    const TopkKey* region = s.regions[warp];
    for (unsigned i = threadIdx.x % 32; i < own_count; i += 32) {
      const TopkKey own = s.regions[rank][i];
      unsigned above = 0;
#pragma unroll 4
      for (unsigned j = 0; j < n; ++j) above += region[j] > own ? 1u : 0u;  // broadcast reads
      if (above != 0) atomicAdd(&s.own_ranks[i], above);
    }
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < own_count; i += kClusterThreads) {
    const unsigned place = s.own_ranks[i];
    if (place < static_cast<unsigned>(problem.k))
      write_topk_entry(s.regions[rank][i], normalizer, problem.log_probs, problem.probs + row * problem.k + place,
                       problem.indices + row * problem.k + place);
  }
}

#endif  // sm_90+

}  // namespace softk::kernels
