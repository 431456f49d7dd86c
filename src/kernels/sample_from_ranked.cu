// Sampling from a ranked row (softk/sample.hpp), one block a row. softk::topk has put the row's
// first ranked_length tokens in the contract's order; the block
//  1. sums the weights of the row's first top_k of them and finds where min_p cuts them;
//  2. where top_p < 1, finds the first rank whose running sum reaches top_p of that sum;
//  3. puts the candidates, the ranks before the tighter cut, in token order and draws: the
//     running sum of their weights first passing u x their total. Up to kSortedCandidates of
//     them are sorted in shared memory; more (a row bounded by neither top_k nor a short
//     nucleus) are the tokens whose key is at least the last candidate's, met in a pass over
//     the whole row.
// Every sum runs in double and in one fixed order (scan_weights), so a row's token is the same
// bits in every run and every batch, and each pass sees the same running sums as the pass before
// it over the same weights. Weights are fp32, exp2((x - max) x log2(e) / T): the ranking's order
// makes them non-increasing with rank.
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <cmath>

#include "cuda_check.hpp"
#include "kernels/sample_launch.hpp"
#include "kernels/topk_key.cuh"
#include "kernels/type_dispatch.cuh"
#include "philox.hpp"

namespace softk::kernels {
namespace {

constexpr int kThreads = 256;
/// Positions a thread sums in sequence: a tile is kThreads x kRun positions.
constexpr int kRun = 16;
constexpr int64_t kTile = int64_t{kThreads} * kRun;
constexpr unsigned long long kNotFound = ~0ull;
/// The most candidates put in token order by a sort in shared memory: a tile, kRun a thread.
constexpr int64_t kSortedCandidates = kTile;

/// A row's parameters: its arrays' entries where given, clamped as sample.hpp says (the scalars
/// were checked on the host, so there the clamps change nothing).
struct RowSampling {
  float k_exp;  ///< log2(e) / temperature; 0: greedy
  int32_t top_k;
  float top_p;
  float min_p;
  uint64_t seed;
  uint64_t offset;
};

__device__ RowSampling row_sampling(const SamplingParams& p, int64_t row, int32_t bound) {
  RowSampling s;
  const float t = p.temperatures ? p.temperatures[row] : p.temperature;
  const float k_exp = static_cast<float>(M_LOG2E) / t;
  s.k_exp = t > 0.0f && isfinite(k_exp) ? k_exp : 0.0f;  // false for NaN, infinite and subnormal t
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

/// The draw over a row's first `count` ranks (at most kThreads x kItems), taken in token order:
/// their tokens radix-sorted in shared memory, a -inf token's -1 (weight 0) as `vocab`, after
/// every token, so that the sort needs only the bits of vocab.
template <int kItems, typename T>
__device__ int32_t draw_among_sorted(const int32_t* ranked, int64_t count, int64_t vocab, const T* logits,
                                     const Weigher& weigh, double u, ScanScratch& s) {
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, kItems>;
  __shared__ union {
    typename Sort::TempStorage sort;
    uint32_t tokens[kThreads * kItems];
  } sorted;
  uint32_t keys[kItems];
#pragma unroll
  for (int e = 0; e < kItems; ++e) {
    const int64_t rank = int64_t{e} * kThreads + threadIdx.x;  // striped: coalesced reads
    const int32_t token = rank < count ? ranked[rank] : -1;
    keys[e] = static_cast<uint32_t>(token < 0 ? vocab : token);
  }
  const int end_bit = 64 - __clzll(static_cast<unsigned long long>(vocab));
  Sort(sorted.sort).Sort(keys, 0, end_bit);
  __syncthreads();  // the sort's storage is the token array
#pragma unroll
  for (int e = 0; e < kItems; ++e) sorted.tokens[threadIdx.x * kItems + e] = keys[e];  // blocked: in order
  __syncthreads();
  const auto weight_at = [&](int64_t j) {
    const uint32_t token = sorted.tokens[j];
    return token == vocab ? 0.0f : weigh(to_float(logits[token]));
  };
  return static_cast<int32_t>(sorted.tokens[draw_in_order(count, weight_at, u, s)]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) sample_from_ranked_kernel(SampleProblem problem) {
  __shared__ ScanScratch scratch;
  const int64_t row = blockIdx.x;
  if (problem.status[row] != static_cast<int32_t>(RowStatus::ok)) {  // NaN or all -inf: no token
    if (threadIdx.x == 0) problem.tokens[row] = -1;
    return;
  }
  const T* logits = row_pointer<T>(problem.logits, row, problem.row_stride);
  const int32_t* ranked = problem.ranked + row * problem.ranked_length;
  const RowSampling p = row_sampling(problem.params, row, problem.ranked_length);
  if (p.k_exp == 0.0f) {  // greedy: the first token in the contract's order
    if (threadIdx.x == 0) problem.tokens[row] = ranked[0];
    return;
  }
  const Weigher weigh{to_float(logits[ranked[0]]), p.k_exp};
  // A -inf token ranks as -1 (topk.hpp), after every other: weight 0.
  const auto ranked_weight = [&](int64_t rank) {
    const int32_t token = ranked[rank];
    return token < 0 ? 0.0f : weigh(to_float(logits[token]));
  };

  // 1. The top_k kept, their sum, and the min_p cut: the first rank below min_p of the first's
  // weight (1), where weights fall with rank.
  const ScanResult kept = scan_weights(
      p.top_k, ranked_weight, [&](int64_t rank, double, float w) { return rank > 0 && w < p.min_p; }, false, scratch);
  int64_t count = kept.first == kNotFound ? p.top_k : static_cast<int64_t>(kept.first);
  // 2. The top_p cut: the first rank whose running sum reaches top_p of the kept sum (none found
  // only where rounding kept the last running sum below it: no cut).
  if (p.top_p < 1.0f) {
    const double nucleus = static_cast<double>(p.top_p) * kept.total;
    const ScanResult reaching = scan_weights(
        p.top_k, ranked_weight, [&](int64_t, double running, float) { return running >= nucleus; }, true, scratch);
    if (reaching.first != kNotFound) count = min(count, static_cast<int64_t>(reaching.first) + 1);
  }
  // 3. The draw over the candidates, the ranks before the cut, in token order. (The row's
  // largest logit weighs 1 and is a candidate, so one is weighted.)
  const double u = detail::sampling_uniform(p.seed, p.offset);
  int32_t token;
  if (count <= kThreads) {
    token = draw_among_sorted<1>(ranked, count, problem.vocab, logits, weigh, u, scratch);
  } else if (count <= kSortedCandidates) {
    token = draw_among_sorted<kRun>(ranked, count, problem.vocab, logits, weigh, u, scratch);
  } else {
    // Too many to sort here: the candidates are the tokens whose key is at least the last
    // candidate's (where that is a -inf token, -1, the row has fewer finite tokens than
    // candidates, and every token passes: the -inf ones weigh 0), met in token order.
    const int32_t last = ranked[count - 1];
    const TopkKey cut = last < 0 ? TopkKey{1} : make_key(to_float(logits[last]), last);
    const auto candidate_weight = [&](int64_t i) {
      const float x = to_float(logits[i]);
      return make_key(x, i) >= cut ? weigh(x) : 0.0f;
    };
    token = static_cast<int32_t>(draw_in_order(problem.vocab, candidate_weight, u, scratch));
  }
  if (threadIdx.x == 0) problem.tokens[row] = token;
}

}  // namespace

void launch_sample_from_ranked(const SampleProblem& problem, cudaStream_t stream) {
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    sample_from_ranked_kernel<T><<<static_cast<unsigned>(problem.rows), kThreads, 0, stream>>>(problem);
    SOFTK_CHECK_LAUNCH();
  });
}

}  // namespace softk::kernels
