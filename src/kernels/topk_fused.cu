// Fused softmax + top-k, a block per row, one read of the row from DRAM.
//
//  Phase A  streams a prefix of the row: folds it into the softmax state and keeps each
//           thread's top-LA logits in registers (branch-free). A block radix select over those
//           gives tau, the K-th largest logit of a subset of the row, so tau <= the row's K-th
//           logit: every winner is >= tau.
//  Phase B  re-reads the prefix (from L2) and streams the rest, folding the rest into the
//           state and appending the key of every logit >= tau to a shared-memory candidate
//           list. A group of elements whose maximum is below tau costs one compare.
//  Select   the K largest candidates are the row's top-K, sorted in shared memory and written
//           with exp(x - m) / d.
//
// Exactness: the list holds every key >= tau unless it overflowed; the block then redoes the
// row exactly by radix-selecting over the row itself. So the answer is exact on every input
// (ties, constant rows, all winners in one thread's stride), with no second launch.
#include <algorithm>

#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_buffer.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

constexpr int kThreads = 512;
/// Candidate list capacity (64 KB of dynamic shared memory, two blocks per SM). The prefix is
/// sized so that the expected list, about K / prefix fraction keys, stays near half of it.
constexpr unsigned kCandidateCapacity = 8192;
constexpr std::size_t kCandidateBytes = kCandidateCapacity * sizeof(TopkKey);

/// Elements in phase A: a fraction K / 4096 of the row (between 1/32 and 1/4), at least 4K
/// elements, a multiple of 16 so that phase B's vectors keep the row's 16-byte phase.
__host__ __device__ __forceinline__ int64_t prefix_length(int64_t vocab, int32_t k) {
  const int64_t by_fraction = vocab * std::min<int64_t>(std::max<int64_t>(k, 128), 1024) / 4096;
  const int64_t wanted = std::max<int64_t>(by_fraction, int64_t{4} * k);
  return std::min<int64_t>(vocab, (wanted + 15) / 16 * 16);
}

template <typename T, int LA>
__global__ void __launch_bounds__(kThreads, 2) topk_fused_kernel(TopkProblem problem) {
  extern __shared__ TopkKey candidate_keys[];
  __shared__ SoftmaxState scratch[kThreads / 32];
  __shared__ BlockTopkStorage storage;
  __shared__ unsigned candidate_count;

  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const T* data = row_pointer<T>(problem.logits, row, problem.row_stride);
  const int64_t split = prefix_length(problem.vocab, problem.k);
  const RowSegment<T> prefix(data, 0, split);
  const RowSegment<T> rest(data + split, split, problem.vocab - split);

  // Phase A.
  SoftmaxState state = empty_state();
  SeedBuffer<LA> seeds;
  for_each_element<kStreamUnroll>(prefix, threadIdx.x, kThreads, [&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    accumulate(state, group, problem.k_exp);
#pragma unroll
    for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
      for (int i = 0; i < Group::kWidth; ++i) seeds.push(group.x[n][i]);
  });
  if (threadIdx.x == 0) candidate_count = 0;
  // Seeds carry no index: key them with the lowest index part, so the selected key's value is
  // the K-th largest seed value (repeats count) and every logit equal to it passes.
  const auto seed_keys = [&](auto&& visit) {
#pragma unroll
    for (int i = 0; i < LA; ++i) visit(make_key(seeds.values[i], 0xFFFFFFFFu));
  };
  const TopkKey tau = block_radix_select<kThreads, 32>(k, seed_keys, storage.select);

  // Phase B. (block_radix_select ended on a barrier, so candidate_count = 0 is visible.)
  const CandidateList list{candidate_keys, &candidate_count, kCandidateCapacity,
                           tau == kEmptyKey ? -CUDART_INF_F : key_value(tau)};
  for_each_element<kStreamUnroll>(prefix, threadIdx.x, kThreads, [&](const auto& group) { list.offer(group, 0); });
  for_each_element<kStreamUnroll>(rest, threadIdx.x, kThreads, [&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    list.offer(group, rest.first_index);
  });
  // block_reduce starts with a barrier: after it every append is visible.
  const Normalizer normalizer(block_reduce<kThreads / 32>(state, problem.k_exp, scratch), problem.k_exp);
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  if (normalizer.status == RowStatus::has_nan) {  // block-uniform: every thread has the same state
    write_nan_row<kThreads>(k, probs, indices);
    return;
  }
  const unsigned listed = candidate_count;
  const TopkKey* sorted =
      listed <= kCandidateCapacity
          ? block_topk_sorted<kThreads>(k, [&](auto&& visit) { list.for_each<kThreads>(listed, visit); }, storage)
          : block_topk_sorted<kThreads>(k, RowKeys<kThreads, T>{RowSegment<T>(data, 0, problem.vocab)}, storage);
  for (unsigned j = threadIdx.x; j < k; j += kThreads)
    write_topk_entry(sorted[j], normalizer, problem.log_probs, probs + j, indices + j);
}

template <typename T, int LA>
void launch_seeds(const TopkProblem& problem, cudaStream_t stream) {
  auto* kernel = topk_fused_kernel<T, LA>;
  // Static + dynamic shared memory passes the 48 KB default: opt in (per device, so per call).
  SOFTK_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kCandidateBytes)));
  kernel<<<static_cast<unsigned>(problem.rows), kThreads, kCandidateBytes, stream>>>(problem);
  SOFTK_CHECK_LAUNCH();
}

}  // namespace

void launch_topk_fused(const TopkProblem& problem, cudaStream_t stream) {
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    // Seeds per thread: the K-th largest of the 512 x LA seeds must exist (512 LA >= K) and
    // sit close to the prefix's own K-th logit, so that tau filters tightly: LA well above
    // the K / 512 winners a thread holds on average. Each slot costs two fmaxf/fminf per
    // element of the prefix.
    if (problem.k <= 64) launch_seeds<T, 1>(problem, stream);
    else if (problem.k <= 256) launch_seeds<T, 2>(problem, stream);
    else launch_seeds<T, 4>(problem, stream);
  });
}

}  // namespace softk::kernels
