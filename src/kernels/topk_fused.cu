// Fused softmax + top-k, a block per row: the fused core over the whole row (one read of it from
// DRAM; see block_fused_topk.cuh), the exact top-K of its candidates selected and sorted, then
// written with exp(x - m) / d; at K = 1 the row's largest key, which needs no candidates
// (block_argmax.cuh); at 1 < K <= 64 on rows of 1K-4M tokens, K = 1's read with each thread's
// largest value of every span of its elements, then the spans holding the winners read again
// (block_span_topk.cuh, as split-k's chunks); at K > 64 on rows of at most 32 KB, candidates
// from each thread's largest elements keyed with where they lie (block_slotted_seeds.cuh), and on
// rows of 32-128 KB from the vectors whose maxima reach the K-th largest one's bin
// (block_vector_maxima.cuh). No workspace, no second launch.
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/block_fused_topk.cuh"
#include "kernels/block_slotted_seeds.cuh"
#include "kernels/block_span_topk.cuh"
#include "kernels/block_vector_maxima.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

/// The row's exact top k, sorted, from `keys` (a candidate list, or the row itself), where a
/// kernel's fast path cannot rank them (ties, a flat row, an overflowed list). Out of line, for the
/// kernels whose streams it would take registers from: inlined in the span kernel, its 64-register
/// builds spilled 16-32 bytes, and a change after the stream moved the stream by ~3,500 cycles a
/// block (clock64); without the spill 64 rows of 128256-256000 bf16 at K = 50 ran 1.05-1.07x,
/// other span rows 1.00-1.01x (H200, 2026-11-25). The slotted and vector-maxima kernels take it by
/// input type (kSlottedExactOutOfLine, kVectorMaximaExactOutOfLine). Out of line in every fused
/// core kernel, it took their fp32 builds from 56-62 registers to 63-64 and measured 0.97-1.03x,
/// so they keep theirs inline.
template <typename T, typename Keys>
__device__ __noinline__ const TopkKey* select_exactly(unsigned k, const Keys keys, BlockTopkStorage& storage) {
  return block_topk_sorted<kFusedThreads, kSignificantBits<T>>(k, keys, storage);
}

/// Writes row `row`'s sorted top-K from the candidates a fused core left in candidate_storage:
/// by range bins, or, for an overflowed list or ties too many to rank in one bin, by the exact
/// fallback over the list or the row itself (out of line where kExactOutOfLine: select_exactly).
/// Called by all kFusedThreads threads.
template <typename T, bool kExactOutOfLine>
__device__ __forceinline__ void write_fused_top_k(const TopkProblem& problem, int64_t row, const RowSegment<T>& row_run,
                                                  const FusedCandidates& found, void* candidate_storage,
                                                  FusedTopkShared& shared) {
  const auto k = static_cast<unsigned>(problem.k);
  const RowOutput<kFusedThreads> write(problem, row, found.state);
  if (write.wrote_nan_row()) return;
  if (found.write_top_k_by_range_bins(k, candidate_storage, write)) return;
  const TopkKey* sorted = found.with_key_source(row_run, [&](const auto& keys) {
    if constexpr (kExactOutOfLine)
      return select_exactly<T>(k, keys, shared.storage);
    else
      return block_topk_sorted<kFusedThreads, kSignificantBits<T>>(k, keys, shared.storage);
  });
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads) write(j, sorted[j]);
}

/// A kernel of a block per row whose candidates come from `core` (core(row_run, candidate_storage,
/// shared): FusedCandidates, candidate_storage being the kernel's dynamic shared memory), written
/// by write_fused_top_k.
template <typename T, bool kExactOutOfLine = false, typename Core>
__device__ __forceinline__ void fused_row_top_k(const TopkProblem& problem, Core&& core) {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector candidate_storage[];
  __shared__ FusedTopkShared shared;
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const RowSegment<T> row_run(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const FusedCandidates found = core(row_run, static_cast<void*>(candidate_storage), shared);
  write_fused_top_k<T, kExactOutOfLine>(problem, row, row_run, found, candidate_storage, shared);
}

template <typename T, int LA, bool kListsVectors, bool kSeedsFromVectors>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_kernel(TopkProblem problem, FusedCoreShape shape) {
  fused_row_top_k<T>(problem, [&](const RowSegment<T>& row_run, void* candidate_storage, FusedTopkShared& shared) {
    return block_fused_candidates<FusedRuns::rows, T, LA, kListsVectors, kSeedsFromVectors>(
        row_run.data, 0, problem.vocab, static_cast<unsigned>(problem.k), problem.k_exp, shape, candidate_storage,
        shared);
  });
}

/// Where the slotted and vector-maxima kernels select exactly out of line (select_exactly), by
/// input type. Inlined, the fp16 slotted build spilled 24 bytes and the vector-maxima builds 28-60
/// (fp32, bf16, fp16). Out of line, against inlined (H200, 2026-11-25, llm logits, auto, runs of
/// three and five rounds): fp16 slotted 1.017-1.025x at K = 256 (8192 x 4000 218.6 -> 213.7 us),
/// 1.00x at K = 1024; vector maxima bf16 1.012-1.031x at 256-1024 rows of 32000-50257 (1024 x 50257
/// K=1024 73.8 -> 71.6 us), fp32 0.994-1.009x, fp16 1.001-1.008x but 0.977-0.985x at 256 x 32000,
/// where it stays inline.
template <typename T>
constexpr bool kSlottedExactOutOfLine = std::is_same_v<T, __half>;
template <typename T>
constexpr bool kVectorMaximaExactOutOfLine = !std::is_same_v<T, __half>;

/// K > 64 on rows of at most 32 KB (rows_take_slotted_seeds): the candidates in one read of the row,
/// by each thread's largest elements keyed with where they lie (block_slotted_seeds.cuh).
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm) topk_fused_slotted_kernel(TopkProblem problem) {
  constexpr bool kOutOfLine = kSlottedExactOutOfLine<T>;
  fused_row_top_k<T, kOutOfLine>(problem, [&](const RowSegment<T>& row_run, void* candidate_storage,
                                              FusedTopkShared& shared) {
    return block_slotted_candidates(row_run, static_cast<unsigned>(problem.k), problem.k_exp, candidate_storage,
                                    shared);
  });
}

/// K > 64 on rows of 32-128 KB (rows_take_vector_maxima): the candidates from one read of the row
/// that keeps each vector's maximum and their histogram, and a re-read of the vectors whose maxima
/// reach the K-th largest one's bin (block_vector_maxima.cuh).
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_vector_maxima_kernel(TopkProblem problem, bool staged) {
  constexpr bool kOutOfLine = kVectorMaximaExactOutOfLine<T>;
  fused_row_top_k<T, kOutOfLine>(problem, [&](const RowSegment<T>& row_run, void* candidate_storage,
                                              FusedTopkShared& shared) {
    return block_vector_maxima_candidates(row_run, static_cast<unsigned>(problem.k), problem.k_exp, staged,
                                          candidate_storage, shared);
  });
}

/// 1 < K <= kMaxSpanTopK on rows that take spans (takes_spans): a row's (m, d) and each
/// thread's span maxima in one read, then its top-K from the spans holding it (block_span_topk.cuh),
/// where the fused core pays a prefix, a seed select and a candidate select around its stream.
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_span_kernel(TopkProblem problem, bool staged) {
  __shared__ SpanTopkShared<kFusedThreads> shared;
  __shared__ TopkKey span_top_k[kMaxSpanTopK];
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const RowSegment<T> row_run(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const SpanFold fold = block_span_fold<kFusedThreads>(row_run, problem.k_exp, staged, shared);
  const TopkKey* sorted = span_top_k;
  if (status_of(fold.total) != RowStatus::has_nan &&  // block-uniform
      !block_span_top_k<kFusedThreads>(k, row_run, fold, span_top_k, shared))  // ties, a flat row
    sorted = select_exactly<T>(k, RowKeys<kFusedThreads, T>{row_run}, shared.storage);
  const RowOutput<kFusedThreads> write(problem, row, fold.total);
  if (write.wrote_nan_row()) return;
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads) write(j, sorted[j]);
}

/// K = 1: the row's (m, d) and largest key in one read (block_argmax.cuh), no candidate list.
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_fused_argmax_kernel(TopkProblem problem, bool staged) {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector stage[];
  __shared__ BlockArgmaxScratch<kFusedThreads> scratch;
  start_block_argmax(scratch);
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const RowSegment<T> row_run(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const RunArgmax found = block_argmax<kFusedThreads>(row_run, problem.k_exp, staged, stage, scratch);
  if (threadIdx.x == 0) write_argmax_row(problem, row, found.state, found.best);
}

/// Whether the rows take slotted seeds (topk_fused_slotted_kernel) rather than the fused core:
/// K > 64 (smaller K on such rows takes the warp per row, spans, or K = 1's kernel) on rows of at
/// most four vectors a thread. Measured against the fused core (H100, one run of two rounds each,
/// llm logits):
/// - K = 256, rows 8-8192 of 2000 and 4000 tokens: fp32 1.13-1.35x (2048 x 4000 79.6 -> 64.9 us),
///   bf16 1.42-1.62x (2048 x 4000 102.6 -> 64.0), where the fused core folds a prefix of 4K
///   tokens (a quarter to half of these rows) and lists the rest by vectors in phase B;
/// - K = 1024: rows of 16 KB 1.13-1.22x (2048 x 4000 f32 103.5 -> 86.0 us; bf16 rows of 8000
///   1.03-1.05x), of 32 KB 0.98-1.05x (0.98-0.99x at 256 rows, 1.01-1.03x at 2048-8192), longer
///   ones 0.84-0.98x (256 x 32000 f32 27.4 -> 28.1 us, bf16 22.1 -> 26.2): the seed keys cost
///   phase A ~4 instructions an element, and a thread whose four seeds pass re-reads its stride,
///   as long as phase B would be there;
/// - K = 256 on rows of 32 KB: fp32 (8000 tokens) 1.05-1.15x (8192 x 8000 349.9 -> 303.6 us),
///   16-bit (16000) 1.25-1.26x (8192 x 16000 bf16 460.1 -> 364.9);
/// - fp16 as bf16: K = 256 on rows of 2000-4000 tokens 1.45-1.63x (8192 x 4000 387.7 -> 242.1 us),
///   of 8000 1.26-1.34x; K = 1024 1.13-1.19x, on rows of 8000 0.98-1.01x. Its kernel spills 24
///   bytes (seeds, around the radix select). With the limit at 16 KB, streaming in rounds of two
///   vectors instead of the stream's loops spilled nothing and read 0.95-1.03x against it, but
///   cost fp32 and bf16 3-9% at K = 256 on rows of two vectors a thread (2048 x 4000 f32 64.9 ->
///   67.1 us), so all three keep the stream's loops.
template <typename T>
bool rows_take_slotted_seeds(int64_t vocab, int32_t k) {
  return k > 64 && vocab * int64_t{sizeof(T)} <= kSlottedSeedsMaxRowBytes;
}

/// Whether the rows take vector maxima (topk_fused_vector_maxima_kernel) rather than the fused
/// core: K > 64 on rows longer than slotted seeds take (so of at least 2048 vectors, 2K at K =
/// 1024) and of at most kVectorMaximaMaxVectors vectors. Measured against the fused core (H100,
/// one run of two rounds, llm logits, 8-8192 rows of 16000-50257 tokens): K = 256 fp32 1.09-1.32x
/// (256 x 32000 23.05 -> 21.22 us, 8192 x 16000 422.0 -> 318.9), 16-bit 1.16-1.85x (1024 x 32000
/// bf16 69.5 -> 53.8); K = 1024 fp32 1.02-1.16x (256 x 32000 27.50 -> 25.37), 16-bit 1.01-1.20x.
/// At K = 1024 the stream's ~1.5 us of maxima, and the re-read and sort of ~1,400 vectors'
/// candidates (~10 us at 256 rows), leave little of phase B's re-read saved. Since the re-read
/// vectors are dealt evenly to the threads (one round of loads, not a thread's own up to three):
/// 256 x 32000 fp32 K=1024 25.31 -> 24.04 us, 16-bit K = 256 and 1024 1.03-1.10x.
template <typename T>
bool rows_take_vector_maxima(int64_t vocab, int32_t k) {
  return k > 64 && vocab * int64_t{sizeof(T)} > kSlottedSeedsMaxRowBytes &&
         vocab <= kVectorMaximaMaxVectors * kVectorWidth<T>;
}

}  // namespace

bool topk_fused_reads_row_once(int64_t vocab, DType dtype, int32_t k) {
  if (k == 1 || takes_spans(vocab, k) || topk_sorted_row_fits(vocab, k)) return true;
  bool one_read = false;
  with_input_type(dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    one_read = rows_take_slotted_seeds<T>(vocab, k) || rows_take_vector_maxima<T>(vocab, k);
  });
  return one_read;
}

void launch_topk_fused(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                       bool warp_rows, SplitSizing sizing) {
  if (warp_rows && topk_warp_row_fits(problem.vocab, problem.dtype, problem.k)) {
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
    if (takes_spans(problem.vocab, problem.k)) {
      launch_with_stream_stage_after(kSpanKeyBytes<kFusedThreads>, topk_fused_span_kernel<T>,
                                     dim3(static_cast<unsigned>(problem.rows)), block_launch, device, problem);
      return;
    }
    if (rows_take_slotted_seeds<T>(problem.vocab, problem.k)) {
      launch_with_dynamic_shared(kCandidateBytes, topk_fused_slotted_kernel<T>,
                                 dim3(static_cast<unsigned>(problem.rows)), block_launch, problem);
      return;
    }
    if (rows_take_vector_maxima<T>(problem.vocab, problem.k)) {
      launch_with_stream_stage_after(kCandidateBytes, topk_fused_vector_maxima_kernel<T>,
                                     dim3(static_cast<unsigned>(problem.rows)), block_launch, device, problem);
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
