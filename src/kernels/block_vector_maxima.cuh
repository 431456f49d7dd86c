// The fused core for rows of 32-128 KB at K > 64 (rows_take_vector_maxima, topk_fused.cu), in one
// read of the row from DRAM and a re-read of the few 16-byte vectors that can hold its winners:
//  1. The row is streamed as K = 1's stream (block_argmax.cuh): folded into (m, d), each body
//     vector's maximum stored in shared memory (its order bits, key_value_bits) and counted in a
//     histogram of their top 12 bits (block_bin_threshold.cuh).
//  2. The histogram's bin of the K-th largest maximum gives `cut`, that bin's floor.
//  3. The vectors whose maxima reach the cut are numbered and dealt evenly to the threads, which
//     read them again (from L2, which holds the row just streamed) and list their elements at or
//     above the cut as keys; the row's edge elements (outside its vectors) too.
// The caller selects the sorted top-K from the list as from the fused core's (write_fused_top_k).
//
// Why: on such rows at K = 1024 the fused core (block_fused_topk.cuh) reads the whole row in
// phase A, pushing every element into four seeds a thread (eight compare-selects an element),
// selects tau from them, then reads the row again from L2 in phase B to list the vectors holding
// a logit >= tau. Here the stream costs K = 1's, a store and a histogram add a vector, and the
// re-read is the vectors holding the winners and their bin (llm logits, 32000 fp32 tokens, K =
// 1024: ~1,400 of 8,000). The work a vector gets is in the stream, where fp32 rows wait on DRAM:
// after it, an SM's 16,000 maxima cost ~0.14 us an instruction each (256 x 32000 fp32, H100),
// and a select of the K-th largest over them by bins of distance below the row's largest logit
// (block_bin_prefix_below), then the vectors named by it, took ~2.5 and ~2.2 us.
//
// Exactness: the K largest maxima are K distinct elements at or above the cut, so the row's K-th
// largest element is too: every winner w is, and so is the maximum of w's vector, which is read
// again; w is then listed. The K largest maxima are listed too, so the list holds K keys or more.
// Where it outgrows the shared memory (ties in the cut's bin) the caller selects from the row
// itself.
#pragma once

#include <cstdint>

#include "kernels/block_argmax.cuh"
#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_fused_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

/// The most body vectors a row taking vector maxima may have: 16 turns of the block's loop (a
/// thread's turns are a 16-bit mask), their maxima in half the candidate list's shared memory
/// (kCandidateBytes), 128 KB rows.
constexpr int kVectorMaximaMaxTurns = 16;
constexpr int64_t kVectorMaximaMaxVectors = int64_t{kVectorMaximaMaxTurns} * kFusedThreads;

/// The most vectors reaching the cut that are read again; past it the row is read whole instead.
/// Each gives the list one key or more, so more would overflow it anyway.
constexpr unsigned kVectorMaximaMaxReread = 6144;

/// The vector maxima's order bits, then their histogram: the first bytes of the kernel's dynamic
/// shared memory, the candidate list's (the keys overwrite them once the cut is found). Named
/// here rather than held, as pointers would be, in registers of the stream. The numbers of the
/// vectors to read again fill the list's last bytes, which the keys are not given.
struct VectorMaxima {
  uint32_t bits[kVectorMaximaMaxVectors];
  BinHistogram<kFusedThreads> histogram;
};
constexpr std::size_t kRereadBytes = kVectorMaximaMaxReread * sizeof(uint16_t);
static_assert(sizeof(VectorMaxima) <= kCandidateBytes - kRereadBytes, "beside the numbers of vectors read again");
static_assert(kVectorMaximaMaxVectors <= 65536, "vector numbers in 16 bits");

__device__ __forceinline__ VectorMaxima& vector_maxima() {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector dynamic_shared[];
  return *reinterpret_cast<VectorMaxima*>(dynamic_shared);
}

/// Stores the order bits of each body vector's maximum at vector_maxima().bits[v] and counts
/// them in its histogram; edge elements, which lie outside the vectors, are left to the re-read.
/// A fold_with_argmax recorder.
struct VectorMaximaRecorder {
  int head;  ///< the row's head: body vector v starts at offset head + v W

  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t) const {
    if constexpr (W > 1) {
#pragma unroll
      for (int n = 0; n < N; ++n) {
        const uint32_t bits = key_value_bits(run_max(group, n));
        vector_maxima().bits[static_cast<uint32_t>(group.offset[n] - head) / W] = bits;
        vector_maxima().histogram.add(TopkKey{bits} << 32);
      }
    }
  }
};

/// The row's (m, d) and a list of its keys holding its top-K in candidate_storage (kCandidateBytes,
/// then the stage where `staged`), as block_fused_candidates leaves them; K <= row.body_vectors <=
/// kVectorMaximaMaxVectors. Called by all kFusedThreads threads. Starts with no barrier and ends
/// on one.
template <typename T>
__device__ FusedCandidates block_vector_maxima_candidates(const RowSegment<T>& row, unsigned k, float k_exp,
                                                          bool staged, void* candidate_storage,
                                                          FusedTopkShared& shared) {
  constexpr int kThreads = kFusedThreads;
  VectorMaxima& maxima = vector_maxima();
  maxima.histogram.clear();
  if (threadIdx.x == 0) shared.candidate_count = 0;
  __syncthreads();  // the histogram is clear before the first add
  SoftmaxState state = empty_state();
  RawVector* stage = static_cast<RawVector*>(candidate_storage) + kCandidateBytes / sizeof(RawVector);
  VectorMaximaRecorder recorder{row.head};
  fold_with_argmax<kThreads>(row, k_exp, staged, stage, state, recorder);
  // threshold() starts with a barrier: every maximum is stored and counted.
  const uint32_t cut = static_cast<uint32_t>(bin_floor_key(maxima.histogram.threshold(k).bin) >> 32);
  // The vectors reaching the cut, numbered in thread order: a thread's own ones from `first`.
  // Dealt evenly to the threads, up to 2048 go in one round of loads, where a thread's own could
  // take three rounds, each an L2 round trip (the step, loads and listing, was ~6,600 cycles a
  // block at 128 x 32000 fp32, K = 1024, H100, and 1.01-1.10x faster so).
  unsigned turns = 0;
#pragma unroll
  for (int turn = 0; turn < kVectorMaximaMaxTurns; ++turn) {
    const uint32_t v = threadIdx.x + turn * kThreads;
    if (v < row.body_vectors && maxima.bits[v] >= cut) turns |= 1u << turn;
  }
  unsigned first = block_exclusive_sum(__popc(turns), maxima.histogram.warp_totals);
  const unsigned reread = block_total_after_exclusive_sum<kThreads / 32>(maxima.histogram.warp_totals);
  auto* numbers = reinterpret_cast<uint16_t*>(static_cast<char*>(candidate_storage) + kCandidateBytes - kRereadBytes);
  for (; turns != 0 && first < kVectorMaximaMaxReread; turns &= turns - 1)
    numbers[first++] = static_cast<uint16_t>(threadIdx.x + (__ffs(turns) - 1) * kThreads);
  const float threshold = key_threshold(TopkKey{cut} << 32);
  __syncthreads();  // every number written (and every maximum read before a key overwrites it)

  constexpr int kInFlight = 4;
  RawVector raw[kInFlight];
  const auto load_round = [&](unsigned from) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const unsigned i = from + u * kThreads + threadIdx.x;
      if (i < reread) raw[u] = load_vector(row.body() + numbers[i]);
    }
  };
  const CandidateList list{static_cast<TopkKey*>(candidate_storage), &shared.candidate_count,
                           static_cast<unsigned>((kCandidateBytes - kRereadBytes) / sizeof(TopkKey)), threshold};
  const auto list_round = [&](unsigned from) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const unsigned i = from + u * kThreads + threadIdx.x;
      if (i >= reread) continue;
      ElementGroup<1, RowSegment<T>::kWidth> group;
      fill_runs<T>(group, &raw[u]);
      group.offset[0] = row.body_offset(numbers[i]);
      list.offer(group, row.first_index);
    }
  };
  if (reread > kVectorMaximaMaxReread) return {block_reduce<kThreads / 32>(state, k_exp, shared.scratch), nullptr, 0,
                                                threshold};  // block-uniform: the list would overflow
  load_round(0);  // block_reduce's shuffles and barriers go while the loads are in flight
  const SoftmaxState total = block_reduce<kThreads / 32>(state, k_exp, shared.scratch);
  if (status_of(total) == RowStatus::has_nan) return {total, nullptr, 0, threshold};  // block-uniform
  list_round(0);
  for (unsigned from = kInFlight * kThreads; from < reread; from += kInFlight * kThreads) {
    load_round(from);
    list_round(from);
  }
  visit_edges(row, threadIdx.x, kThreads, [&](const auto& group) { list.offer(group, row.first_index); });
  __syncthreads();
  const unsigned listed = shared.candidate_count;  // block-uniform
  if (listed > list.capacity) return {total, nullptr, 0, threshold};
  return {total, list.keys, listed, threshold};
}

}  // namespace softk::kernels
