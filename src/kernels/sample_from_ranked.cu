// Sampling from a ranked row (softk/sample.hpp), one block a row. softk::topk has put the row's
// first ranked_length tokens in the contract's order; the block
//  1. sums the weights of the row's first top_k of them and finds where min_p cuts them;
//  2. where top_p < 1, finds the first rank whose running sum reaches top_p of that sum;
//  3. puts the candidates, the ranks before the tighter cut, in token order and draws: the
//     running sum of their weights first passing u x their total. Up to kSortedCandidates of
//     them are sorted in shared memory; more (a row bounded by neither top_k nor a short
//     nucleus) are the tokens whose key is at least the last candidate's, met in a pass over
//     the whole row.
// A list of at most kThreads ranks (top_k <= 256, the common case) takes all three steps with a
// rank a thread in registers (draw_from_short_list): a count over the block for each cut, one
// block scan for each sum, and the candidates sorted by token with their weights, so the list
// and its logits are read once, where the general steps read them again at every pass.
// Every sum runs in double and in one fixed order (scan_weights, sample_draw.cuh; draw_over_row,
// sample_row_draw.cuh; or a block scan), so a row's token is the same bits in every run and every
// batch, and each step sees the same running sums as the one before it over the same weights.
// Weights are fp32, exp2((x - max) x log2(e) / T): the ranking's order makes them non-increasing
// with rank.
#include <cub/block/block_radix_sort.cuh>

#include "cuda_check.hpp"
#include "kernels/sample_row_draw.cuh"
#include "philox.hpp"

namespace softk::kernels {
namespace {

using namespace sampling;

/// The most candidates put in token order by a sort in shared memory: a tile, kRun a thread.
constexpr int64_t kSortedCandidates = kTile;

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

struct ShortListScratch {
  union {
    typename cub::BlockScan<double, kThreads>::TempStorage scan;
    typename cub::BlockRadixSort<uint32_t, kThreads, 1, float>::TempStorage sort;
  };
  int first_reaching;  ///< the first rank whose running sum reaches top_p's share, or kThreads
  int first_drawn;     ///< the first weighted position past the draw's target, or kThreads
  int last_weighted;
  uint32_t chosen;
};

/// The three steps over a list of at most kThreads ranks (top_k of them), rank r in thread r.
/// Each cut and the draw take the first position that passes, by atomicMin, as the general steps
/// do: not a count of those before it, as the block scan's running sums, added in a different
/// grouping in each lane, need not grow by one ulp everywhere. Where rounding keeps every running
/// sum at or below the draw's target, the last weighted candidate, as draw_in_order takes.
/// Called by the whole block; every thread returns the token.
template <typename T>
__device__ int32_t draw_from_short_list(const int32_t* ranked, const T* logits, int64_t vocab, const RowSampling& p,
                                        const Weigher& weigh, double u, ShortListScratch& s) {
  const int rank = static_cast<int>(threadIdx.x);
  const bool kept = rank < p.top_k;
  const int32_t token = kept ? ranked[rank] : -1;  // -1 also for a -inf token (topk.hpp): weight 0
  float w = token < 0 ? 0.0f : weigh(to_float(logits[token]));
  if (rank == 0) {
    s.first_reaching = kThreads;
    s.first_drawn = kThreads;
    s.last_weighted = -1;
  }
  // 1. min_p: the weights fall with rank, so the ranks at or above min_p of the first's (1) are
  // a prefix, the first among them. (The count's barrier also orders the resets above.)
  int count = __syncthreads_count(kept && w >= p.min_p);
  // 2. top_p: the first rank whose running sum reaches top_p of the kept sum; none (rounding)
  // leaves no cut.
  if (p.top_p < 1.0f) {
    double running = 0.0, total = 0.0;
    cub::BlockScan<double, kThreads>(s.scan).InclusiveSum(static_cast<double>(w), running, total);
    if (kept && running >= static_cast<double>(p.top_p) * total) atomicMin(&s.first_reaching, rank);
    __syncthreads();
    if (s.first_reaching < kThreads) count = min(count, s.first_reaching + 1);
  }
  // 3. The candidates in token order, a -inf token and the ranks past the cut last (as vocab).
  if (rank >= count) w = 0.0f;
  uint32_t key[1] = {static_cast<uint32_t>(rank < count && token >= 0 ? token : vocab)};
  float weight[1] = {w};
  __syncthreads();  // the scan's storage is the sort's
  cub::BlockRadixSort<uint32_t, kThreads, 1, float>(s.sort).Sort(key, weight, 0,
                                                                 64 - __clzll(static_cast<unsigned long long>(vocab)));
  __syncthreads();  // the sort's storage is the scan's
  double running = 0.0, total = 0.0;
  cub::BlockScan<double, kThreads>(s.scan).InclusiveSum(static_cast<double>(weight[0]), running, total);
  const double target = u * total;  // u < 1: below the total, which the first rank's weight 1 is in
  if (weight[0] > 0.0f) {
    if (running > target) atomicMin(&s.first_drawn, rank);
    atomicMax(&s.last_weighted, rank);
  }
  __syncthreads();
  if (rank == (s.first_drawn < kThreads ? s.first_drawn : s.last_weighted)) s.chosen = key[0];
  __syncthreads();
  return static_cast<int32_t>(s.chosen);
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
  const double u = detail::sampling_uniform(p.seed, p.offset);
  if (problem.ranked_length <= kThreads) {  // block-uniform
    __shared__ ShortListScratch short_list;
    const int32_t token = draw_from_short_list(ranked, logits, problem.vocab, p, weigh, u, short_list);
    if (threadIdx.x == 0) problem.tokens[row] = token;
    return;
  }
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
  int32_t token;
  if (count <= kThreads) {
    token = draw_among_sorted<1>(ranked, count, problem.vocab, logits, weigh, u, scratch);
  } else if (count <= kSortedCandidates) {
    token = draw_among_sorted<kRun>(ranked, count, problem.vocab, logits, weigh, u, scratch);
  } else {
    // Too many to sort here: the candidates are the tokens whose key is at least the last
    // candidate's (where that is a -inf token, -1, the row has fewer finite tokens than
    // candidates, and every token passes: the -inf ones weigh 0), met in token order.
    __shared__ RowDrawScratch row_scratch;
    const int32_t last = ranked[count - 1];
    const TopkKey cut = last < 0 ? TopkKey{1} : make_key(to_float(logits[last]), last);
    token = static_cast<int32_t>(
        draw_over_row<kThreads>(RowByBlock{}, logits, problem.vocab, cut, 0.0f, weigh, u, row_scratch));
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
