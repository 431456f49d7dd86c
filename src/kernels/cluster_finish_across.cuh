// Step 4 of the cluster top-k kernel (topk_cluster.cu) for more candidates, at any level of the
// threshold: every CTA sorts its own, copies every CTA's sorted run and ranks an equal share of
// the row's candidates by binary searches in them, so that no CTA sorts them all. Apart from the
// bucket sort, which takes only a threshold settled at the first level.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>
#include <type_traits>

#include "kernels/block_topk.cuh"
#include "kernels/cluster_finish.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

namespace cg = cooperative_groups;

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// A CTA's `length` candidates, sorted, wherever block_sort_descending left them. Only pointer
/// arithmetic: `candidates` may be another CTA's, and nothing of it is read here.
__device__ __forceinline__ const TopkKey* sorted_run(const ClusterCandidates& candidates, unsigned length) {
  return sorted_into_ranked(length) ? candidates.ranked : candidates.keys;
}

/// Copies every CTA's sorted run into candidates.row, run after run (run_begin, from the lengths
/// every CTA wrote into s.run_lengths), and the leader's row state. Every remote load a thread
/// makes is issued before the first is stored: one DSMEM round trip for all.
__device__ inline void copy_runs(const cg::cluster_group& cluster, ClusterShared& s) {
  ClusterCandidates& c = s.candidates;
  const unsigned ranks = cluster.num_blocks();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    const unsigned length = lane < ranks ? s.run_lengths[lane] : 0u;
    const unsigned inclusive = warp_inclusive_sum(length);
    if (lane <= ranks) c.run_begin[lane] = inclusive - length;  // lane `ranks`: the total
  }
  __syncthreads();
  const unsigned total = c.run_begin[ranks];
  TopkKey copied[kGatheredPerThread];
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < total) {
      unsigned r = 0;  // the run holding slot j (empty runs are skipped: their end is their begin)
      while (c.run_begin[r + 1] <= j) ++r;
      copied[i] = sorted_run(*cluster.map_shared_rank(&c, r), s.run_lengths[r])[j - c.run_begin[r]];
    }
  }
  const bool copies_state = threadIdx.x == kClusterThreads - 1 && cluster.block_rank() != 0;
  Normalizer row_normalizer{};
  if (copies_state) row_normalizer = *cluster.map_shared_rank(&s.row_normalizer, 0);
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < total) c.row[j] = copied[i];
  }
  if (copies_state) s.row_normalizer = row_normalizer;
}

/// The sorted runs of candidates.row that one lane of a group of `lanes` searches: runs lane,
/// lane + lanes, ... below `ranks`, kRuns at most (the rest empty).
template <int kRuns>
struct LaneRuns {
  unsigned begin[kRuns];
  unsigned length[kRuns];
  unsigned first_step;  ///< the largest power of two no longer than the longest of these runs

  __device__ __forceinline__ LaneRuns(const ClusterCandidates& c, unsigned ranks, unsigned lane, unsigned lanes) {
    unsigned longest = 0;
#pragma unroll
    for (int m = 0; m < kRuns; ++m) {
      const unsigned r = lane + m * lanes;
      begin[m] = r < ranks ? c.run_begin[r] : 0u;
      length[m] = r < ranks ? c.run_begin[r + 1] - begin[m] : 0u;
      longest = max(longest, length[m]);
    }
    first_step = longest == 0 ? 0u : 1u << (31 - __clz(longest));
  }

  /// Keys larger than `key` in these runs (each a prefix of its run, the runs descending): a
  /// binary search in each, one step of all of them at a time. kRuns is a constant, so the
  /// searches unroll without a branch between them and a step's loads overlap (a loop that left at
  /// the lane's last run kept them apart: 0.90x at K = 256, H200).
  __device__ __forceinline__ unsigned count_greater(const TopkKey* row, TopkKey key) const {
    unsigned larger[kRuns];
#pragma unroll
    for (int m = 0; m < kRuns; ++m) larger[m] = 0;
    for (unsigned step = first_step; step > 0; step /= 2) {
#pragma unroll
      for (int m = 0; m < kRuns; ++m) {
        const unsigned probe = larger[m] + step;
        if (probe <= length[m] && row[begin[m] + probe - 1] > key) larger[m] = probe;
      }
    }
    unsigned sum = 0;
#pragma unroll
    for (int m = 0; m < kRuns; ++m) sum += larger[m];
    return sum;
  }
};

/// Calls f(runs), an integral constant: the power of two 1 .. kLargeCluster at least n.
template <typename F>
__device__ __forceinline__ void with_runs_per_lane(unsigned n, F&& f) {
  if (n <= 1) f(std::integral_constant<int, 1>{});
  else if (n <= 2) f(std::integral_constant<int, 2>{});
  else if (n <= 4) f(std::integral_constant<int, 4>{});
  else if (n <= 8) f(std::integral_constant<int, 8>{});
  else f(std::integral_constant<int, kLargeCluster>{});
}

/// Writes the winners among this CTA's share of the row's candidates (an equal slice of
/// candidates.row per CTA, whichever CTA held them). A candidate's rank in the row is the sum,
/// over the runs, of the keys larger than it: a group of lanes a candidate (a power of two) splits
/// the runs' searches between them (LaneRuns) and sums by shuffles. The groups are as wide as the
/// runs where the share still takes one round of the block, narrower where it would take more: a
/// group as wide as the runs took 4-7 rounds a share at K = 1024 in 9-16 CTAs, and one round took
/// K = 1024 on rows 1-8 1.11-1.24x faster (8 x 128256 f32 16.22 -> 13.22 us; K = 256 0.98-0.99x
/// at 1-4 rows, 1.05x at 8 rows of 128256; H200, one run). Keys are unique, so the ranks of all
/// candidates are 0 .. total - 1, and those below K are the row's top K.
__device__ inline void write_ranked_slice(const cg::cluster_group& cluster, const ClusterCandidates& c,
                                   const TopkProblem& problem, int64_t row, const Normalizer& normalizer) {
  const unsigned ranks = cluster.num_blocks();
  const unsigned total = c.run_begin[ranks];
  const unsigned begin = total * cluster.block_rank() / ranks;
  const unsigned end = total * (cluster.block_rank() + 1) / ranks;
  // lanes = 2^lane_bits: shifts and masks, where a runtime divisor costs a division's dependent
  // chain of ~20 instructions on the way to the first search.
  unsigned lane_bits = 0;
  while ((1u << lane_bits) < ranks && (end - begin) << (lane_bits + 1) <= kClusterThreads) ++lane_bits;
  const unsigned lanes = 1u << lane_bits;
  const unsigned lane = threadIdx.x & (lanes - 1);
  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  with_runs_per_lane((ranks + lanes - 1) >> lane_bits, [&](auto runs) {
    const LaneRuns<decltype(runs)::value> searched(c, ranks, lane, lanes);
    for (unsigned first = begin; first < end; first += kClusterThreads >> lane_bits) {  // block-uniform trips
      const unsigned j = first + (threadIdx.x >> lane_bits);
      const TopkKey key = j < end ? c.row[j] : kEmptyKey;
      unsigned rank = j < end ? searched.count_greater(c.row, key) : 0u;  // j is the same across a group
      for (unsigned offset = lanes / 2; offset > 0; offset /= 2) rank += __shfl_xor_sync(0xffffffffu, rank, offset);
      if (j < end && lane == 0 && rank < static_cast<unsigned>(problem.k))
        write_topk_entry(key, normalizer, problem.log_probs, probs + rank, indices + rank);
    }
  });
}

/// Step 4 for more candidates: every CTA sorts its own, the cluster copies them all, and each
/// CTA ranks and writes an equal share (copy_runs, write_ranked_slice).
template <typename Chunk>
__device__ void finish_across_cluster(const cg::cluster_group& cluster, ClusterShared& s, const Chunk& held,
                                      const LevelDecision& decision, const TopkProblem& problem, int64_t row) {
  ClusterCandidates& candidates = s.candidates;
  send_candidates(held, decision.prefix, &s.gathered, candidates.keys);
  __syncthreads();
  const unsigned count = min(s.gathered, kGatherCapacity);
  block_sort_descending<kClusterThreads>(candidates.keys, count, candidates.ranked);  // others find it: sorted_run
  if (threadIdx.x < cluster.num_blocks())
    cluster.map_shared_rank(s.run_lengths, threadIdx.x)[cluster.block_rank()] = count;
  cluster.sync();  // every CTA's run sorted, and every length in every CTA
  copy_runs(cluster, s);
  cluster_arrive_relaxed();  // this thread reads no other CTA's shared memory after this
  __syncthreads();           // the row's candidates all in candidates.row
  const Normalizer normalizer = s.row_normalizer;
  write_ranked_slice(cluster, candidates, problem, row, normalizer);
  if (cluster.block_rank() == 0) write_row_status(problem, row, normalizer);
  cluster_wait();  // no CTA exits while another still copies its run
}

#endif  // sm_90+

}  // namespace softk::kernels
