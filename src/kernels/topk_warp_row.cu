// Fused softmax + top-k of short rows, a warp per row (V <= 4096, K <= 64; under `automatic` in
// batches of at least 15 rows an SM: dispatch.cpp, warp_rows_pay). A block per row pays
// phases whose cost does not shrink with the row: the seed select, the candidate list, a dozen
// block barriers. At a few thousand tokens those are the whole time (8192 x 1000 f32, K = 50:
// 303 us for 33 MB, about torch's time), and a batch of short rows is many waves of such blocks.
// Here a warp takes a row, so a block holds eight and nothing waits on another warp (60 us
// there; 8192 x 4000 f32 334 -> 218 us; H100, one run):
//
//  1. The warp streams its row once and folds it into (m, d): a state a lane, merged by shuffles.
//  2. A radix select by the warp alone (team_radix_select<WarpTeam>: a 256-bin histogram of its
//     own in shared memory, __syncwarp between the steps) finds the K-th key, re-reading the row
//     from L1/L2 each pass: about three passes for fp32 logits; ties go on into the index bytes,
//     and only those a row's indices can set.
//  3. The K keys at or above it are gathered in shared memory, sorted by the warp's 64-key
//     bitonic network in registers (two a lane), and written with exp(x - m) / d.
//
// Exact on every input: the select is exact (keys are unique), and exactly K keys pass it.
#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kWarpRowThreads = kWarpsPerBlock * 32;

struct WarpRowShared {
  RadixSelectStorage select;
  TopkKey winners[kWarpRowMaxK];
  unsigned count;
};

/// Bits that hold every index of a row of `vocab` tokens (at least 1).
__device__ __forceinline__ int index_bits_of(int64_t vocab) {
  return vocab <= 1 ? 1 : 64 - __clzll(static_cast<unsigned long long>(vocab - 1));
}

template <typename T>
__global__ void __launch_bounds__(kWarpRowThreads) topk_warp_row_kernel(TopkProblem problem) {
  __shared__ WarpRowShared shared[kWarpsPerBlock];
  enter_after_previous_grid();

  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= problem.rows) return;  // the whole warp: no barrier below spans warps
  const unsigned lane = threadIdx.x % 32;
  WarpRowShared& s = shared[threadIdx.x / 32];
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);

  SoftmaxState state = empty_state();
  for_each_element<kStreamUnroll>(segment, static_cast<int>(lane), 32,
                                  [&](const auto& group) { accumulate(state, group, problem.k_exp); });
  const Normalizer normalizer(warp_reduce(state, problem.k_exp), problem.k_exp);
  if (lane == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  const auto k = static_cast<unsigned>(problem.k);
  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  if (normalizer.status == RowStatus::has_nan) {  // warp-uniform
    write_nan_row<32>(k, probs, indices, lane);
    return;
  }

  const auto row_keys = [&](auto&& visit) {
    for_each_element<kStreamUnroll>(segment, static_cast<int>(lane), 32,
                                    [&](const auto& group) { visit_keys(group, 0, visit); });
  };
  const TopkKey threshold =
      team_radix_select<WarpTeam, 0, kSignificantBits<T>>(k, row_keys, s.select, index_bits_of(problem.vocab));
  if (lane == 0) s.count = 0;
  __syncwarp();
  row_keys([&](TopkKey key) {
    if (key >= threshold) {
      const unsigned slot = atomicAdd(&s.count, 1u);
      if (slot < kWarpRowMaxK) s.winners[slot] = key;  // slot < k always; the test keeps a bug in bounds
    }
  });
  __syncwarp();
  TopkKey a = lane < k ? s.winners[lane] : kEmptyKey;  // kEmptyKey sorts last
  TopkKey b = lane + 32 < k ? s.winners[lane + 32] : kEmptyKey;
  warp_sort_run(a, b, lane);
  if (lane < k) write_topk_entry(a, normalizer, problem.log_probs, probs + lane, indices + lane);
  if (lane + 32 < k) write_topk_entry(b, normalizer, problem.log_probs, probs + lane + 32, indices + lane + 32);
}

}  // namespace

bool topk_warp_row_fits(int64_t vocab, int32_t k) { return k <= kWarpRowMaxK && vocab <= kWarpRowMaxVocab; }

void launch_topk_warp_rows(const TopkProblem& problem, const LaunchContext& launch) {
  const auto blocks = static_cast<unsigned>((problem.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    KernelLaunch(dim3(blocks), kWarpRowThreads, 0, launch.stream)
        .programmatic(launch.programmatic)(topk_warp_row_kernel<T>, problem);
  });
}

}  // namespace softk::kernels
