// Sampling with no top_k bound (softk/sample.hpp), one block a row, without ranking the row:
//  1. one pass (K = 1's, block_argmax.cuh) finds the row's largest key (its first token in the
//     contract's order) and its (m, d), so its RowStatus and about its total weight; a greedy
//     row ends there;
//  2. where top_p < 1, the nucleus's cut by mass: three passes histogram the tokens' weights by
//     their logit's 32-bit order key, 11, 11 and 10 bits of it at a time, each pass within the
//     bin the one before found, the bin holding the token at which the running mass from the
//     largest logit down reaches top_p of the row's total. That gives the cut's logit; where
//     tokens tie at it, one more pass counts them in token order to the one that reaches it;
//  3. the draw over the row in token order among the tokens at or above the cut whose weight is
//     at least min_p (draw_over_row, sample_row_draw.cuh: two reads).
// Why histograms: ranking every token (softk::topk at K = V) to find a prefix of them sorts the
// vocabulary, milliseconds at V = 128K, where these are a few passes over the row.
// The histogram's masses are fixed-point integers, weights x 2^shift with the shift the largest
// that keeps the row's total below 2^62 (mass_shift): shared atomics add integers in any order to
// the same sums, so the cut is the same in every run, and a token's rounding is at most 2^-63 of
// the total. The draw's sums are in double and in one order (sample_row_draw.cuh).
// Every pass reads the row in 16-byte vectors with several in flight a thread: one block has a
// row alone at batch 1, and a pass with one load in flight a thread waited a round trip an
// element (~110 us a pass over 128256 bf16 logits, H200).
#include <cub/block/block_scan.cuh>

#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/sample_row_draw.cuh"
#include "philox.hpp"

namespace softk::kernels {
namespace {

using namespace sampling;

/// Bits of the cut's 32-bit logit key that a histogram pass resolves, most significant first:
/// 11, 11, then the last 10.
constexpr int kBinBits = 11;
constexpr int kMostBins = 1 << kBinBits;
static_assert(kMostBins % kThreads == 0 && (1 << (32 - 2 * kBinBits)) % kThreads == 0,
              "a thread walks the same number of bins at every level");

using Mass = unsigned long long;

struct NucleusShared {
  // A bin's mass as two words: 32-bit shared atomics add them (add_mass), where a 64-bit add
  // would be a compare-and-swap loop, slow where tokens crowd a bin.
  unsigned mass_low[kMostBins];
  unsigned mass_high[kMostBins];
  typename cub::BlockScan<Mass, kThreads>::TempStorage scan;
  unsigned cut_bin;  ///< the bin holding the token that reaches the target
  Mass cut_above;    ///< the mass of the tokens above that bin
  Mass cut_mass;     ///< that bin's mass
};

__device__ __forceinline__ void add_mass(NucleusShared& sh, unsigned bin, Mass m) {
  const auto low = static_cast<unsigned>(m);
  const unsigned before = atomicAdd(&sh.mass_low[bin], low);
  // The carry out of the low word: each add that wraps it carries one, so the words sum exactly.
  const unsigned high = static_cast<unsigned>(m >> 32) + (before + low < before ? 1u : 0u);
  if (high != 0) atomicAdd(&sh.mass_high[bin], high);
}

__device__ __forceinline__ Mass bin_mass(const NucleusShared& sh, int bin) {
  return (Mass{sh.mass_high[bin]} << 32) | sh.mass_low[bin];
}

/// The fixed-point shift of a row's masses: the largest that keeps their total below 2^62,
/// from the survey's total weight (its d, fast exponentials summed in fp32) taken 1% high (the
/// masses round exact fp32 weights). A row whose largest is +inf weighs 1 a +inf token: its
/// total is at most V.
__device__ __forceinline__ int mass_shift(const SoftmaxState& survey, int64_t vocab) {
  const double total = isinf(survey.max) ? static_cast<double>(vocab) : static_cast<double>(survey.sum);
  int exponent = 0;
  frexp(total * 1.01, &exponent);  // total x 1.01 < 2^exponent
  return 62 - exponent;
}

/// Where top_p x the row's mass is reached, from the largest logit down, as a key: the tokens at
/// or above it (make_key order) are the shortest prefix of the contract's order whose mass
/// reaches it. Called by the whole block; ends on a barrier.
template <typename T>
__device__ TopkKey nucleus_cut(const T* logits, int64_t vocab, const Weigher& weigh, float top_p, int shift,
                               NucleusShared& sh, RowDrawScratch& scratch) {
  const RowSegment<T> row(logits, 0, vocab);
  const auto mass_of = [&](float w) { return static_cast<Mass>(__float2ull_rn(ldexpf(w, shift))); };
  uint32_t prefix = 0;  // the cut key's bits resolved so far, `resolved` of them
  int resolved = 0;
  Mass above = 0;  // the mass of the tokens whose key is above every key with that prefix
  double target = 0.0;
  Mass bin_found = 0;  // the mass of the last bin found
  while (resolved < 32) {
    const int bits = min(kBinBits, 32 - resolved);
    const int bins = 1 << bits;
    const int low_bits = 32 - resolved - bits;  // below this level's
    for (int b = threadIdx.x; b < bins; b += kThreads) {
      sh.mass_low[b] = 0;
      sh.mass_high[b] = 0;
    }
    __syncthreads();  // zeroed before any thread adds
    for_each_element<kStreamUnroll, kStreamTailLoads>(row, threadIdx.x, kThreads, [&](const auto& group) {
      using Group = std::decay_t<decltype(group)>;
#pragma unroll
      for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
        for (int e = 0; e < Group::kWidth; ++e) {
          const float x = group.x[n][e];
          const uint32_t key = key_value_bits(x);
          if (resolved > 0 && (key >> (32 - resolved)) != prefix) continue;
          const Mass m = mass_of(weigh(x));
          if (m == 0) continue;  // a token without mass never reaches the target first
          add_mass(sh, (key >> low_bits) & static_cast<unsigned>(bins - 1), m);
        }
    });
    __syncthreads();  // every token added
    // Thread t walks bins_per_thread bins down from bins - 1 - t x bins_per_thread; the scan gives
    // it the mass of the bins above its own.
    const int bins_per_thread = bins / kThreads;
    const int top = bins - 1 - static_cast<int>(threadIdx.x) * bins_per_thread;
    Mass mine = 0;
    for (int j = 0; j < bins_per_thread; ++j) mine += bin_mass(sh, top - j);
    Mass before = 0, total = 0;
    cub::BlockScan<Mass, kThreads>(sh.scan).ExclusiveSum(mine, before, total);
    if (resolved == 0) target = static_cast<double>(top_p) * static_cast<double>(total);
    // The first bin whose running mass reaches the target: one thread's, one bin. (The target is
    // above 0 and at most the total, and the running mass only grows.)
    Mass running = above + before;
    for (int j = 0; j < bins_per_thread; ++j) {
      const Mass m = bin_mass(sh, top - j);
      if (m > 0 && static_cast<double>(running) < target && static_cast<double>(running + m) >= target) {
        sh.cut_bin = static_cast<unsigned>(top - j);
        sh.cut_above = running;
        sh.cut_mass = m;
      }
      running += m;
    }
    __syncthreads();  // the cut's bin written
    prefix = (prefix << bits) | sh.cut_bin;
    resolved += bits;
    above = sh.cut_above;
    bin_found = sh.cut_mass;
    __syncthreads();  // read before the next level zeroes the bins
  }
  // `prefix` is the cut's logit key. The tokens tied there have one weight, so one mass: the
  // last bin holds at_cut of them. The cut keeps the first n in token order, n the fewest that
  // reach the target.
  const Mass each = mass_of(weigh(float_of_ordered_bits(prefix)));
  const Mass at_cut = bin_found / each;
  const double need = (target - static_cast<double>(above)) / static_cast<double>(each);
  Mass n = need <= 1.0 ? 1 : min(at_cut, static_cast<Mass>(ceil(need)));
  // The quotient's rounding, undone against the sums themselves.
  while (n > 1 && static_cast<double>(above + (n - 1) * each) >= target) --n;
  while (n < at_cut && static_cast<double>(above + n * each) < target) ++n;
  const TopkKey value_half = TopkKey{prefix} << 32;
  if (n == at_cut) return value_half;  // index bits 0: every tied token
  // The n-th tied token: the first whose running count passes n - 1/2 (counts in double are exact).
  const int64_t nth = first_passing_in_row(
      logits, vocab, [&](float x, int64_t) { return key_value_bits(x) == prefix ? 1.0f : 0.0f; },
      [&](double) { return static_cast<double>(n) - 0.5; }, scratch);
  return value_half | (0xFFFFFFFFu - static_cast<uint32_t>(nth));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) sample_nucleus_kernel(SampleProblem problem) {
  __shared__ BlockArgmaxScratch<kThreads> survey_scratch;
  __shared__ NucleusShared sh;
  __shared__ RowDrawScratch scratch;
  const int64_t row = blockIdx.x;
  const T* logits = row_pointer<T>(problem.logits, row, problem.row_stride);
  const RowSampling p = row_sampling(problem.params, row, static_cast<int32_t>(problem.vocab));
  // 1. The survey: K = 1's one read (block_argmax.cuh), its (m, d) giving the status and the
  // total weight. A greedy row folds at temperature 1, as its weights are not used (at k = 0, an
  // infinite logit would fold as NaN).
  start_block_argmax(survey_scratch);
  const RunArgmax survey = block_argmax<kThreads>(RowSegment<T>(logits, 0, problem.vocab),
                                                  p.k_exp > 0.0f ? p.k_exp : static_cast<float>(M_LOG2E), false,
                                                  nullptr, survey_scratch);
  const RowStatus status = status_of(survey.state);
  if (threadIdx.x == 0) problem.status[row] = static_cast<int32_t>(status);
  if (status != RowStatus::ok) {
    if (threadIdx.x == 0) problem.tokens[row] = -1;
    return;
  }
  if (p.k_exp == 0.0f) {  // greedy: the first token in the contract's order
    if (threadIdx.x == 0) problem.tokens[row] = key_index(survey.best);
    return;
  }
  const Weigher weigh{key_value(survey.best), p.k_exp};
  // 2. The nucleus's cut.
  const TopkKey cut = p.top_p < 1.0f ? nucleus_cut(logits, problem.vocab, weigh, p.top_p,
                                                   mass_shift(survey.state, problem.vocab), sh, scratch)
                                     : kEmptyKey;
  // 3. The draw.
  const double u = detail::sampling_uniform(p.seed, p.offset);
  const int64_t token = draw_over_row(logits, problem.vocab, cut, p.min_p, weigh, u, scratch);
  if (threadIdx.x == 0) problem.tokens[row] = static_cast<int32_t>(token);
}

}  // namespace

void launch_sample_nucleus(const SampleProblem& problem, cudaStream_t stream) {
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    sample_nucleus_kernel<T><<<static_cast<unsigned>(problem.rows), kThreads, 0, stream>>>(problem);
    SOFTK_CHECK_LAUNCH();
  });
}

}  // namespace softk::kernels
