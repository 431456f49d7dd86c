// What a CTA of the cluster top-k kernel (topk_cluster.cu) keeps in shared memory: the counts,
// the leader's decision, the candidates and the finishes' counters, one layout that the other
// CTAs of its cluster read and write through distributed shared memory. The threshold and every
// finish work on it, so it sits apart from each of them.
#pragma once

#include <cstdint>

#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/online_softmax.cuh"
#include "kernels/topk_key.cuh"
#include "softk/topk.hpp"

namespace softk::kernels {

constexpr int kClusterThreads = 512;
/// 16 CTAs a cluster is past the portable limit of 8, so it is asked for per device; the
/// register capacity of a row doubles with it.
constexpr int kLargeCluster = 16;
constexpr int kPortableCluster = 8;

/// What the leader decided at one level, sent to every CTA of the cluster.
struct alignas(16) LevelDecision {
  TopkKey prefix;       ///< the key bits fixed so far (bits outside `decided` are zero)
  TopkKey decided;      ///< mask of those bits
  unsigned remaining;   ///< winners still to find among the keys matching the prefix
  unsigned above;       ///< keys above the prefix's range: winners already
  int level;            ///< the level whose digits the CTAs count next
  unsigned candidates;  ///< keys >= prefix in the cluster, once done
  bool done;            ///< every key >= prefix is a candidate (the threshold)
  bool nan_row;         ///< the row holds NaN: nothing is gathered, the leader writes a NaN row
};

constexpr int kClusterWarps = kClusterThreads / 32;

/// The leader's last walk step, for the splitters of finish_in_buckets: the counts of bins
/// top - lane, and the keys in the bins above them.
struct WalkStep {
  unsigned counts[32];
  int top;
  unsigned above;
};

/// What the leader sends every CTA at each level: the decision, then (kernels built with the
/// bucket sort) the walk step. Sent in 16-byte words, the decision's alone where there is no walk.
struct alignas(16) DecisionMessage {
  LevelDecision decision;
  WalkStep walk;
};

template <bool kBucketSort>
constexpr unsigned kDecisionBytes = kBucketSort ? sizeof(DecisionMessage) : sizeof(LevelDecision);
static_assert(sizeof(LevelDecision) % 16 == 0 && sizeof(DecisionMessage) % 16 == 0, "whole 16-byte words");

/// The cluster's keys at or above the threshold: at most this many (K plus part of a bin; twice
/// kMaxFastTopK, so that K = 1024 is settled at the first level wherever the threshold bin holds
/// up to 1024 more keys: ~500 at 128256 fp32 logits).
constexpr unsigned kGatherCapacity = 2 * kMaxFastTopK;
/// Candidates a thread holds when the block takes all it may gather in registers, whole rounds
/// of the block (copy_runs, finish_in_buckets).
constexpr int kGatheredPerThread = kGatherCapacity / kClusterThreads;
static_assert(kGatherCapacity % kClusterThreads == 0, "whole rounds of the block");

/// A CTA's keys at or above the threshold (the leader's: the cluster's, in finish_at_leader),
/// sorted, and every CTA's copied beside each other: the row's candidates, ranked by binary
/// searches in each CTA's run (write_ranked_slice). Each array starts on a 128-byte boundary, so
/// that a warp's 32 keys are 2 shared-memory wavefronts, not 3.
struct alignas(128) ClusterCandidates {
  TopkKey keys[kGatherCapacity];                ///< sorted in place (or into `ranked`: sorted_run)
  alignas(128) TopkKey ranked[kRankSortMaxK];   ///< short lists sorted
  alignas(128) TopkKey row[kGatherCapacity];    ///< every CTA's sorted keys, rank after rank (run_begin)
  unsigned run_begin[kLargeCluster + 1];
};

struct ClusterShared {
  struct {
    BinHistogram<kClusterThreads> local;  ///< this CTA's counts at the current level
    BinHistogram<kClusterThreads> total;  ///< the leader's: the cluster's counts (levels past the first)
  } counting;
  /// Never live at the same time as the counts, but not in a union with them: the leader's
  /// remote reads of the counts come before any candidate is written only through the decision's
  /// mailbox, an order compute-sanitizer's racecheck does not see. (The room is free: a CTA has
  /// an SM to itself, its registers bounding it.)
  ClusterCandidates candidates;
  SoftmaxState warp_states[kClusterWarps];  ///< this CTA's (m, d), a state a warp
  /// The leader's: the row's (m, d), every warp state merged, in the form the writes take (copied
  /// where CTAs write). Formed by warp 1 during the walk (decide), off the path every CTA waits
  /// on, so that no CTA's writes wait on its division and logarithm.
  Normalizer row_normalizer;
  /// Each level's decision as this CTA received it (the leader composes it here, then sends it).
  DecisionMessage inbox;
  ClusterMailbox decision_mail;  ///< counts the inbox's bytes (the leader's: its own arrival), a phase a level
  /// Keys sent to this CTA's `candidates.keys`: by every CTA to the leader in finish_at_leader,
  /// by the CTA itself in finish_across_cluster. Zeroed before the first cluster barrier, so that
  /// no send can come before it.
  unsigned gathered;
  unsigned run_lengths[kLargeCluster];  ///< every CTA's candidate count, written into every CTA
  /// The values (ordered bits) that cut the row's candidates into one bucket a CTA, largest keys
  /// first (bucket_of); zero past the cluster's last boundary, so that those slots count for no key.
  alignas(16) uint32_t splitters[kLargeCluster];
  /// This CTA's keys at or above the threshold (staged in candidates.row), how many of them each
  /// bucket takes, then where they start in its owner's candidates.keys.
  unsigned staged;
  unsigned bucket_sizes[kLargeCluster];
  unsigned bucket_starts[kLargeCluster];
  unsigned bucket_offset;  ///< candidates in the buckets before this CTA's
};

}  // namespace softk::kernels
