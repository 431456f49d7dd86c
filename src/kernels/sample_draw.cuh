// The pieces of a draw that softk::sample's two kernels share (sample_from_ranked.cu,
// sample_nucleus.cu): a row's clamped parameters, its weights, the block-wide running sums in a
// fixed order (scan_weights), and the draw over positions in order (draw_in_order). The draw over
// a whole row is sample_row_draw.cuh's.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cmath>
#include <cstdint>

#include "kernels/sample_launch.hpp"
#include "kernels/topk_key.cuh"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels::sampling {

constexpr int kThreads = 256;
/// Positions a thread sums in sequence: a tile is kThreads x kRun positions.
constexpr int kRun = 16;
constexpr int64_t kTile = int64_t{kThreads} * kRun;
constexpr unsigned long long kNotFound = ~0ull;

/// A row's parameters: its arrays' entries where given, clamped as sample.hpp says (the scalars
/// were checked on the host, so there the clamps change nothing).
struct RowSampling {
  float temperature;  ///< 0: greedy
  float k_exp;        ///< log2(e) / temperature; 0: greedy
  int32_t top_k;
  float top_p;
  float min_p;
  uint64_t seed;
  uint64_t offset;
};

__device__ inline RowSampling row_sampling(const SamplingParams& p, int64_t row, int32_t bound) {
  RowSampling s;
  const float t = p.temperatures ? p.temperatures[row] : p.temperature;
  const float k_exp = static_cast<float>(M_LOG2E) / t;
  const bool draws = t > 0.0f && isfinite(t) && isfinite(k_exp);  // false for NaN, infinite, subnormal t
  s.temperature = draws ? t : 0.0f;
  s.k_exp = draws ? k_exp : 0.0f;
  const int32_t k = p.top_ks ? p.top_ks[row] : p.top_k;
  s.top_k = k >= 1 && k <= bound ? k : bound;
  const float top_p = p.top_ps ? p.top_ps[row] : p.top_p;
  s.top_p = top_p > 0.0f && top_p <= 1.0f ? top_p : 1.0f;
  const float min_p = p.min_ps ? p.min_ps[row] : p.min_p;
  s.min_p = min_p >= 0.0f && min_p <= 1.0f ? min_p : 0.0f;
  s.seed = p.seeds ? p.seeds[row] : p.seed;
  s.offset = p.offsets ? p.offsets[row] : p.offset;
  return s;
}

/// A logit's weight on a row whose largest logit is `max` (weight 1): where max is +inf, 1 for
/// each +inf and 0 for the rest, as the contract shares the mass.
struct Weigher {
  float max;
  float k_exp;
  __device__ float operator()(float x) const {
    if (isinf(max)) return x == max ? 1.0f : 0.0f;
    return exp2f((x - max) * k_exp);
  }
};

struct ScanScratch {
  typename cub::BlockScan<double, kThreads>::TempStorage scan;
  double tile_total;
  unsigned long long first;
  unsigned long long last_weighted;  ///< + 1: 0 where no position visited weighs anything
};

/// What scan_weights found.
struct ScanResult {
  unsigned long long first;          ///< the smallest position found, or kNotFound
  unsigned long long last_weighted;  ///< the largest position visited with weight > 0, or kNotFound
  double total;                      ///< the weights' sum over [0, length), where no early stop came
};

/// Runs over positions [0, length) in position order, a tile at a time, with the running sum of
/// weight_at(j) in double and in one fixed order (a thread's run in sequence, from the block
/// scan's sum of the runs before it, the tiles in sequence), and calls found(j, running sum
/// through j, weight j) at each position until it returns true for that thread. With
/// stop_at_first, the tiles after the one holding the first found are not visited. Why double:
/// added one by one onto an fp32 sum, the weights of a long tail below half its ulp (~6e-8 of the
/// sum) would vanish, and such tokens could never be drawn. Called by the whole block; ends on a
/// barrier.
template <typename WeightAt, typename Found>
__device__ ScanResult scan_weights(int64_t length, const WeightAt& weight_at, const Found& found, bool stop_at_first,
                                   ScanScratch& s) {
  if (threadIdx.x == 0) {
    s.first = kNotFound;
    s.last_weighted = 0;
  }
  __syncthreads();  // reset before any thread's atomics
  double carry = 0.0;
  for (int64_t tile = 0; tile < length; tile += kTile) {
    const int64_t start = tile + int64_t{threadIdx.x} * kRun;
    float weights[kRun];
    double run_sum = 0.0;
#pragma unroll
    for (int e = 0; e < kRun; ++e) {
      weights[e] = start + e < length ? weight_at(start + e) : 0.0f;
      run_sum += weights[e];
    }
    double below = 0.0;
    cub::BlockScan<double, kThreads>(s.scan).ExclusiveSum(run_sum, below);
    if (threadIdx.x == kThreads - 1) s.tile_total = below + run_sum;
    double running = carry + below;
    bool hit = false;
    int64_t last_weighted = -1;
#pragma unroll
    for (int e = 0; e < kRun; ++e) {
      running += weights[e];
      if (weights[e] > 0.0f) last_weighted = start + e;
      if (!hit && start + e < length && found(start + e, running, weights[e])) {
        atomicMin(&s.first, static_cast<unsigned long long>(start + e));
        hit = true;
      }
    }
    if (last_weighted >= 0) atomicMax(&s.last_weighted, static_cast<unsigned long long>(last_weighted) + 1);
    __syncthreads();  // tile_total, first and last_weighted written; the scan's storage free again
    carry += s.tile_total;
    if (stop_at_first && s.first != kNotFound) break;
    __syncthreads();  // every thread has read tile_total before the next tile writes it
  }
  const ScanResult result{s.first, s.last_weighted == 0 ? kNotFound : s.last_weighted - 1, carry};
  __syncthreads();  // s free for the next pass
  return result;
}

/// The position, in [0, length), of the draw u over weight_at's positions in order: the first
/// whose running sum passes u x the total, or, where rounding keeps every running sum at or below
/// that, the last weighted one, as softk::cpu::sample takes. Called by the whole block.
template <typename WeightAt>
__device__ int64_t draw_in_order(int64_t length, const WeightAt& weight_at, double u, ScanScratch& s) {
  const ScanResult all = scan_weights(length, weight_at, [](int64_t, double, float) { return false; }, false, s);
  const double target = u * all.total;  // u < 1: below the total
  const ScanResult drawn = scan_weights(
      length, weight_at, [&](int64_t, double running, float w) { return w > 0.0f && running > target; }, true, s);
  return static_cast<int64_t>(drawn.first != kNotFound ? drawn.first : all.last_weighted);
}

}  // namespace softk::kernels::sampling
