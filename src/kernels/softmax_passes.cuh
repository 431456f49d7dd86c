// The two streaming passes every non-resident softmax is made of: reduce a segment of a row to
// its (m, d) state, and write a segment's probabilities once the row's state is known.
#pragma once

#include <type_traits>

#include "kernels/online_softmax.cuh"
#include "kernels/row_segment.cuh"

namespace softk::kernels {

/// Unroll of the streaming loops: 4 x 16-byte loads in flight per thread.
constexpr int kStreamUnroll = 4;
/// A thread's last vectors (fewer than a round) all in flight at once: one round trip instead of
/// one each (visit_last_vectors), for the streams whose registers allow it.
constexpr int kStreamTailLoads = kStreamUnroll - 1;

/// Pass 1: the (m, d) state of `segment`, reduced over the whole block. kTailLoads: as in
/// for_each_element (the two-pass kernel keeps one at a time: fetching its last vectors at once
/// took it from 40 registers to 56-60, three blocks an SM to two, and 2048 x 8192 fp32 to 0.89x,
/// H200; split-k's kernels keep their registers).
template <int kThreads, int kTailLoads = 1, typename T>
__device__ __forceinline__ SoftmaxState segment_state(const RowSegment<T>& segment, float k, SoftmaxState* scratch) {
  SoftmaxState state = empty_state();
  // Each group's max by the tree over its widened floats, not fill_runs' packed 16-bit pairs
  // (left unused, so not computed): with the pairs, the bf16 two-pass softmax read 0.97-0.98x
  // at 2048 x 8192 and 256 x 32000 (H200, two rounds of one run), where the top-k streams gained.
  for_each_element<kStreamUnroll, kTailLoads>(segment, threadIdx.x, kThreads, [&](const auto& group) {
    auto by_floats = group;
    by_floats.max = elements_max(group);
    accumulate(state, by_floats, k);
  });
  return block_reduce<kThreads / 32, kSoftmaxStateMerge<T>>(state, k, scratch);
}

/// Pass 2: out[i] = p(segment[i]) for the whole segment, `out` pointing at the output of
/// segment element 0. Vector stores where the output lines up with the input vectors. kTailLoads:
/// as in segment_state.
template <int kThreads, int kTailLoads = 1, typename T, typename OutT>
__device__ __forceinline__ void write_probabilities(const RowSegment<T>& segment, const Normalizer& normalizer,
                                                    OutT* out) {
  const bool aligned = reinterpret_cast<uintptr_t>(out + segment.head) % 16 == 0;
  for_each_element<kStreamUnroll, kTailLoads>(segment, threadIdx.x, kThreads, [&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    constexpr int W = Group::kWidth;
#pragma unroll
    for (int n = 0; n < Group::kRuns; ++n) {
      float p[W];
#pragma unroll
      for (int i = 0; i < W; ++i) p[i] = normalizer.probability(group.x[n][i]);
      store_outputs<OutT, W>(out + group.offset[n], p, W == 1 || aligned);
    }
  });
}

}  // namespace softk::kernels
