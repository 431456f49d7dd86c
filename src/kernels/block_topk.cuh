// The steps of an exact top-k once keys can be visited, by a block or a warp: select the K-th key,
// gather the K winners into shared memory, sort them (in shared memory and in registers), and
// write them out as (probability, index).
#pragma once

#include <type_traits>

#include <math_constants.h>

#include "kernels/block_radix_select.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/warp_collectives.cuh"
#include "softk/topk.hpp"

namespace softk::kernels {

/// Up to this k the rank sort (k^2 / threads broadcast reads, one barrier) beats the bitonic
/// network (log^2 k barriers); above it the network wins by far (k = 1024: ~17 us vs ~2 us).
/// Measured against 128 (H200, one run, auto): the cluster kernel's K = 1024 buckets of ~130-190
/// keys (8-16 CTAs a row, rows 1-8) 1.02-1.03x (8 x 32000 f32 8.53 -> 8.28 us), the rest
/// 0.99-1.01x; at 256, 64 rows of 32000 at K = 256 read 0.98x. In the cluster kernels, ranking
/// with several lanes a key (shuffles summing their counts) lost to one thread a key, whose reads
/// are broadcasts and unroll: 0.91-0.96x at K = 50 on rows 1-8 (RankFewBy: where a warp a key wins).
constexpr unsigned kRankSortMaxK = 192;

struct BlockTopkStorage {
  RadixSelectStorage select;
  unsigned count;
  TopkKey winners[kMaxFastTopK];  ///< gathered, then sorted in place (descending)
  TopkKey ranked[kRankSortMaxK];  ///< the rank sort's output (small k)
};

/// Visits (logit, token index) of every element of a group from a segment whose element 0 is
/// token first_index of the row.
template <int N, int W, typename Visit>
__device__ __forceinline__ void visit_elements(const ElementGroup<N, W>& group, int64_t first_index, Visit&& visit) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < W; ++i) visit(group.x[n][i], first_index + group.offset[n] + i);
}

/// Visits the key of every element of a group, as visit_elements.
template <int N, int W, typename Visit>
__device__ __forceinline__ void visit_keys(const ElementGroup<N, W>& group, int64_t first_index, Visit&& visit) {
  visit_elements(group, first_index, [&](float x, int64_t index) { visit(make_key(x, index)); });
}

/// Visits the key of every element of a group at or above `prefix`, forming a key only where the
/// element's value reaches `floor` (key_threshold(prefix): a necessary condition). For scans where
/// few do and the keys' 64-bit arithmetic would cost every element.
template <int N, int W, typename Visit>
__device__ __forceinline__ void visit_keys_at_least(const ElementGroup<N, W>& group, int64_t first_index,
                                                    TopkKey prefix, float floor, Visit&& visit) {
  visit_elements(group, first_index, [&](float x, int64_t index) {
    if (x >= floor) {
      const TopkKey key = make_key(x, index);
      if (key >= prefix) visit(key);
    }
  });
}

/// Visits the keys of every element of a row segment (streamed from memory) across a team (a
/// block or a warp: block_radix_select.cuh): the key source of the exact paths.
template <typename Team, typename T>
struct TeamRowKeys {
  RowSegment<T> segment;

  template <typename Visit>
  __device__ __forceinline__ void operator()(Visit&& visit) const {
    for_each_element<4>(segment, static_cast<int>(Team::rank()), Team::kSize,
                        [&](const auto& group) { visit_keys(group, segment.first_index, visit); });
  }
};

/// TeamRowKeys across a whole block.
template <int kThreads, typename T>
using RowKeys = TeamRowKeys<BlockTeam<kThreads>, T>;

// The in-warp bitonic steps below take top-k keys, or plain fp32 logits where only a value is
// wanted (the warp-per-row kernel's seeds: half the shuffles, one instruction a compare).

/// One compare-exchange at `stride` across the warp: the lower position of the pair keeps the
/// larger value in a descending run, the smaller in an ascending one. One compare and a select,
/// where max and min (both formed, then one chosen) cost two 64-bit compares and four selects.
template <typename Key>
__device__ __forceinline__ Key warp_compare_exchange(Key x, unsigned stride, unsigned lane, bool descending) {
  const Key partner = __shfl_xor_sync(0xffffffffu, x, stride);
  const bool keeps_larger = ((lane & stride) == 0) == descending;
  return (partner > x) == keeps_larger ? partner : x;  // equal values: either is the answer
}

/// One bitonic merge step of every stride from 16 down to 1 (or from first_stride down), in
/// registers: a lane holds the keys at positions p (a) and p + 32 (b) of its warp's 64, whose
/// runs are sorted descending or ascending as a_descending / b_descending say. Unrolled with
/// constant strides: a runtime stride loop measured ~2x slower for the same shuffles.
template <typename Key>
__device__ __forceinline__ void warp_bitonic_steps(Key& a, Key& b, unsigned lane, bool a_descending,
                                                   bool b_descending, unsigned first_stride = 16) {
#pragma unroll
  for (unsigned stride = 16; stride > 0; stride /= 2) {
    if (stride > first_stride) continue;
    a = warp_compare_exchange(a, stride, lane, a_descending);
    b = warp_compare_exchange(b, stride, lane, b_descending);
  }
}

/// The stride-32 step and then strides 16..1 of a bitonic merge whose run holding the lane's
/// keys is sorted descending or ascending.
template <typename Key>
__device__ __forceinline__ void warp_bitonic_merge(Key& a, Key& b, unsigned lane, bool descending) {
  if ((a < b) == descending) {  // stride 32: positions p and p + 32 are a lane's own two keys
    const Key t = a;
    a = b;
    b = t;
  }
  warp_bitonic_steps(a, b, lane, descending, descending);
}

/// Sorts the 32 keys a warp holds, one a lane, descending (lane 0 the largest).
template <typename Key>
__device__ __forceinline__ void warp_sort_lanes(Key& a, unsigned lane) {
#pragma unroll
  for (unsigned size = 2; size <= 32; size *= 2)
#pragma unroll
    for (unsigned stride = size / 2; stride > 0; stride /= 2) a = warp_compare_exchange(a, stride, lane, (lane & size) == 0);
}

/// Sorts the 64 keys a warp holds, two a lane (positions pa and pa + 32 of their list, pa =
/// 64 run + lane), into the direction of the run of 128 holding them: descending where
/// (pa & 64) == 0, as for a list of only these 64 (pa = lane). Runs of 2..32 inside the warp
/// alternate in direction; then the warp merges its 64. No shared memory, no barrier.
template <typename Key>
__device__ __forceinline__ void warp_sort_run(Key& a, Key& b, unsigned pa) {
  const unsigned lane = pa % 32;
  const unsigned pb = pa + 32;
#pragma unroll
  for (unsigned size = 2; size <= 32; size *= 2)
    warp_bitonic_steps(a, b, lane, (pa & size) == 0, (pb & size) == 0, size / 2);
  warp_bitonic_merge(a, b, lane, (pa & 64) == 0);
}

/// Of the 128 keys a warp holds, four a lane (positions lane and lane + 32 of one list of 64 in
/// a and b, of another in c and d), leaves the 64 largest in a and b, sorted descending (position
/// lane in a, lane + 32 in b). The first list is sorted descending, the second ascending; together
/// they form a bitonic run of 128, and the larger key of each pair at stride 64 (a against c, b
/// against d) is its upper half: the 64 largest, itself bitonic, which one merge sorts.
template <typename Key>
__device__ __forceinline__ void warp_top64_of_128(Key& a, Key& b, Key c, Key d, unsigned lane) {
  warp_sort_run(a, b, lane);
  warp_sort_run(c, d, lane + 64);  // (pa & 64) != 0: ascending
  a = max(a, c);
  b = max(b, d);
  warp_bitonic_merge(a, b, lane, true);
}

/// The length block_bitonic_sort_descending sorts n keys in: the next power of two, at least
/// 64 (a warp's run), the keys past n padded with kEmptyKey.
__host__ __device__ constexpr unsigned bitonic_sort_length(unsigned n) {
  unsigned length = 64;
  while (length < n) length *= 2;
  return length;
}

/// Sorts keys[0, n) descending in place; n is a power of two, at least 64 (bitonic_sort_length).
/// Keys are unique, so the network's result is the one order there is.
///
/// A bitonic network whose stages of stride < 64 stay inside a warp: a warp sorts a run of 64
/// keys [64c, 64c + 64) in two registers a lane (positions p and p + 32), so stride 32 is a swap
/// within a lane and strides 16..1 are shuffles; only the stages of stride >= 64 go through
/// shared memory, each behind a barrier. For n = 1024 that is 15 barriers instead of 55. Past
/// 2 x kThreads keys (the cluster kernel's candidates) a warp takes every kWarps-th run in turn.
/// (H200, 264 blocks of 512 threads sorting at once, mean cycles a block: n = 1024 ~16,800,
/// 512 ~8,800, 256 ~5,000; ~20,000 / 11,000 / 6,400 with the in-warp steps in runtime loops,
/// ~23,500 at n = 1024 with every stage through shared memory.)
template <int kThreads>
__device__ void block_bitonic_sort_descending(TopkKey* keys, unsigned n) {
  static_assert(kThreads % 32 == 0, "whole warps");
  constexpr unsigned kWarps = kThreads / 32;
  const unsigned lane = threadIdx.x % 32;
  for (unsigned run = threadIdx.x / 32; run < n / 64; run += kWarps) {
    const unsigned pa = run * 64 + lane;
    TopkKey a = keys[pa];
    TopkKey b = keys[pa + 32];
    warp_sort_run(a, b, pa);
    keys[pa] = a;
    keys[pa + 32] = b;
  }
  __syncthreads();
  for (unsigned size = 128; size <= n; size *= 2) {  // strides size/2 .. 64 cross warps
    for (unsigned stride = size / 2; stride >= 64; stride /= 2) {
      for (unsigned i = threadIdx.x; i < n / 2; i += kThreads) {
        const unsigned lo = 2 * i - (i & (stride - 1));
        const unsigned hi = lo + stride;
        const bool descending = (lo & size) == 0;  // direction of the bitonic run holding lo
        const TopkKey x = keys[lo], y = keys[hi];
        if ((x < y) == descending) {
          keys[lo] = y;
          keys[hi] = x;
        }
      }
      __syncthreads();
    }
    for (unsigned run = threadIdx.x / 32; run < n / 64; run += kWarps) {
      const unsigned pa = run * 64 + lane;
      TopkKey a = keys[pa];
      TopkKey b = keys[pa + 32];
      warp_bitonic_merge(a, b, lane, (pa & size) == 0);
      keys[pa] = a;
      keys[pa + 32] = b;
    }
    __syncthreads();
  }
}

/// Up to this many keys the rank sort may give a warp a key (RankFewBy::warp).
constexpr unsigned kWarpRankMaxKeys = 64;

/// Who ranks a key of a short list (up to kWarpRankMaxKeys) in the rank sort. A thread ranking 52
/// keys waits on its reads of them in turn: ~1,150 cycles in split-k's span chunks, ~2,400 in its
/// merge, and ~760 and ~990 by a warp a key (clock64, H100). The cluster kernels keep a thread a
/// key: with a warp a key their register-held chunks spilled a little more, and 8 x 128256 fp32
/// at K = 50 read 0.98x (H200).
enum class RankFewBy { thread, warp };

/// The rank sort: every key of keys[0, n) (unique) whose rank, the count of larger keys, is below
/// `kept` lands at sorted[rank]. A thread a key, whose reads of the others are broadcasts across
/// the warp; or, up to kWarpRankMaxKeys keys and where kFew says, a warp a key: each lane holds
/// two of the keys, takes the key to rank from the lane that holds it, and one warp reduction
/// sums the lanes' counts. No barrier. Called by every thread of the block.
template <int kThreads, RankFewBy kFew = RankFewBy::thread>
__device__ __forceinline__ void block_rank_sort_descending(const TopkKey* keys, unsigned n, unsigned kept,
                                                           TopkKey* sorted) {
  if (kFew == RankFewBy::warp && n <= kWarpRankMaxKeys) {  // block-uniform
    static_assert(kWarpRankMaxKeys == 64, "two keys a lane");
    constexpr unsigned kWarps = kThreads / 32;
    constexpr unsigned kKeysPerWarp = (kWarpRankMaxKeys + kWarps - 1) / kWarps;
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const TopkKey low = lane < n ? keys[lane] : kEmptyKey;  // kEmptyKey: larger than no key
    const TopkKey high = lane + 32 < n ? keys[lane + 32] : kEmptyKey;
    // Key warp + m kWarps for every m at once, whether or not it exists: the warp's keys are then
    // independent chains of a shuffle, two compares and a reduction, not one after another.
#pragma unroll
    for (unsigned m = 0; m < kKeysPerWarp; ++m) {
      const unsigned i = warp + m * kWarps;
      const TopkKey key = __shfl_sync(0xffffffffu, i < 32 ? low : high, i % 32);
      const unsigned rank = warp_sum((low > key ? 1u : 0u) + (high > key ? 1u : 0u));
      if (lane == 0 && i < n && rank < kept) sorted[rank] = key;
    }
    return;
  }
  for (unsigned i = threadIdx.x; i < n; i += kThreads) {
    const TopkKey key = keys[i];
    unsigned rank = 0;
    for (unsigned j = 0; j < n; ++j) rank += keys[j] > key ? 1u : 0u;
    if (rank < kept) sorted[rank] = key;
  }
}

/// Whether block_sort_descending leaves n keys in `ranked` rather than in place.
__device__ __forceinline__ bool sorted_into_ranked(unsigned n) { return n <= kRankSortMaxK; }

/// Sorts keys[0, n) descending (unique keys, written before a barrier; `keys` has room for n
/// rounded up to a power of two, at least 64) and returns the sorted keys: a rank sort into
/// `ranked` (kRankSortMaxK long) for short lists, the bitonic network in place (padded)
/// otherwise. Ends with a barrier.
template <int kThreads, RankFewBy kFew = RankFewBy::thread>
__device__ const TopkKey* block_sort_descending(TopkKey* keys, unsigned n, TopkKey* ranked) {
  if (sorted_into_ranked(n)) {
    block_rank_sort_descending<kThreads, kFew>(keys, n, n, ranked);
    __syncthreads();
    return ranked;
  }
  const unsigned padded = bitonic_sort_length(n);
  for (unsigned i = n + threadIdx.x; i < padded; i += kThreads) keys[i] = kEmptyKey;  // sorts last
  __syncthreads();
  block_bitonic_sort_descending<kThreads>(keys, padded);
  return keys;
}

/// Sorts storage.winners[0, n) descending (n <= kMaxFastTopK) and returns the sorted keys.
template <int kThreads, RankFewBy kFew = RankFewBy::thread>
__device__ const TopkKey* block_sort_winners(unsigned n, BlockTopkStorage& storage) {
  return block_sort_descending<kThreads, kFew>(storage.winners, n, storage.ranked);
}

/// Appends every key `for_each_key` visits that is >= threshold to keys[], through the counter
/// `count` (shared memory: this CTA's, or in a cluster another's), writing only slots below
/// `capacity`. Callers bound the keys at or above the threshold by `capacity`; the test keeps a
/// bug from writing out of bounds.
template <typename ForEachKey>
__device__ __forceinline__ void append_keys_at_least(TopkKey threshold, ForEachKey&& for_each_key, unsigned* count,
                                                     TopkKey* keys, unsigned capacity) {
  for_each_key([&](TopkKey key) {
    if (key >= threshold) {
      const unsigned slot = atomicAdd(count, 1u);
      if (slot < capacity) keys[slot] = key;
    }
  });
}

/// Finds the K largest of the keys `for_each_key` visits across the team and gathers them, in no
/// particular order, into keys[0, k), counting them in `count` (shared memory). `for_each_key`
/// must visit at least k unique keys (every caller's source does: a row or chunk of >= k
/// elements, or a candidate list holding every key >= a k-th-key bound). Exact and deterministic
/// as a set: keys are unique. kValueBits and index_bits: as for team_radix_select. Ends on a team
/// barrier.
template <typename Team, int kValueBits = 32, typename ForEachKey>
__device__ void team_topk_unsorted(unsigned k, ForEachKey&& for_each_key, RadixSelectStorage& select, TopkKey* keys,
                                   unsigned& count, int index_bits = 32) {
  const TopkKey threshold = team_radix_select<Team, 0, kValueBits>(k, for_each_key, select, index_bits);
  // The select ended on a barrier, after every thread's last read of a count from before.
  if (Team::rank() == 0) count = 0;
  Team::sync();
  append_keys_at_least(threshold, for_each_key, &count, keys, k);  // exactly k: the select is exact
  Team::sync();
}

/// team_topk_unsorted by the whole block into storage.winners (k <= kMaxFastTopK), which it returns.
template <int kThreads, int kValueBits = 32, typename ForEachKey>
__device__ const TopkKey* block_topk_unsorted(unsigned k, ForEachKey&& for_each_key, BlockTopkStorage& storage) {
  team_topk_unsorted<BlockTeam<kThreads>, kValueBits>(k, for_each_key, storage.select, storage.winners, storage.count);
  return storage.winners;
}

/// block_topk_unsorted, then sorted descending (in shared memory; the returned pointer).
template <int kThreads, int kValueBits = 32, typename ForEachKey>
__device__ const TopkKey* block_topk_sorted(unsigned k, ForEachKey&& for_each_key, BlockTopkStorage& storage) {
  block_topk_unsorted<kThreads, kValueBits>(k, for_each_key, storage);
  return block_sort_winners<kThreads>(k, storage);
}

/// One output slot: index and probability (or log-probability) of the token behind `key`.
/// Masked tokens (-inf) are written as index -1 and probability 0 (log-probability -inf).
__device__ __forceinline__ void write_topk_entry(TopkKey key, const Normalizer& normalizer, bool log_probs,
                                                 float* prob, int32_t* index) {
  const float x = key_value(key);
  *index = x == -CUDART_INF_F ? -1 : key_index(key);
  *prob = log_probs ? normalizer.log_probability(x) : normalizer.probability(x);
}

/// A NaN row: every slot is index -1, probability NaN. Written by kThreads threads, of which
/// this is `thread`.
template <int kThreads>
__device__ void write_nan_row(unsigned k, float* probs, int32_t* indices, unsigned thread = threadIdx.x) {
  for (unsigned j = thread; j < k; j += kThreads) {
    probs[j] = CUDART_NAN_F;
    indices[j] = -1;
  }
}

/// Row `row` of a top-K problem's output, from the row's final (m, d), written by a team of
/// kThreads threads (a block, a warp, or one thread), of which this is `thread`: its status at
/// construction (thread 0), a NaN row's K entries by wrote_nan_row, and the entry of each rank
/// by operator().
template <int kThreads>
struct RowOutput {
  const TopkProblem& problem;
  Normalizer normalizer;
  float* probs;
  int32_t* indices;
  unsigned thread;

  __device__ __forceinline__ RowOutput(const TopkProblem& p, int64_t row, const SoftmaxState& state,
                                       unsigned thread_in_team = threadIdx.x)
      : problem(p),
        normalizer(state, p.k_exp),
        probs(p.probs + row * p.k),
        indices(p.indices + row * p.k),
        thread(thread_in_team) {
    if (thread == 0 && p.row_status) p.row_status[row] = static_cast<int32_t>(normalizer.status);
  }

  /// Writes every entry of a NaN row (index -1, NaN) and returns true, or returns false: the same
  /// in every thread of the team.
  __device__ __forceinline__ bool wrote_nan_row() const {
    if (normalizer.status != RowStatus::has_nan) return false;
    write_nan_row<kThreads>(static_cast<unsigned>(problem.k), probs, indices, thread);
    return true;
  }

  __device__ __forceinline__ void operator()(unsigned rank, TopkKey key) const {
    write_topk_entry(key, normalizer, problem.log_probs, probs + rank, indices + rank);
  }
};

}  // namespace softk::kernels
