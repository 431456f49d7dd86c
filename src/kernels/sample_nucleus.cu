// Sampling with no top_k bound (softk/sample.hpp), one block a row, without ranking the row:
//  1. one pass finds the row's largest key (its first token in the contract's order), whether
//     it holds NaN, and so its RowStatus, and estimates its total weight; a greedy row ends there;
//  2. where top_p < 1, the nucleus's cut by mass: three passes histogram the tokens' weights by
//     their logit's 32-bit order key, 11, 11 and 10 bits of it at a time, each pass within the
//     bin the one before found, the bin holding the token at which the running mass from the
//     largest logit down reaches top_p of the row's total. That gives the cut's logit; where
//     tokens tie at it, one more pass counts them in token order to the one that reaches it;
//  3. the draw over the row in token order among the tokens at or above the cut whose weight is
//     at least min_p (draw_over_row, sample_draw.cuh).
// Why histograms: ranking every token (softk::topk at K = V) to find a prefix of them sorts the
// vocabulary, milliseconds at V = 128K, where these are a few passes over the row.
// The histogram's masses are fixed-point integers, weights x 2^shift with the shift the largest
// that keeps the row's total below 2^62 (mass_shift): shared atomics add integers in any order to
// the same sums, so the cut is the same in every run, and a token's rounding is at most 2^-63 of
// the total. The draw's sums are scan_weights', in double and in one order.
#include <cub/block/block_scan.cuh>

#include "cuda_check.hpp"
#include "kernels/sample_draw.cuh"
#include "kernels/warp_collectives.cuh"
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
  TopkKey warp_best[kThreads / 32];
  double warp_weight[kThreads / 32];
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

/// What the first pass finds, the same in every thread.
struct RowSurvey {
  TopkKey first;        ///< the largest key (kEmptyKey where the row is all NaN)
  bool has_nan;
  double total_weight;  ///< where the largest logit is finite and the row not greedy: the row's
                        ///< weights' sum, up to rounding (each weight in fp32, summed in double)
};

/// One pass over the row: its largest key, NaN, and its total weight, each thread summing its
/// finite tokens' weights relative to its own largest (rescaled as that grows), the block then
/// rescaling each thread's sum to the row's largest.
template <typename T>
__device__ RowSurvey survey_row(const T* logits, int64_t vocab, float k_exp, NucleusShared& sh) {
  TopkKey best = kEmptyKey;
  bool nan = false;
  float largest = -CUDART_INF_F;  // this thread's largest finite logit
  double weight = 0.0;            // this thread's finite tokens' weights relative to it
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = to_float(logits[i]);
    if (x != x) {
      nan = true;
      continue;
    }
    best = max(best, make_key(x, i));
    if (k_exp == 0.0f || isinf(x)) continue;  // greedy rows need no weight; -inf weighs nothing
    if (x > largest) {
      weight = weight * exp2f((largest - x) * k_exp) + 1.0;
      largest = x;
    } else {
      weight += exp2f((x - largest) * k_exp);
    }
  }
  best = warp_max(best);
  if (threadIdx.x % 32 == 0) sh.warp_best[threadIdx.x / 32] = best;
  const bool has_nan = __syncthreads_or(nan);  // also the barrier before the warps' keys are read
  best = sh.warp_best[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) best = max(best, sh.warp_best[w]);
  const float row_largest = key_value(best);
  // Where the row's largest is infinite or the row is greedy, the sum is not used.
  double mine = isfinite(row_largest) && k_exp > 0.0f ? weight * exp2f((largest - row_largest) * k_exp) : 0.0;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_xor_sync(0xffffffffu, mine, offset);
  if (threadIdx.x % 32 == 0) sh.warp_weight[threadIdx.x / 32] = mine;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += sh.warp_weight[w];
  return {best, has_nan, total};
}

/// The fixed-point shift of a row's masses: the largest that keeps their total below 2^62,
/// from the total weight taken 1% high (the masses round fp32 weights). A row whose largest is
/// +inf weighs 1 a +inf token: its total is at most V.
__device__ __forceinline__ int mass_shift(const RowSurvey& survey, float largest, int64_t vocab) {
  const double total = isinf(largest) ? static_cast<double>(vocab) : survey.total_weight;
  int exponent = 0;
  frexp(total * 1.01, &exponent);  // total x 1.01 < 2^exponent
  return 62 - exponent;
}

/// Where top_p x the row's mass is reached, from the largest logit down, as a key: the tokens at
/// or above it (make_key order) are the shortest prefix of the contract's order whose mass
/// reaches it. Called by the whole block; ends on a barrier.
template <typename T>
__device__ TopkKey nucleus_cut(const T* logits, int64_t vocab, const Weigher& weigh, float top_p, int shift,
                               NucleusShared& sh, ScanScratch& scratch) {
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
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = to_float(logits[i]);
      const uint32_t key = key_value_bits(x);
      if (resolved > 0 && (key >> (32 - resolved)) != prefix) continue;
      const Mass m = mass_of(weigh(x));
      if (m == 0) continue;  // a token without mass never reaches the target first
      add_mass(sh, (key >> low_bits) & static_cast<unsigned>(bins - 1), m);
    }
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
  const ScanResult nth = scan_weights(
      vocab, [&](int64_t i) { return key_value_bits(to_float(logits[i])) == prefix ? 1.0f : 0.0f; },
      [&](int64_t, double running, float) { return running >= static_cast<double>(n); }, true, scratch);
  return value_half | (0xFFFFFFFFu - static_cast<uint32_t>(nth.first));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) sample_nucleus_kernel(SampleProblem problem) {
  __shared__ NucleusShared sh;
  __shared__ ScanScratch scratch;
  const int64_t row = blockIdx.x;
  const T* logits = row_pointer<T>(problem.logits, row, problem.row_stride);
  const RowSampling p = row_sampling(problem.params, row, static_cast<int32_t>(problem.vocab));
  const RowSurvey survey = survey_row(logits, problem.vocab, p.k_exp, sh);
  const float largest = key_value(survey.first);
  const RowStatus status = survey.has_nan               ? RowStatus::has_nan
                           : largest == -CUDART_INF_F ? RowStatus::all_masked
                                                         : RowStatus::ok;
  if (threadIdx.x == 0) problem.status[row] = static_cast<int32_t>(status);
  if (status != RowStatus::ok) {
    if (threadIdx.x == 0) problem.tokens[row] = -1;
    return;
  }
  if (p.k_exp == 0.0f) {  // greedy: the first token in the contract's order
    if (threadIdx.x == 0) problem.tokens[row] = key_index(survey.first);
    return;
  }
  const Weigher weigh{largest, p.k_exp};
  const TopkKey cut =
      p.top_p < 1.0f
          ? nucleus_cut(logits, problem.vocab, weigh, p.top_p, mass_shift(survey, largest, problem.vocab), sh, scratch)
          : kEmptyKey;
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
