// The one idea of softk: the mergeable softmax state (m, d) = (running max, sum of exp(x - m)),
// under (m_a, d_a) (+) (m_b, d_b) = (M, d_a e^(m_a - M) + d_b e^(m_b - M)), M = max(m_a, m_b).
// Written once here and used at thread, warp, block and grid level by every algorithm.
//
// Temperature folds into the exponent: d = sum 2^((x - m) * k) with k = log2(e) / T, while m
// stays in raw logit units, so ranking (top-k) is done on raw logits and never disturbed by the
// rounding of x / T.
//
// Non-finite values, per the contract:
//  - the empty state is (-inf, 0); merging two empty states stays (-inf, 0), never NaN;
//  - -inf logits contribute 0;
//  - if the max is +inf, the +inf logits count 1 each and everything else 0 (they share the mass);
//  - a NaN logit makes d NaN, and NaN propagates through every later merge: that is how a
//    NaN row is detected (fmaxf drops NaN, so m stays meaningful).
#pragma once

#include <cuda_runtime.h>
#include <math_constants.h>

#include "kernels/row_segment.cuh"
#include "kernels/warp_collectives.cuh"
#include "softk/types.hpp"

namespace softk::kernels {

struct SoftmaxState {
  float max;
  float sum;
};

__device__ __forceinline__ SoftmaxState empty_state() { return {-CUDART_INF_F, 0.0f}; }

/// 2^x with one MUFU.EX2 (ex2.approx.ftz: ~2 ulp). exp2f's denormal handling costs three more
/// instructions per element, for results below 2^-126 that no probability here can use.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// 2^((from - to) * k) for from <= to; 1 when they are equal, including -inf/-inf and
/// +inf/+inf, where the plain formula would give NaN.
__device__ __forceinline__ float rescale(float from, float to, float k) {
  return from == to ? 1.0f : fast_exp2((from - to) * k);
}

__device__ __forceinline__ SoftmaxState merge(SoftmaxState a, SoftmaxState b, float k) {
  const float m = fmaxf(a.max, b.max);
  // Commutative bit for bit: two separately rounded products and one add (the _rn intrinsics
  // keep the compiler from contracting one product into an FMA, which would round a (+) b and
  // b (+) a differently), so the pairwise warp_reduce leaves every lane with the identical state.
  return {m, __fadd_rn(__fmul_rn(a.sum, rescale(a.max, m, k)), __fmul_rn(b.sum, rescale(b.max, m, k)))};
}

/// The weight 2^((x - m) * k) of one logit against a state whose max is m (x <= m or NaN).
/// Only called with a finite m on the hot path; `weight_nonfinite_max` covers m = +-inf.
__device__ __forceinline__ float weight(float x, float m, float k) { return fast_exp2((x - m) * k); }

__device__ __forceinline__ float weight_nonfinite_max(float x, float m) {
  if (x != x) return x;  // NaN propagates into d
  return (x == m && m > 0.0f) ? 1.0f : 0.0f;
}

/// The largest |m k| at which accumulate() takes a weight as 2^fma(x, k, -m k): one FFMA before
/// the MUFU instead of a subtract and a multiply. The rounding of m k shifts every exponent of a
/// group by at most 2^-24 |m k| = 2^-17, a relative 5.3e-6 on its weights and so on d (the tests
/// allow 1e-4: tests/common/compare.hpp). Past it (logits past ~88 at temperature 1, or a small
/// temperature) that shift grows with m k, which may even overflow, so such groups keep the exact
/// difference x - m. The 16-bit streams are issue-bound (ncu on 4 x 64M bf16: XU 59%, issue 62%),
/// and this is one instruction of the ~6 an element.
constexpr float kFmaWeightMaxExponent = 128.0f;

/// Folds a group of logits into the state: one tree max, one rescale, one tree sum, so the
/// dependency chain per group is a few levels deep rather than one step per element.
template <int N, int W>
__device__ __forceinline__ void accumulate(SoftmaxState& state, const ElementGroup<N, W>& group, float k) {
  const float m = fmaxf(state.max, group.max);
  float weights[N * W];
  const float m_k = m * k;
  if (fabsf(m_k) <= kFmaWeightMaxExponent) {  // false for an infinite m, and for NaN
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < W; ++i) weights[n * W + i] = fast_exp2(fmaf(group.x[n][i], k, -m_k));
  } else if (isfinite(m)) {
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < W; ++i) weights[n * W + i] = weight(group.x[n][i], m, k);
  } else {
#pragma unroll
    for (int n = 0; n < N; ++n)
#pragma unroll
      for (int i = 0; i < W; ++i) weights[n * W + i] = weight_nonfinite_max(group.x[n][i], m);
  }
  const float sum = tree_reduce(weights, [](float a, float b) { return a + b; });
  state = {m, state.sum * rescale(state.max, m, k) + sum};
}

/// How warp_reduce and block_reduce merge their states. Both give every thread the same bits.
///  - max_first: the maximum by a butterfly, each lane's sum rescaled to it once, the sums added by
///    a butterfly (whose two partners add the same two numbers); a block's warp states the same way
///    by warp 0, shared through shared memory. One exponential a lane, where pairwise took ten in
///    one dependency chain and sixteen more a thread for a block's warp states, all queued on the
///    SM's 16 MUFU lanes by every thread of a one-wave grid at once: by clock64 a block's reduction
///    took ~3,900 cycles at 256 x 128256 f32 K = 50 (spans, H200). Against pairwise (H200, one run
///    of three rounds, 2026-11-24): top-k 0.998-1.07x at 35 shapes (1 x 4M K = 50 1.05-1.07x,
///    256 x 32000 K = 50 1.05-1.07x, 256 x 128256 f32 K = 50 1.02x).
///  - pairwise: a butterfly of merges, then every thread merging the block's warp states in order
///    (no broadcast). The softmax kernels keep it for 16-bit input: with max_first those ran 0.82x
///    (2048 x 8192 bf16 two-pass), 0.88x (2048 x 4096 resident) and 0.97x (4 x 4M split-k), at
///    the same registers, with fewer instructions and more L2 traffic under ncu (cause not found);
///    their fp32 forms gained 1.02-1.17x, and take max_first (kSoftmaxStateMerge).
enum class StateMerge { max_first, pairwise };

/// The softmax kernels' StateMerge for input T (the measurements above; with fp32 alone on
/// max_first, 4 rows of 1M-8M fp32 ran 1.06-1.34x and 16M-32M 1.00x, H200, 2026-11-24).
template <typename T>
inline constexpr StateMerge kSoftmaxStateMerge = sizeof(T) == sizeof(float) ? StateMerge::max_first
                                                                             : StateMerge::pairwise;

/// Over the 32 lanes of a full warp: every lane ends with the merged state.
template <StateMerge kMerge = StateMerge::max_first>
__device__ __forceinline__ SoftmaxState warp_reduce(SoftmaxState state, float k) {
  if constexpr (kMerge == StateMerge::pairwise) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const SoftmaxState other{__shfl_xor_sync(0xffffffffu, state.max, offset),
                               __shfl_xor_sync(0xffffffffu, state.sum, offset)};
      state = merge(state, other, k);
    }
    return state;
  } else {
    const float m = warp_max(state.max);
    return {m, warp_sum(state.sum * rescale(state.max, m, k))};
  }
}

/// Block-wide reduction; every thread gets the same merged state. `scratch` holds one state
/// per warp. The leading barrier makes it safe to call twice in a row with the same scratch:
/// every thread has read the last call's result before any warp writes its state.
template <int kWarps, StateMerge kMerge = StateMerge::max_first>
__device__ __forceinline__ SoftmaxState block_reduce(SoftmaxState state, float k, SoftmaxState* scratch) {
  static_assert(kWarps <= 32, "a warp's state a lane");
  state = warp_reduce<kMerge>(state, k);
  if constexpr (kWarps == 1) return state;
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = state;
  __syncthreads();
  if constexpr (kMerge == StateMerge::pairwise) {
    // The maximum first, then every sum rescaled to it at once and added in order: the same bits
    // in every thread, and no broadcast round trip.
    float m = -CUDART_INF_F;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, scratch[w].max);
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum = __fadd_rn(sum, __fmul_rn(scratch[w].sum, rescale(scratch[w].max, m, k)));
    return {m, sum};
  } else {
    // Warp 0 alone, a warp state a lane: against every thread merging them in order, top-k
    // 1.00-1.05x (H200, one run). Every warp doing it would save the barrier below, but took the
    // bf16 two-pass softmax from 40 registers to 55 (three blocks an SM to two).
    if (threadIdx.x < 32) {
      const unsigned lane = threadIdx.x;
      const SoftmaxState own = lane < static_cast<unsigned>(kWarps) ? scratch[lane] : empty_state();
      const SoftmaxState total = warp_reduce<kMerge>(own, k);
      if (lane == 0) scratch[0] = total;  // every lane has read its state: the shuffles waited on them
    }
    __syncthreads();
    return scratch[0];
  }
}

/// The row's outcome, from its final state.
__device__ __forceinline__ RowStatus status_of(const SoftmaxState& state) {
  if (state.sum != state.sum) return RowStatus::has_nan;
  if (state.max == -CUDART_INF_F) return RowStatus::all_masked;
  return RowStatus::ok;
}

/// Turns a row's final state into the multiplier form used when writing probabilities:
/// p(x) = probability(x). Non-ok rows give NaN (has_nan) or 0 (all_masked) everywhere.
struct Normalizer {
  float max;
  float k;
  float inv_sum;
  float log_sum;
  RowStatus status;

  Normalizer() = default;  // so that shared memory can hold one
  __device__ __forceinline__ Normalizer(const SoftmaxState& state, float k_)
      : max(state.max), k(k_), inv_sum(1.0f / state.sum), log_sum(logf(state.sum)), status(status_of(state)) {}

  __device__ __forceinline__ float probability(float x) const {
    if (status == RowStatus::has_nan) return CUDART_NAN_F;
    if (status == RowStatus::all_masked) return 0.0f;
    if (isinf(max)) return (x == max) ? inv_sum : 0.0f;
    return weight(x, max, k) * inv_sum;
  }
  /// log p(x) = (x - m)/T - log d, computed without forming p (no underflow to -inf).
  __device__ __forceinline__ float log_probability(float x) const {
    if (status == RowStatus::has_nan) return CUDART_NAN_F;
    if (status == RowStatus::all_masked) return -CUDART_INF_F;
    if (isinf(max)) return (x == max) ? -log_sum : -CUDART_INF_F;
    return (x - max) * k * CUDART_LN2_F - log_sum;
  }
};

}  // namespace softk::kernels
