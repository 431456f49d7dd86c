// The fused block-level top-k core: one block finds the exact top-K keys of a contiguous run
// of a row (a whole row for the fused kernel, a chunk for split-k) and its softmax state, in
// one read of the run from DRAM.
//
//  Phase A  streams a prefix of the run: folds it into the softmax state and keeps each
//           thread's top-LA logits in registers (branch-free). A block radix select over those
//           gives tau, the K-th largest logit of a subset of the run, so tau <= the run's K-th
//           logit: every winner is >= tau.
//  Phase B  re-reads the prefix (from L2) and streams the rest, folding the rest into the
//           state and appending the key of every logit >= tau to a shared-memory candidate
//           list. A group of elements whose maximum is below tau costs one compare.
//  Select   the K largest candidates are the run's top-K, sorted in shared memory.
//
// Exactness: the list holds every key >= tau unless it overflowed; the block then redoes the
// run exactly by radix-selecting over the run itself (re-read, mostly from L2). So the answer
// is exact on every input (ties, constant rows, all winners in one thread's stride).
#pragma once

#include <algorithm>

#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/kernel_launch.hpp"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_buffer.cuh"

namespace softk::kernels {

constexpr int kFusedThreads = 512;
/// Candidate list capacity (64 KB of dynamic shared memory, two blocks per SM). The prefix is
/// sized so that the expected list, about K / prefix fraction keys, stays near half of it.
constexpr unsigned kCandidateCapacity = 8192;
constexpr std::size_t kCandidateBytes = kCandidateCapacity * sizeof(TopkKey);

/// Elements in phase A: a fraction K / 4096 of the run (between 1/32 and 1/4), at least 4K
/// elements, a multiple of 16 so that phase B's vectors keep the run's 16-byte phase.
__host__ __device__ __forceinline__ int64_t prefix_length(int64_t length, int32_t k) {
  const int64_t by_fraction = length * std::min<int64_t>(std::max<int64_t>(k, 128), 1024) / 4096;
  const int64_t wanted = std::max<int64_t>(by_fraction, int64_t{4} * k);
  return std::min<int64_t>(length, (wanted + 15) / 16 * 16);
}

/// Seeds per thread for a given K: the K-th largest of the 512 x LA seeds must exist
/// (512 LA >= K) and sit close to the prefix's own K-th logit, so that tau filters tightly: LA
/// well above the K / 512 winners a thread holds on average. Each slot costs two fmaxf/fminf
/// per element of the prefix.
template <typename F>
void with_seed_count(int32_t k, F&& f) {
  if (k <= 64) f(std::integral_constant<int, 1>{});
  else if (k <= 256) f(std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, 4>{});
}

/// Launches `kernel` (a kernel running block_fused_topk) with its candidate list in dynamic
/// shared memory. Static + dynamic shared memory passes the 48 KB default, so the kernel opts in
/// first (a per-device attribute, hence on every launch).
template <typename... Params, typename... Args>
void launch_with_candidate_list(void (*kernel)(Params...), dim3 grid, const LaunchContext& launch, const Args&... args) {
  SOFTK_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kCandidateBytes)));
  KernelLaunch(grid, kFusedThreads, kCandidateBytes, launch.stream).programmatic(launch.programmatic)(kernel, args...);
}

struct FusedTopkShared {
  SoftmaxState scratch[kFusedThreads / 32];
  BlockTopkStorage storage;
  unsigned candidate_count;
};

struct FusedTopkResult {
  SoftmaxState state;     ///< the run's (m, d), the same in every thread
  const TopkKey* sorted;  ///< its k largest keys, descending, in shared memory; null for a NaN run
};

/// Called by all kFusedThreads threads. The run is data[0, length), whose element 0 is token
/// first_index of the row; k <= min(length, kMaxFastTopK). candidate_keys: kCandidateCapacity
/// keys of shared memory.
template <typename T, int LA>
__device__ FusedTopkResult block_fused_topk(const T* data, int64_t first_index, int64_t length, unsigned k,
                                            float k_exp, TopkKey* candidate_keys, FusedTopkShared& shared) {
  constexpr int kThreads = kFusedThreads;
  const int64_t split = prefix_length(length, static_cast<int32_t>(k));
  const RowSegment<T> prefix(data, first_index, split);
  const RowSegment<T> rest(data + split, first_index + split, length - split);

  // Phase A.
  SoftmaxState state = empty_state();
  SeedBuffer<LA> seeds;
  for_each_element<kStreamUnroll>(prefix, threadIdx.x, kThreads, [&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    accumulate(state, group, k_exp);
#pragma unroll
    for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
      for (int i = 0; i < Group::kWidth; ++i) seeds.push(group.x[n][i]);
  });
  if (threadIdx.x == 0) shared.candidate_count = 0;
  // Seeds carry no index: key them with the lowest index part. The select stops after the top
  // 16 bits of the value (kLowestShift 48: two passes at most, of ~1,300 cycles each, instead of
  // four): tau is then the floor of the 16-bit bin holding the K-th largest seed, still a lower
  // bound, at most 2^-7 below it (bf16 logits lose nothing). Only a row whose top logits all
  // share one such bin lists more candidates (and may take the exact redo).
  const auto seed_keys = [&](auto&& visit) {
#pragma unroll
    for (int i = 0; i < LA; ++i) visit(make_key(seeds.values[i], 0xFFFFFFFFu));
  };
  const TopkKey tau = block_radix_select<kThreads, 48>(k, seed_keys, shared.storage.select);
  const float threshold = key_threshold(tau);  // -inf for kEmptyKey or the bin of -inf

  // Phase B. (block_radix_select ended on a barrier, so candidate_count = 0 is visible.)
  const CandidateList list{candidate_keys, &shared.candidate_count, kCandidateCapacity, threshold};
  for_each_element<kStreamUnroll>(prefix, threadIdx.x, kThreads,
                                  [&](const auto& group) { list.offer(group, prefix.first_index); });
  for_each_element<kStreamUnroll>(rest, threadIdx.x, kThreads, [&](const auto& group) {
    accumulate(state, group, k_exp);
    list.offer(group, rest.first_index);
  });
  // block_reduce starts with a barrier: after it every append is visible.
  const SoftmaxState total = block_reduce<kThreads / 32>(state, k_exp, shared.scratch);
  if (status_of(total) == RowStatus::has_nan) return {total, nullptr};  // block-uniform

  const unsigned listed = shared.candidate_count;
  const TopkKey* sorted =
      listed <= kCandidateCapacity
          ? block_topk_sorted<kThreads>(k, [&](auto&& visit) { list.for_each<kThreads>(listed, visit); },
                                        shared.storage)
          : block_topk_sorted<kThreads>(k, RowKeys<kThreads, T>{RowSegment<T>(data, first_index, length)},
                                        shared.storage);
  return {total, sorted};
}

}  // namespace softk::kernels
