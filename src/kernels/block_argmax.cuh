// K = 1 (greedy decoding) over a run of a row by one block: one read that folds the run into
// (m, d) and keeps the block's largest key (BlockGatedArgmax), then one block reduction of both.
// The fused kernel's rows and split-k's chunks take it at K = 1 (split-k's merge reduces the
// chunks' results with block_reduce_argmax), and the cluster kernel's K = 1 form keeps its
// threads' keys the same way (RunningArgmax).
//
// Why not the fused core (block_fused_topk.cuh): its prefix pass, seed select, listing and
// counting sort exist to agree on a threshold below the K-th logit, and the largest key needs
// none. Against it (auto, llm logits, H200, two rounds): 256 rows of 32000 1.48x f32 and 1.71x
// bf16, of 128256 1.16x / 1.22x, of 256000 1.09x / 1.10x; split-k on 1 x 4M 1.40x / 1.49x, on
// 1 x 64M 1.12x / 1.16x, on 4 x 64M 1.03x / 1.05x. The cluster kernel at 1-8 rows of 32000-256000
// with RunningArgmax instead of a key an element: bf16 1.01-1.15x, f32 1.00-1.07x.
//
// Exactness: every element is folded and every group's maximum compared, so the block's largest
// key is the run's (the largest logit, the lowest index among ties).
#pragma once

#include <limits>

#include "kernels/block_topk.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/staged_stream.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

/// A thread's largest key over the groups it visits. A group's maximum comes with its loads
/// (fill_runs), so a group below the thread's best so far costs one compare. One that reaches it
/// is rare for a thread, but some lane of a warp has one at most of its steps, so what it costs
/// is paid by the warp nearly every group: a chain of selects finds the first element equal to
/// the maximum and one key is formed. Forming every element's key there instead ran long bf16
/// rows at 0.76-0.83x the fused core's time; an early-exit search measured 0.90-1.00x this, and
/// a record kept by selects alone, with the winning group re-read once the row max is known,
/// 0.94-1.09x (H200, 2026-11-22).
struct RunningArgmax {
  float best_value = -std::numeric_limits<float>::infinity();  ///< the logit of `best`
  TopkKey best = kEmptyKey;

  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t segment_first_index) {
    // >= and not >: an equal logit may carry a lower index, as a thread visits its run's edges
    // before its body. NaN compares false: a row holding one is reported whole, whatever its key.
    // -inf >= -inf: a masked row still gets a key (written as index -1).
    if (!(group.max >= best_value)) return;
    // The lowest offset holding the maximum, as a group's runs ascend: scanned from the top, the
    // last match standing.
    int64_t offset = group.offset[0];
#pragma unroll
    for (int n = N - 1; n >= 0; --n)
#pragma unroll
      for (int i = W - 1; i >= 0; --i)
        if (group.x[n][i] == group.max) offset = group.offset[n] + i;
    best = max(best, make_key(group.max, segment_first_index + offset));
    best_value = key_value(best);
  }
};

/// Shared memory of block_argmax: a state and a key a warp, and the gate of BlockGatedArgmax.
template <int kThreads>
struct BlockArgmaxScratch {
  SoftmaxState states[kThreads / 32];
  TopkKey keys[kThreads / 32];
  float largest_kept;
};

/// Raises *at to v where v is larger (v not NaN). Non-negative floats order as their bits do as
/// signed integers, negative ones in reverse as unsigned integers.
__device__ __forceinline__ void atomic_raise(float* at, float v) {
  if (v >= 0.0f) {
    atomicMax(reinterpret_cast<int*>(at), __float_as_int(v));
  } else {
    atomicMin(reinterpret_cast<unsigned*>(at), __float_as_uint(v));
  }
}

/// RunningArgmax for a block that wants only its largest key, not each thread's: a group is
/// offered only where its maximum reaches the largest value any thread of the block has kept so
/// far (`largest_kept`, shared). A thread's own records are frequent (at its r-th group a new
/// maximum has odds 1/r), and some lane of a warp has one at nearly every group, so the warp
/// pays the offer's chain of selects there; against the block's largest, a warp's group
/// reaches it about once in the stream's first round and rarely after. Against every thread
/// offering every group (H200, auto, llm logits, one run of three rounds, 2026-11-25): 16-bit
/// 0.99-1.06x (256 x 128256 bf16 19.71 -> 18.83 us, 1 x 64M 36.80 -> 35.87), fp32 1.00-1.07x.
/// Exactness: largest_kept is -inf or the value of an element some thread keeps, so a group
/// below it holds no element of the block's largest key; ties reach it and are offered.
struct BlockGatedArgmax {
  RunningArgmax running;
  float& largest_kept;

  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t segment_first_index) {
    if (!(group.max >= *static_cast<volatile float*>(&largest_kept))) return;
    const float before = running.best_value;
    running.offer(group, segment_first_index);
    if (running.best_value > before) atomic_raise(&largest_kept, running.best_value);
  }
};

/// What block_argmax leaves: the run's (m, d) and its largest key, the same in every thread.
struct RunArgmax {
  SoftmaxState state;
  TopkKey best;
};

/// The block's (m, d) and largest key, from each thread's, in every thread. Called by all kThreads
/// threads.
template <int kThreads>
__device__ __forceinline__ RunArgmax block_reduce_argmax(const SoftmaxState& state, TopkKey best, float k_exp,
                                                         BlockArgmaxScratch<kThreads>& scratch) {
  const TopkKey warp_best = warp_max(best);
  if (threadIdx.x % 32 == 0) scratch.keys[threadIdx.x / 32] = warp_best;
  // block_reduce's barriers put every warp's key in place before the reads below.
  const SoftmaxState total = block_reduce<kThreads / 32>(state, k_exp, scratch.states);
  best = scratch.keys[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) best = max(best, scratch.keys[w]);
  return {total, best};
}

/// Folds `run` into each thread's (m, d) and `argmax` (a RunningArgmax, or split-k's per-span
/// form: block_span_topk.cuh), in one read by the whole block. `stage`: where `staged` (a launch
/// of at most one block an SM, as the fused core's rest: block_fused_topk.cuh), the staged
/// stream's shared memory (kStagedStreamBytes); launch_with_stream_stage sets both.
template <int kThreads, typename T, typename Argmax>
__device__ __forceinline__ void fold_with_argmax(const RowSegment<T>& run, float k_exp, bool staged, RawVector* stage,
                                                 SoftmaxState& state, Argmax& argmax) {
  const auto fold = [&](const auto& group) {
    accumulate(state, group, k_exp);
    argmax.offer(group, run.first_index);
  };
  if (staged) {  // block-uniform
    for_each_element_staged<kStreamUnroll, kStreamTailLoads>(run, stage, threadIdx.x, kThreads, fold);
  } else {
    for_each_element<kStreamUnroll, kStreamTailLoads>(run, threadIdx.x, kThreads, fold);
  }
}

/// Readies `scratch` for block_argmax: its gate at -inf, then a barrier. A kernel calls it before
/// enter_after_previous_grid, whose wait hides the barrier (after it, the barrier held the first
/// loads of split-k's 4K-token chunks back: 1 x 1M f32 0.97x).
template <int kThreads>
__device__ __forceinline__ void start_block_argmax(BlockArgmaxScratch<kThreads>& scratch) {
  if (threadIdx.x == 0) scratch.largest_kept = -std::numeric_limits<float>::infinity();
  __syncthreads();
}

/// The (m, d) and the largest key of `run`, by the whole block (fold_with_argmax, then
/// block_reduce_argmax), after start_block_argmax. Called by all kThreads threads.
template <int kThreads, typename T>
__device__ __forceinline__ RunArgmax block_argmax(const RowSegment<T>& run, float k_exp, bool staged, RawVector* stage,
                                                  BlockArgmaxScratch<kThreads>& scratch) {
  SoftmaxState state = empty_state();
  BlockGatedArgmax argmax{RunningArgmax{}, scratch.largest_kept};
  fold_with_argmax<kThreads>(run, k_exp, staged, stage, state, argmax);
  return block_reduce_argmax<kThreads>(state, argmax.running.best, k_exp, scratch);
}

/// Writes row `row` of a K = 1 problem from its final state and largest key: its status, then
/// index -1 and NaN for a NaN row, else the key's index and probability. One thread.
__device__ __forceinline__ void write_argmax_row(const TopkProblem& problem, int64_t row, const SoftmaxState& state,
                                                 TopkKey best) {
  const RowOutput<1> write(problem, row, state, 0);
  if (!write.wrote_nan_row()) write(0, best);
}

}  // namespace softk::kernels
