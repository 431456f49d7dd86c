// Fused softmax + top-k of short rows, a warp per row (rows of at most 32 KB, K <= 64; under
// `automatic` past one wave of blocks, or on rows of at most 1024 tokens, 8 KB at K = 1:
// dispatch.cpp, warp_rows_pay). A block per row pays phases whose cost does not shrink with the
// row: the seed select, the candidate list, a dozen block barriers. At a few thousand tokens
// those are the whole time (8192 x 1000 f32, K = 50: 303 us for 33 MB, about torch's time), and
// a batch of short rows is many waves of such blocks. Here a warp takes a row, so a block holds
// eight and nothing waits on another warp. The warp reads its row twice, and selects in
// registers:
//
//  1. The warp streams its row once, folding it into (m, d) (a state a lane, merged by
//     shuffles), and each lane keeps the four largest maxima of its 16-byte vectors: 128 seeds,
//     each a different token's logit. Their K-th largest, tau, found by sorting them in
//     registers (at K <= 8 by rounds of warp reductions instead), is at most the row's K-th
//     logit. (At K = 1 the lanes keep their largest logit and its index instead, and the warp's
//     largest is the answer: one read.)
//  2. The warp re-reads the row (from L1/L2) and lists every logit >= tau in shared memory: 2 to
//     ~90 keys at K = 2 to 64 on LLM-like and normal rows of 1000 and 4000 tokens (a simulation of
//     the seeds), against a room of 128.
//  3. An in-register sort of the list's 32, 64 or 128 keys (as many as it holds) gives the K
//     largest, written with exp(x - m) / d.
// A row of at most 32 tokens (mixture-of-experts routing) lists every token in pass 1 instead:
// no seeds, one read.
//
// A radix select per row, as before this design, cost three to four passes of contended
// shared-memory atomics over the row (8192 x 1000 f32, K = 50: 60 us on an H100, 20% of copy).
// It remains the exact path for a row whose list overflows (a constant row, a monotone one, one
// whose top tokens crowd a few lanes, or one with fewer than K finite logits, where tau is -inf):
// team_radix_select by the warp alone, skipping the index bytes a row's indices cannot set, then
// the same sort.
//
// Exact on every input: every winner is >= tau, so the list (unless it overflowed) holds the top
// K, and keys are unique, so the sort's order is the one there is.
#include <math_constants.h>

#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_buffer.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kWarpRowThreads = kWarpsPerBlock * 32;
/// Seeds a lane keeps: 4 x 32 = 128, the sort's width. Two a lane (the K-th of 64) listed ~170
/// to ~300 keys at K = 64 in the simulation, past the room; four list at most ~90.
constexpr int kSeedsPerLane = 4;
/// The list's room: the keys the final sort takes, four a lane.
constexpr unsigned kWarpListCapacity = 128;
static_assert(kWarpRowMaxK <= 64, "the sort keeps the 64 largest keys of the list");

struct WarpRowShared {
  RadixSelectStorage select;  ///< only for a row whose list overflowed
  TopkKey keys[kWarpListCapacity];
  unsigned count;
};

/// Bits that hold every index of a row of `vocab` tokens (at least 1).
__device__ __forceinline__ int index_bits_of(int64_t vocab) {
  return vocab <= 1 ? 1 : 64 - __clzll(static_cast<unsigned long long>(vocab - 1));
}

/// What pass 1 keeps besides (m, d).
enum class WarpRowPass {
  /// K = 1: each lane's largest logit and its index, so the warp's largest is the answer and the
  /// row is read once: no seeds, no list, no sort.
  argmax,
  /// The largest vector maxima: a quarter of the insertions of elements, and a row's top tokens
  /// rarely share a vector.
  vector_seeds,
  /// The largest elements, for a row of fewer than 2K vectors: there, too few vector maxima (and
  /// lanes holding -inf placeholders) left tau loose, and 48-100% of rows of 50-64 vectors
  /// overflowed the list at K = 50-64 in the simulation (fp32 200-256 tokens, bf16 400-512), none
  /// of 100 or more. A kernel of its own: the choice inside pass 1 cost the fp32 kernel 16
  /// registers, a block an SM, and large batches of 1000-token rows 6-11% (H100).
  element_seeds,
  /// Every element, listed in pass 1, for a row of at most kWholeRowMaxVocab tokens (K > 1): no
  /// seeds, no second read, and the list's sort is the narrowest one.
  whole_row,
};

/// Rows that list every token. A longer row's list sorts wider than the seeds' list would:
/// 16384 x 128 f32 at K = 2 took 27.8 us listing all 128 tokens against 14.3 through the seeds
/// and their rounds, and 64 tokens 18.3 against 14.1 (H100). (At K = 8, 64 tokens listed whole
/// were quicker, 20.0 us against 23.5 in bf16, and equal in f32.)
constexpr int64_t kWholeRowMaxVocab = 32;

/// Up to this K, tau comes from at most K rounds down the seeds' distinct values (about a dozen
/// instructions each, two of them dependent warp reductions, one instruction each from sm_80);
/// past it, from the 128-seed sort (28 stages of shuffles over four values a lane, whatever K).
/// At K = 8 the rounds took rows of 1000 tokens 1.08-1.10x and rows of 128-256 experts
/// 1.2-1.5x; at K = 16 they lost 1-2% (H100).
constexpr unsigned kSeedRoundsMaxK = 8;

/// tau: the K-th largest of the warp's seeds (each lane's sorted descending). -inf placeholders
/// of lanes with fewer than four seeds only lower it. A seed is a distinct token's logit, so tau
/// is at most the row's K-th logit.
__device__ __forceinline__ float kth_largest_seed(const SeedBuffer<kSeedsPerLane>& seeds, unsigned k, unsigned lane) {
  static_assert(kSeedsPerLane == 4, "the seeds fill the 128-key sort");
  if (k <= kSeedRoundsMaxK) {
    // Down the warp's distinct seed values until K seeds are at or above one. It ends by K
    // rounds, or at the -inf placeholders' value, which all 128 seeds reach.
    uint32_t ordered[kSeedsPerLane];
#pragma unroll
    for (int i = 0; i < kSeedsPerLane; ++i) ordered[i] = ordered_bits(seeds.values[i]);
    uint32_t largest = warp_max(ordered[0]);
    for (;;) {
      unsigned at_least = 0, below = 0;
#pragma unroll
      for (int i = 0; i < kSeedsPerLane; ++i) {
        at_least += ordered[i] >= largest;
        if (ordered[i] < largest) below = max(below, ordered[i]);
      }
      if (warp_sum(at_least) >= k) break;
      largest = warp_max(below);
    }
    return float_of_ordered_bits(largest);
  }
  // With the sort under a branch on K, ptxas spills nothing (12 to 56 bytes a thread without one).
  float a = seeds.values[0], b = seeds.values[1];
  warp_top64_of_128(a, b, seeds.values[2], seeds.values[3], lane);
  return __shfl_sync(0xffffffffu, k <= 32 ? a : b, (k - 1) % 32);
}

// At least three blocks an SM (at most 85 registers): unbounded, the 16-bit kernels took 98 and
// ran two; a bound of four spilled ~100 bytes. kTailLoads: how a lane's last vectors (fewer than
// a round) are fetched (launch_topk_warp_rows).
template <typename T, WarpRowPass kPass, int kTailLoads>
__global__ void __launch_bounds__(kWarpRowThreads, 3) topk_warp_row_kernel(TopkProblem problem) {
  __shared__ WarpRowShared shared[kWarpsPerBlock];
  enter_after_previous_grid();

  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= problem.rows) return;  // the whole warp: no barrier below spans warps
  const unsigned lane = threadIdx.x % 32;
  WarpRowShared& s = shared[threadIdx.x / 32];
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);

  // Pass 1.
  if constexpr (kPass == WarpRowPass::whole_row) {
    if (lane == 0) s.count = 0;
    __syncwarp();
  }
  const CandidateList whole_row_list{s.keys, &s.count, kWarpListCapacity, -CUDART_INF_F};
  SoftmaxState state = empty_state();
  SeedBuffer<kSeedsPerLane> seeds;
  // The lane's largest logit and its lowest index (argmax pass). Compared as a float and an index,
  // not as a key: a 64-bit key an element cost bf16 rows more than the second read it saves.
  // A lane visits its head and tail elements before its body, so ties compare the index.
  float best = -CUDART_INF_F;
  int32_t best_index = -1;
  for_each_element<kStreamUnroll, kTailLoads>(segment, static_cast<int>(lane), 32, [&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    accumulate(state, group, problem.k_exp);
    if constexpr (kPass == WarpRowPass::argmax) {
      visit_elements(group, 0, [&](float x, int64_t index) {
        const auto i = static_cast<int32_t>(index);  // V <= kWarpRowMaxBytes / 2
        if (x > best || (x == best && static_cast<uint32_t>(i) < static_cast<uint32_t>(best_index))) {
          best = x;
          best_index = i;
        }
      });
    } else if constexpr (kPass == WarpRowPass::element_seeds) {
      visit_elements(group, 0, [&](float x, int64_t) { seeds.push(x); });
    } else if constexpr (kPass == WarpRowPass::whole_row) {
      whole_row_list.offer(group, 0);
    } else {
#pragma unroll
      for (int n = 0; n < Group::kRuns; ++n) seeds.push(run_max(group, n));
    }
  });
  const RowOutput<32> output(problem, row, warp_reduce(state, problem.k_exp), lane);
  if (output.wrote_nan_row()) return;  // warp-uniform
  if constexpr (kPass == WarpRowPass::argmax) {
    const TopkKey winner = warp_max(best_index < 0 ? kEmptyKey : make_key(best, best_index));
    if (lane == 0) output(0, winner);
    return;
  }

  const auto k = static_cast<unsigned>(problem.k);

  unsigned listed = 0;  // warp-uniform
  if constexpr (kPass == WarpRowPass::whole_row) {
    __syncwarp();
    listed = s.count;  // V <= the room: never overflows
  } else {
    const float tau = kth_largest_seed(seeds, k, lane);

    // Pass 2.
    if (lane == 0) s.count = 0;
    __syncwarp();
    const CandidateList list{s.keys, &s.count, kWarpListCapacity, tau};
    for_each_element<kStreamUnroll, kTailLoads>(segment, static_cast<int>(lane), 32,
                                    [&](const auto& group) { list.offer(group, 0); });
    __syncwarp();
    listed = s.count;
    if (listed > kWarpListCapacity) {
      team_topk_unsorted<WarpTeam, kSignificantBits<T>>(k, TeamRowKeys<WarpTeam, T>{segment}, s.select, s.keys,
                                                       s.count, index_bits_of(problem.vocab));
      listed = k;
    }
  }

  // The sort as wide as the list: each width doubles the last's shuffles.
  const auto listed_key = [&](unsigned i) { return i < listed ? s.keys[i] : kEmptyKey; };  // sorts last
  const auto write = [&](TopkKey key, unsigned j) {
    if (j < k) output(j, key);
  };
  if (listed <= 32) {
    TopkKey a = listed_key(lane);
    warp_sort_lanes(a, lane);
    write(a, lane);
    return;
  }
  TopkKey a = listed_key(lane), b = listed_key(lane + 32);
  if (listed <= 64) warp_sort_run(a, b, lane);
  else warp_top64_of_128(a, b, listed_key(lane + 64), listed_key(lane + 96), lane);
  write(a, lane);
  write(b, lane + 32);
}

/// The kernel of a row streamed (not listed whole): its pass by K and length.
template <typename T, int kTailLoads>
auto streamed_row_kernel(int32_t k, int64_t row_vectors) {
  return k == 1                           ? topk_warp_row_kernel<T, WarpRowPass::argmax, kTailLoads>
         : row_vectors < int64_t{2} * k ? topk_warp_row_kernel<T, WarpRowPass::element_seeds, kTailLoads>
                                        : topk_warp_row_kernel<T, WarpRowPass::vector_seeds, kTailLoads>;
}

/// From a whole round of loads a lane (512 fp32 or 1024 16-bit tokens), a lane's last vectors go
/// all at once: rows of 1000-4000 fp32 and 2000-4000 bf16 tokens 1.00-1.20x at K = 1, 1.00-1.09x at
/// K = 8-50. Shorter rows fetch them one at a time: at once, bf16 rows of 1000 read 0.97-0.98x at
/// K = 16-50, and the mixture-of-experts rows (8-256 tokens) 0.74-1.11x, the 0.74 at 8 tokens
/// (H200, two rounds of one run, measured with every row at once).
constexpr int64_t kTailAtOnceRowVectors = int64_t{32} * kStreamUnroll;

}  // namespace

bool topk_warp_row_fits(int64_t vocab, DType dtype, int32_t k) {
  return k <= kWarpRowMaxK && vocab * static_cast<int64_t>(dtype_size(dtype)) <= kWarpRowMaxBytes;
}

void launch_topk_warp_rows(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch) {
  const auto blocks = static_cast<unsigned>((problem.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    const int64_t row_vectors = problem.vocab / RowSegment<T>::kWidth;
    const auto kernel = problem.k > 1 && problem.vocab <= kWholeRowMaxVocab
                            ? topk_warp_row_kernel<T, WarpRowPass::whole_row, 1>
                        : row_vectors >= kTailAtOnceRowVectors
                            ? streamed_row_kernel<T, kStreamTailLoads>(problem.k, row_vectors)
                            : streamed_row_kernel<T, 1>(problem.k, row_vectors);
    // Up to 4 x SMs blocks: at most a wave, in which SMs keep free slots (four blocks fit one).
    // Measured, programmatic against not: 1024 rows (128 blocks) 0.77-0.94x, 2048 rows
    // 0.87-1.08x; 256-512 rows 1.05-1.24x (bf16 512 rows at K = 50 0.92-0.97x), 8192 rows
    // 1.01-1.12x (H200, one run).
    const bool programmatic =
        launch.programmatic && programmatic_launch_pays(blocks, int64_t{4} * device.sm_count, device);
    KernelLaunch(dim3(blocks), kWarpRowThreads, 0, launch.stream).programmatic(programmatic)(kernel, problem);
  });
}

}  // namespace softk::kernels
