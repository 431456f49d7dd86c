// Step 4 of the cluster top-k kernel (topk_cluster.cu) for few candidates: the leader gathers
// and sorts them alone, after one barrier and with no copies between CTAs: the cheapest finish
// while the leader's sort is short. Apart from the finishes that spread a longer sort over the
// cluster.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/block_topk.cuh"
#include "kernels/cluster_finish.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"

namespace softk::kernels {

namespace cg = cooperative_groups;

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// Step 4 for few candidates (plan.leader_sort_max): every CTA sends its keys at or above the
/// threshold to the leader (a remote atomic a key), which sorts them and writes the row after
/// one barrier.
template <typename Chunk>
__device__ void finish_at_leader(const cg::cluster_group& cluster, ClusterShared& s, const Chunk& held,
                                 const LevelDecision& decision, const TopkProblem& problem, int64_t row) {
  send_candidates(held, decision.prefix, cluster.map_shared_rank(&s.gathered, 0),
                  cluster.map_shared_rank(s.candidates.keys, 0));
  cluster.sync();  // every key at the leader; no CTA's shared memory is read after this
  if (cluster.block_rank() != 0) return;
  const unsigned count = min(s.gathered, kGatherCapacity);
  const TopkKey* sorted = block_sort_descending<kClusterThreads>(s.candidates.keys, count, s.candidates.ranked);
  const Normalizer normalizer = s.row_normalizer;
  write_sorted_keys(sorted, count, 0, normalizer, problem, row);  // count >= K: the decision's bound
  write_row_status(problem, row, normalizer);
}

#endif  // sm_90+

}  // namespace softk::kernels
