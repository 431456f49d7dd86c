// Fused softmax + top-k, a block per row. One read of the row computes the softmax state and
// fills per-thread register top-L buffers; a block radix select over the buffered keys picks
// the K winners, which are sorted in shared memory and written with exp(x - m) / d.
//
// Exactness: a buffer of L < K entries can drop a winner (K winners in one thread's stride).
// Every thread remembers the largest key it dropped; if any beats the K-th winner, the block
// redoes the row exactly by radix-selecting over the row itself (re-read, mostly from L2).
// Fast on real data, exact on every input, and never a second launch.
#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_buffer.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

constexpr int kThreads = 512;

template <typename T, int L>
__global__ void __launch_bounds__(kThreads, L <= 8 ? 2 : 1) topk_fused_kernel(TopkProblem problem) {
  __shared__ SoftmaxState scratch[kThreads / 32];
  __shared__ BlockTopkStorage storage;

  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);

  SoftmaxState state = empty_state();
  TopkBuffer<L> buffer;
  for_each_element<kStreamUnroll>(segment, threadIdx.x, kThreads, [&](const auto& x, int64_t offset) {
    accumulate(state, x, problem.k_exp);
#pragma unroll
    for (int i = 0; i < static_cast<int>(std::extent_v<std::remove_reference_t<decltype(x)>>); ++i)
      buffer.push(make_key(x[i], offset + i));
  });
  const Normalizer normalizer(block_reduce<kThreads / 32>(state, problem.k_exp, scratch), problem.k_exp);
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  if (normalizer.status == RowStatus::has_nan) {  // block-uniform: every thread has the same state
    write_nan_row<kThreads>(k, probs, indices);
    return;
  }

  const auto buffered_keys = [&](auto&& visit) {
#pragma unroll
    for (int i = 0; i < L; ++i)
      if (buffer.keys[i] != kEmptyKey) visit(buffer.keys[i]);
  };
  block_topk_sorted<kThreads>(k, buffered_keys, storage);

  if (__syncthreads_or(buffer.max_dropped > storage.sorted[k - 1])) {
    block_topk_sorted<kThreads>(k, RowKeys<kThreads, T>{segment}, storage);
  }
  for (unsigned j = threadIdx.x; j < k; j += kThreads)
    write_topk_entry(storage.sorted[j], normalizer, problem.log_probs, probs + j, indices + j);
}

template <typename T, int L>
void launch_buffer(const TopkProblem& problem, cudaStream_t stream) {
  topk_fused_kernel<T, L><<<static_cast<unsigned>(problem.rows), kThreads, 0, stream>>>(problem);
  SOFTK_CHECK_LAUNCH();
}

}  // namespace

void launch_topk_fused(const TopkProblem& problem, cudaStream_t stream) {
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    // Buffer length by K: with L >= K a buffer can never drop a winner, so the guard never
    // fires; for larger K, L is sized so that random rows (winners spread over the threads,
    // and W consecutive elements per thread for sorted rows) almost never need the redo.
    if (problem.k <= 1) launch_buffer<T, 1>(problem, stream);
    else if (problem.k <= 2) launch_buffer<T, 2>(problem, stream);
    else if (problem.k <= 4) launch_buffer<T, 4>(problem, stream);
    else if (problem.k <= 256) launch_buffer<T, 8>(problem, stream);
    else launch_buffer<T, 16>(problem, stream);
  });
}

}  // namespace softk::kernels
