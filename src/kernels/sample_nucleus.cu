// Sampling with no top_k bound (softk/sample.hpp), one block a row, without ranking the row:
//  1. one pass (survey_row) finds the row's largest key (its first token in the contract's
//     order) and its (m, d), so its RowStatus and about its total weight; a greedy row ends
//     there;
//  2. where top_p < 1, the nucleus's cut by mass: histogram passes of the tokens' weights, each
//     finding the bin that holds the token at which the running mass from the largest logit
//     down reaches top_p of the row's total. The first pass bins by weight (weight_bin: 32 bins
//     a factor of 2, so a bin is a range of logits); the next ones bin that range's logit keys,
//     2048 bins a pass, until a bin is one logit (two passes for 16-bit logits, whose keys have
//     16 or 19 bits, ~two to three for fp32). Where tokens tie at the cut's logit, one more pass
//     counts them in token order to the one that reaches it;
//  3. the draw over the row in token order among the tokens at or above the cut whose weight is
//     at least min_p (draw_over_row, sample_row_draw.cuh: two reads).
// Why histograms: ranking every token (softk::topk at K = V) to find a prefix of them sorts the
// vocabulary, milliseconds at V = 128K, where these are a few passes over the row.
// The histogram's masses are fixed-point integers, weights x 2^shift with the shift the largest
// that keeps the row's total below 2^62 (mass_shift): shared atomics add integers in any order to
// the same sums, so the cut is the same in every run, and a token's rounding is at most 2^-63 of
// the total. The draw's sums are in double and in one order (sample_row_draw.cuh).
// Every pass reads the row in 16-byte vectors with several in flight a thread, and a row's team
// (row_team.cuh) is a cluster of up to 16 CTAs where the batch leaves SMs to spare
// (launch_sample_nucleus): a pass over a row by one block is bound by its one SM's issue, ~13 us
// over 128256 bf16 logits at 512 threads (H200). Where the rows fill the SMs, a row has one
// block of 256 threads. The histogram passes split the row between the team's CTAs in any way
// (their masses are integers); the survey and the draw visit it in row_slots.cuh's slots, a warp
// a slot wherever it runs, so every team size gives the same sums.
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <array>
#include <type_traits>

#include "cuda_check.hpp"
#include "device_info.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/kernel_launch.hpp"
#include "kernels/online_softmax.cuh"
#include "kernels/row_slots.cuh"
#include "kernels/row_team.cuh"
#include "kernels/sample_row_draw.cuh"
#include "kernels/warp_collectives.cuh"
#include "philox.hpp"

namespace softk::kernels {
namespace {

using namespace sampling;

/// Bins of a histogram pass.
constexpr int kBinBits = 11;
constexpr int kMostBins = 1 << kBinBits;
/// The first pass's bins a factor of 2 in weight: its 2048 bins reach weights of 2^-64, below which
/// a token's mass (x 2^shift, shift <= 62) rounds to 0.
constexpr float kBinsPerHalving = 32.0f;

using Mass = unsigned long long;

template <int kBlockThreads>
struct NucleusShared {
  static_assert(kMostBins % kBlockThreads == 0, "a thread walks whole bins");
  // A bin's mass in this CTA's part of the row as two words: 32-bit shared atomics add them
  // (add_mass), where a 64-bit add would be a compare-and-swap loop, slow where tokens crowd a bin.
  unsigned mass_low[kMostBins];
  unsigned mass_high[kMostBins];
  Mass team_mass[kMostBins];  ///< in a cluster: a bin's mass over the whole row, every CTA's sum (each CTA a copy)
  typename cub::BlockScan<Mass, kBlockThreads>::TempStorage scan;
  Mass cut_above;    ///< the mass of the tokens above every bin of the pass
  unsigned cut_bin;  ///< the bin holding the token that reaches the target
  Mass next_above;   ///< the mass of the tokens above that bin
  Mass cut_mass;     ///< that bin's mass
};

template <typename Shared>
__device__ __forceinline__ void add_mass(Shared& sh, unsigned bin, Mass m) {
  const auto low = static_cast<unsigned>(m);
  const unsigned before = atomicAdd(&sh.mass_low[bin], low);
  // The carry out of the low word: each add that wraps it carries one, so the words sum exactly.
  const unsigned high = static_cast<unsigned>(m >> 32) + (before + low < before ? 1u : 0u);
  if (high != 0) atomicAdd(&sh.mass_high[bin], high);
}

template <typename Shared>
__device__ __forceinline__ Mass bin_mass(const Shared& sh, int bin) {
  return (Mass{sh.mass_high[bin]} << 32) | sh.mass_low[bin];
}

/// This CTA's part of the row for the histogram passes: whole 16-token runs, the CTAs in turn.
template <typename T, typename Team>
__device__ __forceinline__ RowSegment<T> team_part(const Team& team, const T* logits, int64_t vocab) {
  const int64_t part = ((vocab + team.ctas() - 1) / team.ctas() + 15) / 16 * 16;
  const int64_t begin = min(vocab, team.rank() * part);
  return RowSegment<T>(logits + begin, begin, min(vocab, begin + part) - begin);
}

/// The first pass's bin of logit x: kBinsPerHalving bins a factor of 2 in weight below the row's
/// largest, the largest logits in bin kMostBins - 1, the weights below 2^-64 (and -inf, and every
/// finite logit of a row whose largest is +inf) in bin 0. Non-decreasing in x (each step rounds
/// monotonically; the _rn intrinsics keep the compiler from fusing them differently where the
/// function is inlined twice), so a bin's logits are a range of keys (bin_key_range). Why not a
/// key's top bits: llm logits crowd a few of those (sign, exponent, two mantissa bits), and the
/// shared atomics on one bin's words serialise.
__device__ __forceinline__ int weight_bin(float x, const Weigher& weigh) {
  if (x == weigh.max) return kMostBins - 1;
  const float halvings = __fmul_rn(__fmul_rn(__fsub_rn(weigh.max, x), weigh.k_exp), kBinsPerHalving);
  // Clamped on both sides: the search of bin_key_range also weighs logits above the row's
  // largest (bin kMostBins from a factor of 2 above it), and the conversion of an infinity to int
  // is not defined.
  return kMostBins - 1 - static_cast<int>(fmaxf(fminf(halvings, static_cast<float>(kMostBins - 1)), -1.0f));
}

/// A logit's key without the low bits that every value of T has alike (16 for bf16, 13 for fp16:
/// all zeros for a positive value, all ones for a negative one), so that a T's keys are dense.
template <typename T>
constexpr int kKeyDropBits = sizeof(T) == 4 ? 0 : std::is_same_v<T, __half> ? 13 : 16;

template <typename T>
__device__ __forceinline__ uint32_t dense_key(float x) {
  return key_value_bits(x) >> kKeyDropBits<T>;
}

/// The float whose dense_key is k (exact for a value of T).
template <typename T>
__device__ __forceinline__ float value_of_dense_key(uint32_t k) {
  constexpr uint32_t kDropped = (1u << kKeyDropBits<T>) - 1;
  const uint32_t ordered = k << kKeyDropBits<T>;
  return float_of_ordered_bits(ordered | ((ordered & 0x80000000u) ? 0u : kDropped));
}

/// The dense keys [lo, hi] of the logits in weight_bin's bin `bin`: the first key whose bin
/// reaches `bin`, and the first that reaches bin + 1, less one (weight_bin is non-decreasing in
/// the key). Each is found by a 32-way search in every warp alike: a round tests 32 keys a step
/// apart and keeps the step up to the first that reaches the bin, so 7 rounds cover the 2^32
/// keys of fp32, where a binary search by one thread ran 64 dependent steps: ~5,500 cycles
/// against ~9,300 at 1 x 128256 fp32 top_p (by clock64 on an H200, of a 16-CTA cluster's ~85,000).
/// The two searches run side by side, their steps independent. Called by whole warps; no memory.
template <typename T>
__device__ void bin_key_range(int bin, const Weigher& weigh, uint32_t& lo, uint32_t& hi) {
  const auto lane = static_cast<uint64_t>(threadIdx.x % 32);
  // The first key reaching the bin is in [low, high]; high past the last key is "none reaches".
  struct Search {
    uint64_t low, high;
    int bin;
  };
  const uint64_t first_key = dense_key<T>(-CUDART_INF_F), past_last_key = uint64_t{dense_key<T>(CUDART_INF_F)} + 1;
  Search searches[2] = {{first_key, past_last_key, bin}, {first_key, past_last_key, bin + 1}};
  while (searches[0].low < searches[0].high || searches[1].low < searches[1].high) {
#pragma unroll
    for (Search& s : searches) {
      const uint64_t step = (s.high - s.low + 31) / 32;
      const uint64_t key = s.low + lane * step;
      const bool tested = key < s.high;
      const bool reaches = tested && weight_bin(value_of_dense_key<T>(static_cast<uint32_t>(key)), weigh) >= s.bin;
      const unsigned tested_lanes = __ballot_sync(0xffffffffu, tested);  // lane 0 at least, while low < high
      const unsigned reaching = __ballot_sync(0xffffffffu, reaches);
      if (s.low >= s.high) continue;  // found (the same in every lane)
      if (reaching & 1u) {
        s.high = s.low;  // the first key tested is the first reaching
      } else if (reaching != 0) {
        const uint64_t first = static_cast<uint64_t>(__ffs(static_cast<int>(reaching)) - 1);
        s.high = s.low + first * step;
        s.low += (first - 1) * step + 1;
      } else {
        s.low += static_cast<uint64_t>(31 - __clz(static_cast<int>(tested_lanes))) * step + 1;  // past the last tested
      }
    }
  }
  lo = static_cast<uint32_t>(searches[0].low);
  hi = static_cast<uint32_t>(searches[1].low - 1);
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

/// One histogram pass: every token with bin_of(x) >= 0 adds its mass to that bin; then the bin
/// holding the token at which the running mass, from the top bin down and from `above` (the mass
/// of the tokens above every bin), reaches the target. At the first pass (target < 0) the target
/// is top_p of the pass's total, returned through `target`. Called by every thread of the team,
/// each CTA counting its `part` of the row; every CTA finds the same bin. Ends on a barrier.
template <int kBlockThreads, typename Team, typename T, typename BinOf, typename MassOf>
__device__ void histogram_pass(const Team& team, const RowSegment<T>& part, const BinOf& bin_of, const MassOf& mass_of,
                               float top_p, double& target, NucleusShared<kBlockThreads>& sh) {
  for (int b = threadIdx.x; b < kMostBins; b += kBlockThreads) {
    sh.mass_low[b] = 0;
    sh.mass_high[b] = 0;
  }
  __syncthreads();  // zeroed before any thread adds
  for_each_element<kStreamUnroll, kStreamTailLoads>(part, threadIdx.x, kBlockThreads, [&](const auto& group) {
    using Group = std::decay_t<decltype(group)>;
#pragma unroll
    for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
      for (int e = 0; e < Group::kWidth; ++e) {
        const float x = group.x[n][e];
        const int bin = bin_of(x);
        if (bin < 0) continue;
        const Mass m = mass_of(x);
        if (m == 0) continue;  // a token without mass never reaches the target first
        add_mass(sh, static_cast<unsigned>(bin), m);
      }
  });
  team.sync();  // every CTA's tokens added
  // The team's mass of each bin: CTA r sums its kMostBins / ctas bins over every CTA and sends
  // the sums to each. Where the team has more threads than bins (8 and 16 CTAs of 512), a bin's
  // CTAs are dealt between adjacent lanes, which add their sums by shuffles: each thread's chain
  // of remote loads and stores is then 2 x 16 / 4 and 16 / 4 long at 16 CTAs, where bin b on team
  // thread b left it 32 and 16 long on ranks 0-3 while the other CTAs waited. (Integers: any
  // order gives the same sums.) A CTA alone has them already.
  const bool alone = team.ctas() == 1;
  if (!alone) {
    static_assert(kMostBins % kMostRowCtas == 0 && kMostRowCtas * kBlockThreads / kMostBins <= 32,
                  "a CTA's bins whole, a bin's lanes in one warp");
    // ctas is a power of 2 (cluster_ctas), so shifts and masks deal the bins.
    const int cta_bits = __ffs(team.ctas()) - 1;
    const int lane_bits = max(0, cta_bits + __ffs(kBlockThreads) - 1 - kBinBits);
    const int lane_of_bin = static_cast<int>(threadIdx.x) & ((1 << lane_bits) - 1);
    const int first_bin = team.rank() << (kBinBits - cta_bits);
    const int end_bin = first_bin + (kMostBins >> cta_bits);
    // Every thread runs the same trips (a CTA's bins x their lanes is a multiple of the block),
    // so the shuffles have every lane.
    for (int b = first_bin + (static_cast<int>(threadIdx.x) >> lane_bits); b < end_bin;
         b += kBlockThreads >> lane_bits) {
      Mass m = 0;
      for (int c = lane_of_bin; c < team.ctas(); c += 1 << lane_bits) m += bin_mass(*team.at(&sh, c), b);
      for (int offset = 1; offset < 1 << lane_bits; offset *= 2) m += __shfl_xor_sync(0xffffffffu, m, offset);
      for (int c = lane_of_bin; c < team.ctas(); c += 1 << lane_bits) team.at(sh.team_mass, c)[b] = m;
    }
    team.sync();  // every bin's sum in every CTA (and every CTA's counts read: they may be cleared)
  }
  const auto team_mass = [&](int b) { return alone ? bin_mass(sh, b) : sh.team_mass[b]; };
  // Thread t walks kBinsPerThread bins down from kMostBins - 1 - t x kBinsPerThread; the scan
  // gives it the mass of the bins above its own.
  constexpr int kBinsPerThread = kMostBins / kBlockThreads;
  const int top = kMostBins - 1 - static_cast<int>(threadIdx.x) * kBinsPerThread;
  Mass mine = 0;
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) mine += team_mass(top - j);
  Mass before = 0, total = 0;
  cub::BlockScan<Mass, kBlockThreads>(sh.scan).ExclusiveSum(mine, before, total);
  if (target < 0.0) target = static_cast<double>(top_p) * static_cast<double>(total);
  // The first bin whose running mass reaches the target: one thread's, one bin. (The target is
  // above 0 and at most the total, and the running mass only grows.)
  Mass running = sh.cut_above + before;
#pragma unroll
  for (int j = 0; j < kBinsPerThread; ++j) {
    const Mass m = team_mass(top - j);
    if (m > 0 && static_cast<double>(running) < target && static_cast<double>(running + m) >= target) {
      sh.cut_bin = static_cast<unsigned>(top - j);
      sh.next_above = running;
      sh.cut_mass = m;
    }
    running += m;
  }
  __syncthreads();  // the cut's bin written
}

/// Where top_p x the row's mass is reached, from the largest logit down, as a key: the tokens at
/// or above it (make_key order) are the shortest prefix of the contract's order whose mass
/// reaches it. Called by every thread of the team; ends on a barrier.
template <int kBlockThreads, typename Team, typename T>
__device__ TopkKey nucleus_cut(const Team& team, const T* logits, int64_t vocab, const Weigher& weigh, float top_p,
                               int shift, NucleusShared<kBlockThreads>& sh, RowDrawScratch& scratch) {
  const RowSegment<T> part = team_part(team, logits, vocab);
  // x 2^shift as a product: exact, as ldexpf's (a weight is at most 1, and the shift in [0, 61]: the
  // total is at least the largest token's 1; mass_shift), without its range checks on every token.
  const float scale = ldexpf(1.0f, shift);
  const auto mass_of = [&](float x) { return static_cast<Mass>(__float2ull_rn(weigh(x) * scale)); };
  if (threadIdx.x == 0) sh.cut_above = 0;  // histogram_pass's first barrier orders it
  double target = -1.0;
  histogram_pass(team, part, [&](float x) { return weight_bin(x, weigh); }, mass_of, top_p, target, sh);
  // The cut's logit is in a range of dense keys, [lo, hi]; each pass after the first splits it
  // into at most kMostBins bins of 2^s keys and keeps the one that holds the cut.
  uint32_t lo = 0, hi = 0;
  bin_key_range<T>(static_cast<int>(sh.cut_bin), weigh, lo, hi);
  while (lo < hi) {
    const uint32_t span = hi - lo;
    const int s = max(0, 32 - __clz(span) - kBinBits);  // span >> s < kMostBins
    if (threadIdx.x == 0) sh.cut_above = sh.next_above;
    histogram_pass(
        team, part,
        [&](float x) {
          const uint32_t key = dense_key<T>(x);
          return key >= lo && key <= hi ? static_cast<int>((key - lo) >> s) : -1;
        },
        mass_of, top_p, target, sh);
    const uint64_t first = uint64_t{lo} + (uint64_t{sh.cut_bin} << s);
    lo = static_cast<uint32_t>(first);
    hi = static_cast<uint32_t>(min(uint64_t{hi}, first + (uint64_t{1} << s) - 1));
  }
  // lo is the cut's logit. The tokens tied there have one weight, so one mass: its bin holds
  // at_cut of them. The cut keeps the first n in token order, n the fewest that reach the target.
  const float cut_logit = value_of_dense_key<T>(lo);
  const uint32_t cut_bits = key_value_bits(cut_logit);
  const Mass above = sh.next_above;
  const Mass each = mass_of(cut_logit);
  const Mass at_cut = sh.cut_mass / each;
  const double need = (target - static_cast<double>(above)) / static_cast<double>(each);
  Mass n = need <= 1.0 ? 1 : min(at_cut, static_cast<Mass>(ceil(need)));
  // The quotient's rounding, undone against the sums themselves.
  while (n > 1 && static_cast<double>(above + (n - 1) * each) >= target) --n;
  while (n < at_cut && static_cast<double>(above + n * each) < target) ++n;
  const TopkKey value_half = TopkKey{cut_bits} << 32;
  if (n == at_cut) return value_half;  // index bits 0: every tied token
  // The n-th tied token: the first whose running count passes n - 1/2 (counts in double are exact).
  const int64_t nth = first_passing_in_row<kBlockThreads>(
      team, logits, vocab, [&](float x, int64_t) { return key_value_bits(x) == cut_bits ? 1.0f : 0.0f; },
      [&](double) { return static_cast<double>(n) - 0.5; }, PositionTo::every_cta, scratch);
  return value_half | (0xFFFFFFFFu - static_cast<uint32_t>(nth));
}

/// What the survey finds, the same in every thread: the row's (m, d) at the draw's temperature
/// and its largest key.
struct RowSurvey {
  SoftmaxState state;
  TopkKey best;
};

/// Each slot's (m, d) and each warp's largest key, every CTA a copy.
template <int kBlockThreads>
struct SurveySlots {
  SoftmaxState state[kSlots];
  TopkKey warp_best[kMostRowCtas * kBlockThreads / 32];  ///< by team_warp
};

/// The survey in one read, in the row's slots (row_slots.cuh): each slot's (m, d) folded by a
/// warp, its lanes' states merged down a fixed tree and sent to every CTA of the team, then the
/// slots' merged by each CTA's warp 0 in an order set by their count alone (lane l takes slots l,
/// l + 32, ... in turn, then the lanes down the tree: a row of 126 slots merges 4 a lane where 32
/// in sequence took lanes 0-3 ~2,800 cycles, H200), so that d (which sets the masses' shift) has
/// the same bits in every CTA, team, block size, alignment and batch; the largest key sent by each
/// warp to every CTA, where warp 0 takes the largest. (Not by atomicMax into each CTA: a 64-bit
/// one into another CTA's shared memory compiles to a compare-and-swap loop that racecheck flags,
/// and the build that used it drew wrong tokens and faulted on an H200.) One assumption:
/// accumulate's `sum x rescale + sum` is contracted to an FMA alike in the kernels built for each
/// team and block size, as the same code is; its _rn form would change the top-k kernels' bits
/// too. Called by every thread of the team first thing (it holds the team's first barrier); ends
/// on a barrier.
template <int kBlockThreads, typename Team, typename T>
__device__ RowSurvey survey_row(const Team& team, const T* logits, int64_t vocab, float k,
                                SurveySlots<kBlockThreads>& sc, RowSurvey& result) {
  constexpr int W = kVectorWidth<T>;
  const RowSlots<T> slots(logits, vocab);
  const int lane = static_cast<int>(threadIdx.x % 32);
  team.arrive_at_start();
  const auto merge_down_the_warp = [&](SoftmaxState state) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const SoftmaxState other{__shfl_down_sync(0xffffffffu, state.max, offset),
                               __shfl_down_sync(0xffffffffu, state.sum, offset)};
      state = merge(state, other, k);
    }
    return state;  // lane 0's is the warp's
  };
  RunningArgmax argmax;  // the runs past the row are -inf at indices past it: a masked row's key is unused
  bool started = false;  // the wait comes after the first slot's loads, off their path
  for (int slot = team_warp<kBlockThreads>(team); slot < slots.slots; slot += team_warps<kBlockThreads>(team)) {
    SoftmaxState state = empty_state();
    visit_slot(slots, slot, lane, [&](const RawVector& raw, int, int64_t first) {
      ElementGroup<1, W> group;
      fill_runs<T>(group, &raw);
      group.offset[0] = first;
      accumulate(state, group, k);
      argmax.offer(group, 0);
      return false;
    });
    state = merge_down_the_warp(state);
    if (!started) team.wait_for_start();
    started = true;
    if (Team::kOneCta) {
      if (lane == 0) sc.state[slot] = state;
    } else {
      const SoftmaxState slot_state{__shfl_sync(0xffffffffu, state.max, 0), __shfl_sync(0xffffffffu, state.sum, 0)};
      if (lane < team.ctas()) team.at(sc.state, lane)[slot] = slot_state;  // lane c sends it to CTA c
    }
  }
  if (!started) team.wait_for_start();
  const TopkKey warp_best = warp_max(argmax.best);
  if (lane < team.ctas()) team.at(sc.warp_best, lane)[team_warp<kBlockThreads>(team)] = warp_best;
  team.sync();  // every slot's state and every warp's key in every CTA
  if (threadIdx.x < 32) {
    SoftmaxState state = empty_state();
    for (int slot = lane; slot < slots.slots; slot += 32) state = merge(state, sc.state[slot], k);
    state = merge_down_the_warp(state);
    TopkKey best = kEmptyKey;
    for (int w = lane; w < team_warps<kBlockThreads>(team); w += 32) best = max(best, sc.warp_best[w]);
    best = warp_max(best);
    if (lane == 0) result = {state, best};
  }
  __syncthreads();
  return result;
}

/// A CTA's shared memory. The survey's slots are dead before the first histogram pass clears
/// its counts: every CTA's writes into them come before the survey's team barrier, and its reads
/// before the block barrier that ends survey_row.
template <int kBlockThreads>
struct NucleusKernelShared {
  union {
    SurveySlots<kBlockThreads> survey;
    NucleusShared<kBlockThreads> cut;
  };
  RowSurvey row;
  RowDrawScratch draw;
};

template <int kBlockThreads, typename T, typename Team>
__global__ void __launch_bounds__(kBlockThreads) sample_nucleus_kernel(SampleProblem problem) {
  __shared__ NucleusKernelShared<kBlockThreads> sh;
  const Team team;
  const int64_t row = team.row();
  const bool writer = team.rank() == 0 && threadIdx.x == 0;
  const T* logits = row_pointer<T>(problem.logits, row, problem.row_stride);
  const RowSampling p = row_sampling(problem.params, row, static_cast<int32_t>(problem.vocab));
  // 1. The survey: its (m, d) gives the status and the total weight. A greedy row folds at
  // temperature 1, as its weights are not used (at k = 0, an infinite logit would fold as NaN).
  const float survey_k = p.k_exp > 0.0f ? p.k_exp : static_cast<float>(M_LOG2E);
  const RowSurvey survey = survey_row<kBlockThreads>(team, logits, problem.vocab, survey_k, sh.survey, sh.row);
  const RowStatus status = status_of(survey.state);
  if (writer) problem.status[row] = static_cast<int32_t>(status);
  if (status != RowStatus::ok) {
    if (writer) problem.tokens[row] = -1;
    return;
  }
  if (p.k_exp == 0.0f) {  // greedy: the first token in the contract's order
    if (writer) problem.tokens[row] = key_index(survey.best);
    return;
  }
  const Weigher weigh{key_value(survey.best), p.k_exp};
  // 2. The nucleus's cut.
  const TopkKey cut = p.top_p < 1.0f ? nucleus_cut(team, logits, problem.vocab, weigh, p.top_p,
                                                   mass_shift(survey.state, problem.vocab), sh.cut, sh.draw)
                                     : kEmptyKey;
  // 3. The draw.
  const double u = detail::sampling_uniform(p.seed, p.offset);
  const int64_t token = draw_over_row<kBlockThreads>(team, logits, problem.vocab, cut, p.min_p, weigh, u, sh.draw);
  if (writer) problem.tokens[row] = static_cast<int32_t>(token);
}

/// What a row's cluster wants, a CTA for each: kClusterTokensPerCta tokens where the row may be
/// cut by mass (a pass over fewer is a round trip and a cluster barrier either way), or 16 slots
/// where it reads only in slots (the survey and the draw: a warp a slot).
constexpr int64_t kClusterTokensPerCta = 4096;
constexpr int kNucleusClusterThreads = 512;
constexpr int kClusterSlotsPerCta = kNucleusClusterThreads / 32;

template <typename T>
constexpr auto* kClusterKernel = sample_nucleus_kernel<kNucleusClusterThreads, T, RowByCluster>;

/// How many clusters of 1, 2, 4, 8 and 16 CTAs are resident at once (an H200: 7 of 16); 16 CTAs
/// is past the portable limit of 8, so it is allowed for each kernel first. Asked once per device.
struct ResidentClusters {
  std::array<int, kMostRowCtas + 1> of_size;
};

const ResidentClusters& resident_clusters() {
  return cached_per_device<ResidentClusters>([](int) {
    ResidentClusters resident{};
    for (DType dtype : {DType::f32, DType::f16, DType::bf16})
      with_input_type(dtype, [](auto in) {
        using T = typename decltype(in)::type;
        SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kClusterKernel<T>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      });
    for (int ctas = 1; ctas <= kMostRowCtas; ctas *= 2) {
      KernelLaunch launch(dim3(static_cast<unsigned>(ctas)), kNucleusClusterThreads, 0, nullptr);
      launch.cluster(static_cast<unsigned>(ctas));
      const cudaError_t pending = cudaPeekAtLastError();
      if (cudaOccupancyMaxActiveClusters(&resident.of_size[ctas], kClusterKernel<float>, &launch.config()) !=
          cudaSuccess) {
        if (pending == cudaSuccess) (void)cudaGetLastError();  // a refused size is an answer, not an error to leave
        resident.of_size[ctas] = 0;
      }
    }
    return resident;
  });
}

/// The CTAs of a row's cluster: the largest power of two up to 16 and up to what the row wants,
/// whose clusters for the whole batch are resident at once (one wave).
template <typename T>
int cluster_ctas(const SampleProblem& problem) {
  const bool may_cut = problem.params.top_ps != nullptr || problem.params.top_p < 1.0f;
  const int64_t reads = (problem.vocab + RowSlots<T>::kSlotRead - 1) / RowSlots<T>::kSlotRead;
  const int64_t slots = std::min<int64_t>(kSlots, reads);
  const int64_t wanted = std::min<int64_t>(
      kMostRowCtas, may_cut ? problem.vocab / kClusterTokensPerCta
                                : (slots + kClusterSlotsPerCta - 1) / kClusterSlotsPerCta);
  const ResidentClusters& resident = resident_clusters();
  int ctas = 1;
  while (2 * ctas <= wanted && resident.of_size[2 * ctas] >= problem.rows) ctas *= 2;
  return ctas;
}

}  // namespace

void launch_sample_nucleus(const SampleProblem& problem, const DeviceInfo& device, cudaStream_t stream) {
  // A cluster of 512-thread CTAs a row where the rows leave SMs to spare (cluster_ctas: of one
  // CTA where the row or the batch wants no more). Where they fill the SMs, a block of 256: a
  // 512-thread block (up to 125 registers a thread) is one an SM, and two 256-thread blocks hide
  // each other's barriers (256 rows of fp32 top_p ran 0.81-0.96x at 512; bench/RESULTS.md,
  // "Sampling"). Every sum's order is the row's own (survey_row, sample_row_draw.cuh; the masses
  // are integers), so the choice changes no token.
  const bool clustered = problem.rows < device.sm_count && sm90_image_loaded(device);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    const auto rows = static_cast<unsigned>(problem.rows);
    if (clustered) {
      const int ctas = cluster_ctas<T>(problem);
      KernelLaunch launch(dim3(static_cast<unsigned>(ctas), rows), kNucleusClusterThreads, 0, stream);
      launch.cluster(static_cast<unsigned>(ctas));
      launch(kClusterKernel<T>, problem);
    } else {
      sample_nucleus_kernel<256, T, RowByBlock><<<rows, 256, 0, stream>>>(problem);
      SOFTK_CHECK_LAUNCH();
    }
  });
}

}  // namespace softk::kernels
