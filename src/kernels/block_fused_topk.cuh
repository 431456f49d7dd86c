// The fused block-level top-k core: one block reads a contiguous run of a row (a whole row for
// the fused kernel, a chunk for split-k) once from DRAM and leaves its softmax state and a short
// list of keys that holds its exact top-K.
//
//  Phase A  streams a prefix of the run: folds it into the softmax state and keeps each
//           thread's top-LA logits in registers (branch-free; for 16-bit runs at K > 256, the
//           top-LA maxima of its 16-byte vectors). A block radix select over those
//           gives tau, the K-th largest logit of a subset of the run, so tau <= the run's K-th
//           logit: every winner is >= tau.
//  Phase B  re-reads the prefix (from L2) and streams the rest, folding the rest into the
//           state and listing every logit >= tau in shared memory: the 16-byte vectors that
//           hold one (candidate_vectors.cuh), or the keys themselves (candidate_list.cuh) for
//           fp32 runs at K > 256 that are split-k chunks or whose prefixes would not stay in
//           L2. A group of elements whose maximum is below tau costs one compare.
// The caller selects from the list: the fused kernel the sorted top-K (a counting sort over bins
// of the candidates' range, block_range_bin_sort.cuh, else a radix select and a sort), a split-k
// chunk its top-K for the merge (the same counting sort, else a radix select: in no order).
//
// Exactness: the list holds every key >= tau unless it overflowed; the caller then selects from
// the run itself (re-read, mostly from L2) instead. So the answer is exact on every input (ties,
// constant rows, all winners in one thread's stride).
#pragma once

#include <algorithm>
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_range_bin_sort.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/candidate_vectors.cuh"
#include "kernels/kernel_launch.hpp"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/staged_stream.cuh"
#include "kernels/topk_buffer.cuh"
#include "kernels/topk_launch.hpp"

namespace softk::kernels {

constexpr int kFusedThreads = 512;
/// Blocks of the fused core an SM (its kernels' launch bounds).
constexpr int kFusedBlocksPerSm = 2;
/// The candidate list's dynamic shared memory: 64 KB, 3,276 vectors or 8,192 keys. Two blocks
/// fit an SM with room to spare for L1, which holds the streaming loads in flight (a 96 KB list
/// measured 9% slower on a 64M-token row: H200, f32).
constexpr std::size_t kCandidateBytes = 64 * 1024;
/// Past the list, where the staged loops stream (staged_stream.cuh: phase B's rest, and at K > 256
/// both passes over the prefix): 32 KB, so two blocks still fit an SM (2 x (96 KB + ~11 KB
/// static) of its 228 KB).
constexpr std::size_t kStreamStageBytes = kStagedStreamBytes<kStreamUnroll, kFusedThreads>;
/// Whether a launch of `blocks` blocks of kFusedThreads streams staged: at most one block an SM,
/// where a block's warps alone cannot hide their compute between rounds of loads (the fused
/// core's rest, with_fused_core_shape; the K = 1 argmax, block_argmax.cuh).
inline bool streams_staged(int64_t blocks, const DeviceInfo& device) { return blocks <= device.sm_count; }

/// Elements in phase A, a multiple of 16 so that phase B's vectors keep the run's 16-byte phase and
/// at least 4 x K. Phase B lists about K / (prefix fraction) elements, since tau is about the
/// prefix's K-th logit: the fraction keeps that under half of the list (3,276 vectors or 8,192
/// keys). Vectors: K / 1536 of the run (1/32 to 2/3); keys: K / 4096 (1/32 to 1/4). The prefix is
/// also at least 1/prefix_divisor of the run where that is nonzero: kLongPrefixDivisor for a long
/// prefix, 1 for the whole run (with_fused_core_shape says where).
constexpr int32_t kLongPrefixDivisor = 8;
__host__ __device__ __forceinline__ int64_t prefix_length(int64_t length, int32_t k, bool lists_vectors,
                                                          int32_t prefix_divisor) {
  const int64_t per = lists_vectors ? 1536 : 4096;
  const int64_t by_fraction = length * std::min<int64_t>(std::max<int64_t>(k, per / 32), 1024) / per;
  const int64_t at_least = std::max<int64_t>(int64_t{4} * k, prefix_divisor != 0 ? length / prefix_divisor : 0);
  const int64_t wanted = std::max<int64_t>(by_fraction, at_least);
  return std::min<int64_t>(length, (wanted + 15) / 16 * 16);
}

/// Seeds per thread for a given K: the K-th largest of the 512 x LA seeds must exist
/// (512 LA >= K) and sit close to the prefix's own K-th logit, so that tau filters tightly: LA
/// well above the K / 512 winners a thread holds on average. Each slot costs two fmaxf/fminf
/// per seed pushed: one a prefix element, or one a 16-byte vector where the seeds are the
/// vectors' maxima (with_fused_core_shape says where); a single slot takes each group's max.
template <typename F>
void with_seed_count(int32_t k, F&& f) {
  if (k <= 64) f(std::integral_constant<int, 1>{});
  else if (k <= 256) f(std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, 4>{});
}

/// What a fused core's runs are: whole rows (the fused kernel) or chunks of rows (split-k).
enum class FusedRuns { rows, chunks };

/// The runtime half of a fused core's shape (with_fused_core_shape), the same for every block of
/// a launch.
struct FusedCoreShape {
  int32_t prefix_divisor;  ///< the prefix's floor (prefix_length)
  bool staged_prefix;      ///< phases A and B stream the prefix staged (staged_stream.cuh); K > 256 only
  bool staged_rest;        ///< phase B streams the rest staged; true where staged_prefix is

  /// The dynamic shared memory of a block: the candidate list, and the stage where used.
  std::size_t dynamic_bytes() const { return kCandidateBytes + (staged_rest ? kStreamStageBytes : 0); }
};

/// Calls f(seeds, lists_vectors, seeds_from_vectors, shape): three integral constants, the seed
/// count for k (with_seed_count), which list the core keeps and whether its seeds are vector
/// maxima, and the FusedCoreShape, for a launch of `runs` runs (kKind) of run_length elements.
/// The list and the prefix depend on the runs resident at once: under per_batch sizing those of
/// this launch, at most a wave; under per_row a full wave, so that a row's bits never depend on
/// its batch (both decide the prefix, and so the order in which (m, d) is summed).
///
/// Vectors make phase B cheaper (bf16: 1.1-1.3x at K = 50 and 1024; fp32 at K = 1024, where a trace
/// had phase B's slowest thread listing keys end ~8 us after its first) but hold fewer entries, so
/// the prefix must be longer at large K: 2/3 of the run at K = 1024, against 1/4 for keys. Phase B
/// re-reads the prefix from L2 while the resident runs' prefixes fit it together, and from DRAM
/// past that. So fp32 runs at K > 256 list vectors only where those prefixes fit L2. Measured
/// (fp32, K = 1024, H200 with 60 MB of L2, one run): with 22-45 MB of resident prefixes, vectors
/// were 1.02-1.35x faster (8-1024 rows of 32000, 8-128 of 128256, 8-64 of 256000, 8-16 of 1M); with
/// 87-180 MB, 0.79-1.02x (128-1024 rows of 256000 and 1M, 64 of 1M); with 90 MB (256-1024 rows of
/// 128256), 1.01-1.03x. 16-bit runs list vectors everywhere: listing keys measured 0.68-0.96x.
/// Split-k's fp32 chunks list keys at K > 256 wherever: once the key list walked a lane's passing
/// elements bit by bit (candidate_list.cuh), keys ran 1.04-1.12x against vectors where chunks
/// listed vectors (1-16 rows of 1M-16M under auto), 1.00 elsewhere; rows stay as they were: rows
/// of 50257 lost with keys (0.94-0.96x), and rows of 32000 read whole gained nothing (H200).
///
/// A long prefix (at least 1/8 of the run, against 1/32 at K <= 48) puts tau closer to the run's
/// K-th logit, so phase B lists fewer candidates and the select after it is shorter: a trace of
/// 256 x 32000 f32 at K = 50 (1/4 prefix) had the listing-to-sort steps at 2.9 us against 4.7
/// (H200). It pays where the resident runs' prefixes fit L2, from which phase B re-reads them (4-8
/// rows of 64M bf16, 67-135 MB of prefixes, ran 0.94-0.98x). Measured (H200, one run each,
/// against 1/32): bf16 at K = 50 1.22-1.25x on 64-1024 rows of 32000, 1.12-1.17x of 256000,
/// 0.98-1.06x of 128256, split-k chunks 1.05-1.22x; bf16 at K = 1 0.92-1.10x, when K = 1 still
/// ran this core (it takes block_argmax.cuh since 23b3128, so the rule names no K). fp32 gained
/// once a thread's last prefix vectors were fetched two at a time (block_fused_candidates;
/// before that rows of 128256 lost, 0.94-0.97x, their prefix tails waiting a round trip a
/// vector): at 1/16, K = 50, 1.03-1.12x; 1/8 against 1/16 0.99-1.15x (1 x 4M 1.15x, 64 x 128256
/// 1.07x, 256 x 256000 0.99x). 1/4 for bf16 was mixed (0.95-1.10x: rows of 128256 lost).
///
/// At K > 256 a row of at most kWholePrefixMaxLength tokens is read whole in phase A, where the
/// resident rows fit L2 together. Against 2/3 (K = 1024, fp32 and bf16, H200, one run each):
/// rows of 32000 ran 1.03-1.14x (8-1024 rows), rows of 50257 0.85-0.97x, of 128256 and 256000
/// 0.87-0.98x (bf16); split-k's chunks lost too (64 rows of 128256 and 256000 under auto, fp32:
/// 0.95x), so they keep 2/3.
///
/// Phase B's rest is staged where a launch has at most one block an SM: a block's 16 warps alone
/// cannot hide their compute between rounds of loads, and the staged stream keeps the next round
/// in flight through it. Measured (H200, one run, all launches staged): 64 rows of 128256-256000
/// 1.03-1.15x, split-k launches of 32-128 chunk blocks at K = 1024 1.07-1.16x (1 x 64M f32 232 ->
/// 200 us); where two blocks share an SM, 0.96-1.01x at K <= 256 (256 rows, 16-32 rows of 1M-4M,
/// 4 x 64M): their warps already overlap one another's loads, and the stage costs the SM's L1
/// 32 KB a block. At K > 256 a run longer than kStagedPrefixMinLength stages the rest in every
/// launch, and the prefix's two loops too: four seeds a thread make phase A's visits long, and
/// the prefix is long (1/4 to 2/3 of the run). Against the rest alone staged where one block has
/// an SM (H200, two runs): K = 1024 on 256-1024 rows of 128256 and 256000 1.01-1.08x, 64 rows of
/// 256000 1.05-1.16x, split-k 1.01-1.08x (1 x 64M f32 200 -> 185 us); but rows of 50257 0.90-0.98x
/// and of 32000 0.98-1.00x, hence the floor; the prefix staged at K <= 256 read 0.95-1.01x.
/// (Staging changes no result: the groups and their order are the same.)
///
/// Seeds from vectors: at K > 256 a 16-bit run's phase A pushes the maximum of each 8-element
/// vector instead of each element, a quarter of the work an element where four seeds a thread
/// made phase A issue-bound. Any subset of the prefix gives a lower bound; this one is looser only
/// where winners share a vector, so it needs far more vectors than K: the prefix must hold 2K of
/// them (kVectorsPerSeededWinner), which every split-k chunk at K > 256 does (> 32768 tokens, a
/// prefix of K / 1536 of it or more), and so do rows of 16,384 tokens or more at K = 1024.
/// Measured against element seeds (bf16, K = 1024, H200, three runs): 1.03-1.11x on 64-256 rows of
/// 32000-128256 (256 x 128256 43.6 -> 39.8 us, 256 x 32000 21.8 -> 20.5), 64 x 256000 1.13-1.16x,
/// 256 x 256000 1.00, split-k on 1-16 rows of 1M-4M 1.03-1.06x; rows the floor leaves to element
/// seeds (2048 of 4000 and 16000) 1.00. Without the floor, rows of 4000 (500 vectors) ran 0.57x;
/// with the choice made inside one kernel instead of by kernel, the 16-bit four-seed kernels
/// spilled (100 bytes) and lost 0.90-0.94x. At K = 256 (two seeds) vector seeds read 0.96-1.01x,
/// and fp32 at K = 1024 0.99-1.01x at 256 rows (its phase A waits on DRAM, not on issue): both keep
/// element seeds.
constexpr int64_t kWholePrefixMaxLength = 32768;
constexpr int64_t kStagedPrefixMinLength = 65536;
constexpr int64_t kVectorsPerSeededWinner = 2;
template <FusedRuns kKind, typename T, typename F>
void with_fused_core_shape(int32_t k, int64_t run_length, int64_t runs, SplitSizing sizing, const DeviceInfo& device,
                           F&& f) {
  const int64_t wave = int64_t{kFusedBlocksPerSm} * device.sm_count;
  const int64_t resident_runs = sizing == SplitSizing::per_batch ? std::min(runs, wave) : wave;
  const auto fits_l2 = [&](int64_t elements_a_run) {
    return resident_runs * elements_a_run * int64_t{sizeof(T)} <= device.l2_bytes;
  };
  int32_t prefix_divisor = fits_l2(run_length / kLongPrefixDivisor) ? kLongPrefixDivisor : 0;
  if (kKind == FusedRuns::rows && k > 256 && run_length <= kWholePrefixMaxLength && fits_l2(run_length))
    prefix_divisor = 1;
  const bool staged_prefix = k > 256 && run_length > kStagedPrefixMinLength;
  const FusedCoreShape shape{prefix_divisor, staged_prefix, staged_prefix || streams_staged(runs, device)};
  const int64_t vector_prefix = prefix_length(run_length, k, true, prefix_divisor);
  with_seed_count(k, [&](auto seeds) {
    using Keys = std::false_type;
    using Vectors = std::true_type;
    using FromElements = std::false_type;
    using FromVectors = std::true_type;
    constexpr bool kChunks = kKind == FusedRuns::chunks;
    constexpr int kSeeds = decltype(seeds)::value;
    if constexpr (kSeeds < 4) {
      f(seeds, Vectors{}, FromElements{}, shape);
    } else if constexpr (sizeof(T) == 4) {
      if (kChunks || !fits_l2(vector_prefix)) f(seeds, Keys{}, FromElements{}, shape);
      else if constexpr (!kChunks) f(seeds, Vectors{}, FromElements{}, shape);
    } else if constexpr (kChunks) {
      f(seeds, Vectors{}, FromVectors{}, shape);  // every chunk passes the floor (see above)
    } else if (vector_prefix / kVectorWidth<T> >= kVectorsPerSeededWinner * int64_t{k}) {
      f(seeds, Vectors{}, FromVectors{}, shape);
    } else {
      f(seeds, Vectors{}, FromElements{}, shape);
    }
  });
}

/// Launches `kernel` on args... in blocks of kFusedThreads with `bytes` of dynamic shared memory.
template <typename... Params, typename... Args>
void launch_with_dynamic_shared(std::size_t bytes, void (*kernel)(Params...), dim3 grid, const LaunchContext& launch,
                                const Args&... args) {
  if (bytes > 0) allow_most_dynamic_shared(kernel);
  KernelLaunch(grid, kFusedThreads, bytes, launch.stream).programmatic(launch.programmatic)(kernel, args...);
}

/// Launches `kernel` (a kernel running block_fused_candidates, its last parameter the
/// FusedCoreShape) on args..., shape, with its candidate list, and the stage where `shape` has
/// one, in dynamic shared memory.
template <typename... Params, typename... Args>
void launch_with_candidate_list(void (*kernel)(Params...), dim3 grid, const LaunchContext& launch,
                                const FusedCoreShape& shape, const Args&... args) {
  launch_with_dynamic_shared(shape.dynamic_bytes(), kernel, grid, launch, args..., shape);
}

/// Launches `kernel` (blocks of kFusedThreads streaming a run each, its last parameter whether
/// they stream staged: block_argmax) on args..., staged, with `leading_bytes` of dynamic shared
/// memory of its own (split-k's span maxima: block_span_topk.cuh) and after them, where the grid
/// streams staged (streams_staged), the stage.
template <typename... Params, typename... Args>
void launch_with_stream_stage_after(std::size_t leading_bytes, void (*kernel)(Params...), dim3 grid,
                                    const LaunchContext& launch, const DeviceInfo& device, const Args&... args) {
  const bool staged = streams_staged(int64_t{grid.x} * grid.y, device);
  launch_with_dynamic_shared(leading_bytes + (staged ? kStreamStageBytes : 0), kernel, grid, launch, args..., staged);
}

/// launch_with_stream_stage_after with no dynamic shared memory but the stage (32 KB, within the
/// default limit).
template <typename... Params, typename... Args>
void launch_with_stream_stage(void (*kernel)(Params...), dim3 grid, const LaunchContext& launch,
                              const DeviceInfo& device, const Args&... args) {
  launch_with_stream_stage_after(0, kernel, grid, launch, device, args...);
}

struct FusedTopkShared {
  SoftmaxState scratch[kFusedThreads / 32];
  BlockTopkStorage storage;
  unsigned candidate_count;
  unsigned key_count;
};

/// The listed keys as a key source (visits them across the block).
struct CandidateKeys {
  const TopkKey* keys;
  unsigned count;

  template <typename Visit>
  __device__ __forceinline__ void operator()(Visit&& visit) const {
    for (unsigned i = threadIdx.x; i < count; i += kFusedThreads) visit(keys[i]);
  }
};

/// What phases A and B leave: the run's (m, d), the same in every thread, and every key of the
/// run >= tau in shared memory (the run's top-K among them) unless the list overflowed.
struct FusedCandidates {
  SoftmaxState state;
  const TopkKey* keys;  ///< null when the list overflowed, and for a NaN run
  unsigned count;
  float listed_from;  ///< a floor under the run's K-th logit, at or below every listed one (tau as a value)

  /// Writes the run's top-k, sorted, through write(rank, key) by block_write_topk_by_range_bins
  /// over the listed keys, with the rest of candidate_storage as its room, and returns true; or
  /// returns false, having written nothing, for an overflowed list or where that hands back.
  /// Block-uniform. Called by all kFusedThreads threads.
  template <typename Write>
  __device__ __forceinline__ bool write_top_k_by_range_bins(unsigned k, void* candidate_storage, Write&& write) const {
    if (keys == nullptr) return false;
    const std::size_t used = (count * sizeof(TopkKey) + 15) / 16 * 16;
    const RangeBins bins(listed_from, state.max);
    return block_write_topk_by_range_bins<kFusedThreads>(k, CandidateKeys{keys, count}, bins,
                                                         static_cast<char*>(candidate_storage) + used,
                                                         kCandidateBytes - used, write);
  }

  /// Calls f(source) with a key source holding the run's top-K (an argument for
  /// block_topk_sorted and the like): the listed keys (CandidateKeys), or the run itself,
  /// re-read (mostly from L2) when the list overflowed. Called by all kFusedThreads threads.
  template <typename T, typename F>
  __device__ __forceinline__ auto with_key_source(const RowSegment<T>& run, F&& f) const {
    if (keys == nullptr) return f(RowKeys<kFusedThreads, T>{run});
    return f(CandidateKeys{keys, count});
  }
};

/// Phases A and B over the run data[0, length), whose element 0 is token first_index of the row;
/// k <= min(length, kMaxFastTopK). kListsVectors, kSeedsFromVectors, shape: which list phase B
/// keeps, whether phase A seeds from vector maxima (at LA = 4), how long the prefix is and
/// whether the rest is staged (with_fused_core_shape). Called by all kFusedThreads
/// threads. candidate_storage: shape.dynamic_bytes() of shared memory, 16-byte aligned: the list,
/// then the stage. kRuns: whole rows or split-k chunks (they fetch the rest's last vectors
/// differently). Starts with no barrier and ends on one.
template <FusedRuns kRuns, typename T, int LA, bool kListsVectors, bool kSeedsFromVectors>
__device__ FusedCandidates block_fused_candidates(const T* data, int64_t first_index, int64_t length, unsigned k,
                                                  float k_exp, const FusedCoreShape& shape, void* candidate_storage,
                                                  FusedTopkShared& shared) {
  constexpr int kThreads = kFusedThreads;
  const int64_t split = prefix_length(length, static_cast<int32_t>(k), kListsVectors, shape.prefix_divisor);
  const RowSegment<T> prefix(data, first_index, split);
  const RowSegment<T> rest(data + split, first_index + split, length - split);

  // Nothing hides the prefix passes' latency (every block of a one-wave batch selects its seeds
  // after the first, and the second re-reads from L2), so a thread's last prefix vectors go two
  // at a time: a 1/8 or 1/16 prefix of 128256 fp32 logits leaves three to most threads (256 x
  // 128256 f32 K = 50 at 1/16: 1.03x with both passes so, 0.96x with phase A alone; H200). Not in
  // the fp16 kernel seeding four a thread, which spills so.
  constexpr int kPrefixTailLoads = std::is_same_v<T, __half> && LA == 4 ? 1 : 2;
  // The prefix's two loops are staged only at K > 256 (four seeds a thread), so the kernels with
  // fewer seeds hold one form of them (with_fused_core_shape says where).
  RawVector* stage = static_cast<RawVector*>(candidate_storage) + kCandidateBytes / sizeof(RawVector);
  const auto stream_prefix = [&](auto&& visit) {
    if constexpr (LA == 4) {
      if (shape.staged_prefix) {  // block-uniform
        for_each_element_staged<kStreamUnroll, kPrefixTailLoads>(prefix, stage, threadIdx.x, kThreads, visit);
        return;
      }
    }
    for_each_element<kStreamUnroll, kPrefixTailLoads>(prefix, threadIdx.x, kThreads, visit);
  };

  // Phase A.
  SoftmaxState state = empty_state();
  SeedBuffer<LA> seeds;
  stream_prefix([&](const auto& group) {
    using Group = std::remove_reference_t<decltype(group)>;
    accumulate(state, group, k_exp);
    if constexpr (LA == 1) {
      // One slot keeps the largest element pushed: the group's max (taken as it was filled) is
      // the same seed for one instruction instead of one an element (bf16 K = 50 1.005-1.016x,
      // fp32 1.00; H200, two rounds).
      seeds.push(group.max);
    } else if constexpr (kSeedsFromVectors) {
#pragma unroll
      for (int n = 0; n < Group::kRuns; ++n) seeds.push(run_max(group, n));
    } else {
#pragma unroll
      for (int n = 0; n < Group::kRuns; ++n)
#pragma unroll
        for (int i = 0; i < Group::kWidth; ++i) seeds.push(group.x[n][i]);
    }
  });
  if (threadIdx.x == 0) shared.candidate_count = shared.key_count = 0;
  // Seeds carry no index: key them with the lowest index part. The select stops after the top
  // 16 bits of the value (kLowestShift 48: two passes at most, of ~1,300 cycles each, instead of
  // four): tau is then the floor of the 16-bit bin holding the K-th largest seed, still a lower
  // bound, at most 2^-7 below it (bf16 logits lose nothing). Only a row whose top logits all
  // share one such bin lists more candidates (and may take the exact redo). At one seed a thread
  // a warp sort of the seeds with a count of each warp's 8 largest gave about the same tau and ran
  // 0.96-1.02x in split-k's chunks (optimisation log, 2026-11-23), so the radix select stays.
  const auto seed_keys = [&](auto&& visit) {
#pragma unroll
    for (int i = 0; i < LA; ++i) visit(make_key(seeds.values[i], 0xFFFFFFFFu));
  };
  const TopkKey tau = block_radix_select<kThreads, 48>(k, seed_keys, shared.storage.select);
  const float threshold = key_threshold(tau);  // -inf for kEmptyKey or the bin of -inf

  // Phase B. (block_radix_select ended on a barrier, so the counts' zeros are visible.)
  const auto list = [&] {
    if constexpr (kListsVectors)
      return CandidateVectors<T, kThreads, kCandidateBytes>(candidate_storage, &shared.candidate_count, threshold,
                                                           first_index);
    else
      return CandidateList{static_cast<TopkKey*>(candidate_storage), &shared.candidate_count,
                           static_cast<unsigned>(kCandidateBytes / sizeof(TopkKey)), threshold};
  }();
  stream_prefix([&](const auto& group) { list.offer(group, prefix.first_index); });
  // The rest's last vectors, which nothing after phase B hides (H200, two rounds of one run each):
  // - at K > 256 (four seeds a thread) two at a time, as in the prefix: K = 1024 on rows of
  //   32000 1.02-1.06x, elsewhere 0.99-1.01x;
  // - in whole rows at K <= 256 all at once (kStreamTailLoads): K = 50 at 8-8192 rows of
  //   16000-256000 0.99-1.08x (2048 x 16000 f32 1.07x, 256 x 32000 bf16 1.03x), fp32 K = 256 0.99-1.03x;
  //   except 16-bit rows at two seeds a thread (K = 65-256), which read 0.97-0.99x at K = 256;
  // - else one at a time: split-k's bf16 chunks read 0.97-0.99x all at once (1-8 rows of
  //   4M-64M at K = 50), and K = 1 chunks 0.97x with a paired loop beside theirs, when K = 1
  //   still ran this core.
  constexpr bool kAllAtOnce = kRuns == FusedRuns::rows && !(sizeof(T) == 2 && LA == 2);
  constexpr int kRestTailLoads = LA == 4 ? 2 : kAllAtOnce ? kStreamTailLoads : 1;
  const auto fold_and_offer = [&](const auto& group) {
    accumulate(state, group, k_exp);
    list.offer(group, rest.first_index);
  };
  if (shape.staged_rest) {  // block-uniform
    for_each_element_staged<kStreamUnroll, kRestTailLoads>(rest, stage, threadIdx.x, kThreads, fold_and_offer);
  } else {
    for_each_element<kStreamUnroll, kRestTailLoads>(rest, threadIdx.x, kThreads, fold_and_offer);
  }
  // block_reduce starts with a barrier: after it every append is visible.
  const SoftmaxState total = block_reduce<kThreads / 32>(state, k_exp, shared.scratch);
  if (status_of(total) == RowStatus::has_nan) return {total, nullptr, 0, threshold};  // block-uniform

  const unsigned listed = shared.candidate_count;  // block-uniform, as is the key count
  const unsigned keys = listed <= list.capacity ? list.to_keys(listed, &shared.key_count) : ~0u;
  if (keys > list.key_capacity()) return {total, nullptr, 0, threshold};
  return {total, list.listed_keys(), keys, threshold};
}

}  // namespace softk::kernels
