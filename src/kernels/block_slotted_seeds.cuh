// The fused core for short rows at K > 64 (rows_take_slotted_seeds: at most 32 KB), in one read
// of the row instead of two: each thread keeps its kSlottedSeeds largest elements as 32-bit keys,
// the logit's order bits with the low kSlotBits replaced by where the element lies in the
// thread's stride (its slot). The seeds are then the candidates themselves, not only a bound on
// them.
//
//  1. The row is streamed once: folded into (m, d), every element pushed into the thread's seeds.
//  2. A block radix select over the seeds' top 16 bits gives `cut`, the floor of the 16-bit bin
//     of the K-th largest seed: at most the row's K-th logit, as in block_fused_candidates.
//  3. Every element >= cut is listed as a key: a thread whose seeds all pass may have passed
//     over more such elements, so it re-reads its stride (from L2) and lists them; any other
//     thread lists its passing seeds, each value re-read by its slot (a few a thread).
//
// Why: the fused core folds a prefix of the row, selects tau from its seeds, then reads the row
// again in phase B to list the vectors holding a logit >= tau, and rewrites them as keys. At
// K <= 1024 a thread holds at most two winners on average (K / 512), so four seeds hold all of a
// thread's in ~85% of threads at K = 1024 (Poisson(2) < 4) and nearly all at K = 256, and the
// others re-read only their own elements. Where a thread has up to four vectors, that saves more
// than the seed keys cost phase A (~4 instructions an element); on longer rows it does not
// (rows_take_slotted_seeds).
//
// Exactness: a slot key orders elements by their logit's bin (the order bits above kSlotBits),
// so a thread's dropped elements lie in bins no higher than its last seed's. Where that seed is
// below `cut`, every dropped element is below the threshold and the passing seeds are all of
// the thread's listed elements; elsewhere the thread lists from the row itself. The list is
// then exactly the row's keys >= the threshold, as the fused core's, and the caller selects
// from it the same way (or from the row itself when it overflowed).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/block_fused_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/topk_buffer.cuh"

namespace softk::kernels {

/// Seeds a thread: at K <= 1024 a thread holds at most K / 512 = 2 winners on average.
constexpr int kSlottedSeeds = 4;
/// The longest rows that take slotted seeds (rows_take_slotted_seeds): four 16-byte vectors a
/// thread.
constexpr int64_t kSlottedSeedsMaxRowBytes = 32 * 1024;
/// A thread of such a row visits at most one edge element and four vectors of up to 8 elements:
/// 33 slots. (The select reads the seeds' top 16 bits, so the value bits a slot takes are never
/// read.)
constexpr int kSlotBits = 6;
constexpr uint32_t kSlotMask = (1u << kSlotBits) - 1u;
static_assert(1 + kSlottedSeedsMaxRowBytes / (16 * kFusedThreads) * 8 <= (1 << kSlotBits), "slots past kSlotBits");

/// A seed's key: x's order bits (key_value_bits: -0 taken as +0) with the low kSlotBits replaced
/// by its slot. Monotone in x's bin, which is all the selection reads.
__device__ __forceinline__ uint32_t slotted_key(float x, uint32_t slot) {
  return (key_value_bits(x) & ~kSlotMask) | slot;
}

/// The offset in `row` of the element this thread visited `slot`-th in for_each_element's order
/// across kFusedThreads threads: its edge element if it has one, then body vectors thread,
/// thread + kFusedThreads, ..., element by element.
template <typename T>
__device__ __forceinline__ int64_t slot_offset(const RowSegment<T>& row, uint32_t slot) {
  constexpr uint32_t kWidth = RowSegment<T>::kWidth;
  const uint32_t edge = static_cast<int>(threadIdx.x) < row.edges() ? 1u : 0u;
  if (slot < edge) return row.edge_offset(static_cast<int>(threadIdx.x));
  const uint32_t body_slot = slot - edge;
  return row.body_offset(threadIdx.x + int64_t{body_slot / kWidth} * kFusedThreads) + body_slot % kWidth;
}

/// The row's (m, d) and every key of the row >= the threshold in candidate_storage (the list of
/// kCandidateBytes), as block_fused_candidates leaves them; k <= min(row.length, kMaxFastTopK),
/// row.length * sizeof(T) <= kSlottedSeedsMaxRowBytes. Called by all kFusedThreads threads.
/// Starts with no barrier and ends on one.
template <typename T>
__device__ FusedCandidates block_slotted_candidates(const RowSegment<T>& row, unsigned k, float k_exp,
                                                    void* candidate_storage, FusedTopkShared& shared) {
  constexpr int kThreads = kFusedThreads;
  // A thread's last vectors two at a time, as in the fused core's prefix: nothing hides their
  // round trips. (Which core reads a row depends on its length, K and dtype alone, never on its
  // batch, so neither does the order in which its (m, d) is summed.)
  constexpr int kTailLoads = 2;
  SoftmaxState state = empty_state();
  SeedBuffer<kSlottedSeeds, uint32_t> seeds;
  uint32_t next_slot = 0;
  for_each_element<kStreamUnroll, kTailLoads>(row, threadIdx.x, kThreads, [&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    accumulate(state, group, k_exp);
#pragma unroll
    for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
      for (int i = 0; i < Group::kWidth; ++i) seeds.push(slotted_key(group.x[n][i], next_slot + n * Group::kWidth + i));
    next_slot += Group::kRuns * Group::kWidth;
  });
  if (threadIdx.x == 0) shared.candidate_count = 0;
  // The select stops after the top 16 bits, as block_fused_candidates' (two passes at most).
  const auto seed_keys = [&](auto&& visit) {
#pragma unroll
    for (int i = 0; i < kSlottedSeeds; ++i) visit(TopkKey{seeds.values[i]} << 32);
  };
  const TopkKey tau = block_radix_select<kThreads, 48>(k, seed_keys, shared.storage.select);
  const auto cut = static_cast<uint32_t>(tau >> 32);  // 0 (every key passes) for kEmptyKey
  const CandidateList list{static_cast<TopkKey*>(candidate_storage), &shared.candidate_count,
                           static_cast<unsigned>(kCandidateBytes / sizeof(TopkKey)), key_threshold(tau)};

  // (block_radix_select ended on a barrier, so the count's zero is visible.)
  if (seeds.values[kSlottedSeeds - 1] >= cut) {
    for_each_element<kStreamUnroll, kTailLoads>(row, threadIdx.x, kThreads,
                                                [&](const auto& group) { list.offer(group, row.first_index); });
  } else {
    // The seeds are sorted, so the passing ones lead; their values are re-read all at once.
    unsigned passing = 0;
    int64_t offsets[kSlottedSeeds - 1];
    float values[kSlottedSeeds - 1];
#pragma unroll
    for (int i = 0; i < kSlottedSeeds - 1; ++i) {
      if (seeds.values[i] >= cut) {
        ++passing;
        offsets[i] = slot_offset(row, seeds.values[i] & kSlotMask);
        values[i] = to_float(row.data[offsets[i]]);
      }
    }
    if (passing != 0) {
      const unsigned place = atomicAdd(list.count, passing);
#pragma unroll
      for (int i = 0; i < kSlottedSeeds - 1; ++i)
        if (i < static_cast<int>(passing) && place + i < list.capacity)
          list.keys[place + i] = make_key(values[i], row.first_index + offsets[i]);
    }
  }
  // block_reduce starts with a barrier: after it every append is visible.
  const SoftmaxState total = block_reduce<kThreads / 32>(state, k_exp, shared.scratch);
  const unsigned listed = shared.candidate_count;  // block-uniform
  if (status_of(total) == RowStatus::has_nan || listed > list.capacity) return {total, nullptr, 0, list.threshold};
  return {total, list.keys, listed, list.threshold};
}

}  // namespace softk::kernels
