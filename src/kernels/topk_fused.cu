// Fused softmax + top-k, a block per row: the fused core over the whole row (one read of it from
// DRAM; see block_fused_topk.cuh), the exact top-K of its candidates selected and sorted, then
// written with exp(x - m) / d; at K = 1 the row's largest key, which needs no candidates
// (block_argmax.cuh). No workspace, no second launch.
#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/block_fused_topk.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

template <typename T, int LA, bool kListsVectors, bool kSeedsFromVectors>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_kernel(TopkProblem problem, FusedCoreShape shape) {
  extern __shared__ RawVector candidate_storage[];
  __shared__ FusedTopkShared shared;
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const RowSegment<T> row_run(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const FusedCandidates found = block_fused_candidates<FusedRuns::rows, T, LA, kListsVectors, kSeedsFromVectors>(
      row_run.data, 0, problem.vocab, k, problem.k_exp, shape, candidate_storage, shared);
  const Normalizer normalizer(found.state, problem.k_exp);
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  if (normalizer.status == RowStatus::has_nan) {  // block-uniform
    write_nan_row<kFusedThreads>(k, probs, indices);
    return;
  }
  const auto write = [&](unsigned rank, TopkKey key) {
    write_topk_entry(key, normalizer, problem.log_probs, probs + rank, indices + rank);
  };
  if (found.write_top_k_by_range_bins(k, candidate_storage, write)) return;
  // The exact fallback: an overflowed list, or ties too many to rank in one bin.
  const TopkKey* sorted = found.with_key_source(row_run, [&](const auto& keys) {
    return block_topk_sorted<kFusedThreads, kSignificantBits<T>>(k, keys, shared.storage);
  });
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads) write(j, sorted[j]);
}

/// K = 1: the row's (m, d) and largest key in one read (block_argmax.cuh), no candidate list.
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_argmax_kernel(TopkProblem problem, bool staged) {
  extern __shared__ RawVector stage[];
  __shared__ BlockArgmaxScratch<kFusedThreads> scratch;
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const RowSegment<T> row_run(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const RunArgmax found = block_argmax<kFusedThreads>(row_run, problem.k_exp, staged, stage, scratch);
  if (threadIdx.x == 0) write_argmax_row(problem, row, found.state, found.best);
}

}  // namespace

void launch_topk_fused(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                       bool warp_rows, SplitSizing sizing) {
  if (warp_rows && topk_warp_row_fits(problem.vocab, problem.k)) {
    launch_topk_warp_rows(problem, device, launch);
    return;
  }
  if (topk_sorted_row_fits(problem.vocab, problem.k)) {
    launch_topk_sorted_rows(problem, device, launch);
    return;
  }
  // Two blocks fit an SM, so a grid of up to one block an SM leaves a slot free on every busy SM:
  // 128 rows of 128256-256000 tokens ran 0.77-0.98x as a programmatic launch (H200, one run).
  const LaunchContext block_launch{
      launch.stream, launch.programmatic && programmatic_launch_pays(problem.rows, device.sm_count, device)};
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    if (problem.k == 1) {
      launch_with_stream_stage(topk_fused_argmax_kernel<T>, dim3(static_cast<unsigned>(problem.rows)), block_launch,
                               device, problem);
      return;
    }
    with_fused_core_shape<FusedRuns::rows, T>(
        problem.k, problem.vocab, problem.rows, sizing, device,
        [&](auto seeds, auto vectors, auto from_vectors, const FusedCoreShape& shape) {
          launch_with_candidate_list(
              topk_fused_kernel<T, decltype(seeds)::value, decltype(vectors)::value, decltype(from_vectors)::value>,
              dim3(static_cast<unsigned>(problem.rows)), block_launch, shape, problem);
        });
  });
}

}  // namespace softk::kernels
