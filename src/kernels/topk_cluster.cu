// Split-k top-k in one launch, for a row that fits the registers of a thread-block cluster
// (sm_90+, K <= 1024): the batch-1 decode case. The two-launch split-k (topk_split_k.cu) spends
// ~5 us of latency-bound steps in each of its kernels plus a launch between them; here the
// chunks of a row are the CTAs of one cluster (16 where the device can hold it, else 8; more rows
// than such clusters hold at once may take narrower ones under `automatic`: cluster_plan_for), each
// holds its chunk in registers (one DRAM round trip; the narrow clusters' longer chunks in
// shared memory), and they agree on the row's threshold through distributed shared memory
// instead of a workspace and a second launch.
//
//  1. Every CTA loads its chunk into registers (or shared memory: SharedChunk), folds it into
//     one (m, d) a warp and counts its keys' top 12 bits (the 4096 bins of
//     block_bin_threshold.cuh) in its shared memory.
//  2. Cluster barrier (one for shared memory alone: cluster_signal.cuh). Warp 0 of the leader
//     (rank 0) reads every warp's maximum, then walks the cluster's counts down from the
//     maximum's bin, 32 bins a step, to the bin holding the row's K-th largest key (with
//     logits, one step), and mails its decision into every CTA (st.async, counted by an
//     mbarrier there: each CTA waits for its own mail, not for a barrier). Warp 1 merges the
//     row's (m, d) meanwhile.
//  3. If the keys at or above that bin are at most kGatherCapacity, its floor is the
//     threshold. Otherwise (ties, flat rows) every CTA counts the next 12 key bits of the keys
//     in that bin, the leader sums and scans them, and so on down to the index bits, where keys
//     are unique: a radix select over the cluster, taken only when winners tie or crowd a bin.
//  4. Few candidates (at most 256: K <= ~100 with logits), or a batch of more than one wave of
//     clusters: every CTA sends its keys at or above the threshold to the leader, and after a
//     second barrier the leader sorts and writes them (finish_at_leader). More than 512 settled
//     at the first level (K = 1024): the leader's walk also cuts them into one range of keys a
//     CTA, every CTA sends each key to the CTA owning its range, and after a second barrier each
//     sorts its bucket and writes it at the bucket's place in the row (finish_in_buckets).
//     Otherwise (K = 256, or ties past the first level): every CTA sorts its own; after a second
//     barrier every CTA copies every CTA's sorted run (one DSMEM round trip), ranks an equal
//     share of the row's candidates by binary searches in the runs, and writes those ranked
//     below K; a last barrier keeps each CTA's run until every CTA has copied it
//     (finish_across_cluster). One CTA sorting ~1100 keys at K = 1024 was the long pole of the
//     leader's form (the reason it stopped at K = 256 before); a CTA's share is ~1/16 of them.
// Small batches at 1 < K <= 256 (kBoundedMaxBatchTokens) skip steps 2-4's agreement instead:
// each CTA mails every other CTA a lower bound of the row's K-th key from its warps' largest keys
// and then its keys above the cluster's bound, and each writes those of its own that rank below K
// (cluster_bounded.cuh); its one cluster barrier before the exit's is arrived at before the chunk
// lands, so no CTA waits at it.
// Two or three cluster barriers (two more a further level) and no workspace: nothing to zero,
// nothing to launch in between. Each DSMEM round trip is ~200 ns, so every remote read a step
// needs is issued before any is used. K = 1 (greedy decoding) needs no threshold and takes a
// kernel of its own: step 1 without the counts, then the leader merges every warp's largest key
// and (m, d).
//
// Where the steps live: the CTA's shared layout in cluster_shared.cuh, step 1's held chunk in
// cluster_chunk.cuh, steps 2-3 in cluster_threshold.cuh, step 4's finishes in
// cluster_finish_at_leader.cuh, cluster_finish_in_buckets.cuh and cluster_finish_across.cuh (what
// they share in cluster_finish.cuh), the bounded kernel's steps in cluster_bounded.cuh, the
// barriers and mail in cluster_signal.cuh. This file holds the two
// kernels, the plans (how many CTAs a row, what a thread holds) and the launch.
#include <cooperative_groups.h>

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_bounded.cuh"
#include "kernels/cluster_chunk.cuh"
#include "kernels/cluster_finish.cuh"
#include "kernels/cluster_finish_across.cuh"
#include "kernels/cluster_finish_at_leader.cuh"
#include "kernels/cluster_finish_in_buckets.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/cluster_threshold.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {
namespace {

namespace cg = cooperative_groups;

/// CTAs are added to a row's cluster until each thread holds about kFinestElementsPerThread
/// elements (what a thread folds and counts before the first barrier), where the batch then runs in
/// one wave of such clusters; else until it holds about kTargetElementsPerThread, since wider
/// clusters are fewer at once (7 of 10-16 CTAs resident on an H200) and rows would queue (8 x 32000
/// f32 K = 50 at 16 CTAs: ~11.0 us against ~8.0 at 4). Halving a CTA's chunk halves its fold and
/// its share of the row's candidates: rows 1-8 of 32000 and 1 of 50257, K 50 to 1024, 1.05-1.12x
/// (1 x 32000 f32 K = 50 6.73 -> 6.10 us, 8 x 32000 f32 K = 1024 11.89 -> 10.71; H200, one run,
/// auto), and K = 1 at 1-2 such rows 1.06-1.10x (1 x 32000 f32 3.87 -> 3.53; 4-8 rows 0.99-1.04x;
/// another run). Where the finer clusters would not fit one wave, a narrower plan's one wave lost
/// to the coarser clusters (8 x 50257 K = 1024: 9 CTAs 0.87-0.89x against 7), so the coarser size
/// comes first there. More elements a thread cost more than they save (1 x 128256 bf16: 32 a thread
/// ~10.6 us, 16 a thread ~7.7).
constexpr int kFinestElementsPerThread = 8;
constexpr int kTargetElementsPerThread = 16;
/// The most elements a thread holds in registers in the narrower clusters a batch may take
/// (measured with 8 CTAs a row on an H200, where 15 are resident against 7 of 16: 8 x 128256 f32,
/// K = 50, 12.97 -> 9.06 us, bf16 12.32 -> 8.31); past it the kernels holding 64 bf16 elements
/// spill (8 x 151936 bf16 13.55 -> 11.94 but 16 rows 19.74 -> 21.43; H200, one run).
constexpr int kNarrowRegisterElements = 32;
/// Past kNarrowRegisterElements, at K > 1, a narrow cluster holds up to this many elements a
/// thread in shared memory (SharedChunk); measured with 8 CTAs a row against two or more waves
/// of the widest clusters (e741479; V 151936-256000, K 50 and 256): 8 rows 1.14-1.38x (8 x
/// 256000 f32 K = 50 16.75 -> 12.64 us),
/// 16 rows 1.03-1.14x, 32 rows 1.23-1.41x (H200, one run, 2026-11-21). Not at K = 1, whose
/// kernel holds two CTAs an SM, so the widest clusters take 8 rows in one wave: 8 x 201088 f32
/// K = 1 7.68 us there against 9.89 in narrow clusters (H200, another run).
constexpr int kNarrowSharedElements = 64;

/// In a one-wave batch of clusters of 2 or more CTAs, up to this many candidates the leader sorts
/// them alone (finish_at_leader); more are ranked across the cluster (finish_across_cluster),
/// whose copies and last barrier cost ~1.7 us more than the leader's gather and rank sort at
/// K = 50 (1 x 128256 f32: 9.94 us against 8.17, H100), and save more than that once the
/// leader's sort is a network of 512 keys or more (K = 256: 11.45 -> 10.33 us; K = 1024: 29.54
/// us in two launches -> 14.10).
constexpr unsigned kLeaderSortMaxCandidates = 256;

/// Under `automatic`, a batch at 1 < K <= kOneWaveClusterMaxK takes clusters only in one wave of
/// them, at K up to kMultiWaveClusterMaxK in up to kMultiWaveClusterMaxWaves, past it in one, and
/// at K = 1 in up to kArgmaxClusterMaxWaves; more waves leave the batch to split-k's two launches,
/// whose chunks stream over every SM (and up to K = 64 read their spans once), or to a block per
/// row (dispatch.cpp). Against the two launches (H200, one run, 2026-12-02 15:18, auto with the
/// choice forced): K = 50 in two waves 0.73-0.85x (16 x 201088 f32 18.92 us against 14.87, 16 x
/// 256000 bf16 19.04 against 15.26), in more 0.62-0.89x (32 x 256000 f32 30.95 against 19.27);
/// K = 256 in two waves 1.03-1.14x (16 x 201088 bf16 20.81 against 24.18, 32 x 128256 f32 22.17
/// against 24.06), in more 0.80-0.90x (32 x 201088-256000 f32); K = 1024 in two waves two launches
/// took 37.1 us at 16 x 256000 f32, where ranking across the cluster in two waves took 47.5 (H100).
/// K = 1 in four or five waves ran 0.54-0.98x a block per row (64 x 151936, 128 x 50257 on; H100).
constexpr int32_t kOneWaveClusterMaxK = 64;
constexpr int32_t kMultiWaveClusterMaxK = 256;
constexpr int64_t kMultiWaveClusterMaxWaves = 2;
constexpr int64_t kArgmaxClusterMaxWaves = 3;
/// A cluster runs on one GPC, whose share of the memory system bounds how fast it streams a row:
/// under `automatic`, a lone row of K = 1 longer than kClusterArgmaxMaxRowBytes, or a batch of
/// more than kClusterArgmaxMaxBatchBytes, leaves the clusters to split-k's two launches, whose
/// chunks stream over every SM, or to a block per row (dispatch.cpp). One row: 1 x 256000 f32 5.30
/// -> 4.84 us, 1 x 201088 f32 4.92 -> 4.78; but 1 x 151936 f32 4.41 -> 4.62, and bf16 0.84-0.94x up
/// to 256000 tokens (H200, one run). Batches
/// (H200, one run, 2026-12-02 15:18, auto with the choice forced): past 4 MiB 1.03-1.75x (8 x
/// 201088 f32 6.58 -> 6.23 us, 16 x 151936 bf16 7.27 -> 6.26, 32 x 256000 f32 16.88 -> 12.32, 64 x
/// 256000 bf16 22.90 -> 13.10, where the clusters took up to three waves), 8 x 151936 f32 (4.6 MiB)
/// 0.99x; up to it the clusters win (8 x 128256 f32 4.99 us against 5.55, 16 x 128256 bf16 5.56
/// against 5.92, 32 x 32000 f32 4.83 against 5.72).
constexpr int64_t kClusterArgmaxMaxRowBytes = 768 * 1024;
constexpr int64_t kClusterArgmaxMaxBatchBytes = 4 * 1024 * 1024;

/// Where a CTA sits: its row's cluster, its rank there (the leader's is 0) and its row.
struct ClusterCta {
  cg::cluster_group cluster;
  unsigned rank;
  bool leader;
  int64_t row;
};

/// Every cluster kernel's first step: the CTA's place and its chunk's addresses, worked out before
/// it waits for the previous grid (a programmatic launch: the CTA is resident early, and that
/// work, ~50 dependent instructions, is off the path from the previous grid's end to the loads),
/// then the wait, then the chunk's loads.
template <typename T, int kVectors>
struct EnteredCta {
  ClusterCta cta;
  HeldChunk<T, kVectors> held;
};

template <typename T, int kVectors>
__device__ __forceinline__ EnteredCta<T, kVectors> enter_row_cluster(const TopkProblem& problem,
                                                                     const ClusterTopkPlan& plan) {
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t row = plan.first_row + blockIdx.y;
  const RowSegment<T> chunk = chunk_of_row<T>(problem, plan, row, rank);
  enter_after_previous_grid();
  return {{cluster, rank, rank == 0, row}, hold_chunk<T, kVectors>(chunk)};
}

/// Step 1 without counts (the K = 1 and the bounded kernels): folds the CTA's chunk into (m, d)
/// and the kDepth largest of its threads' largest keys a warp, stored at warp_states and
/// warp_best (this CTA's: kClusterWarps states, warp w's keys at w x kDepth on, descending) for a
/// barrier to publish. Returns the thread's largest value.
template <unsigned kDepth = 1, typename Chunk>
__device__ __forceinline__ float fold_largest_a_warp(const Chunk& held, float k_exp, SoftmaxState* warp_states,
                                                     TopkKey* warp_best) {
  SoftmaxState state = empty_state();
  RunningArgmax argmax;
  held.for_each_group([&](const auto& group) {
    accumulate(state, group, k_exp);
    argmax.offer(group, held.segment.first_index);
  });
  state = warp_reduce(state, k_exp);
  const unsigned warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) warp_states[warp] = state;
  // Keys are unique, so each round's largest leaves from one lane (empty keys, which tie, only
  // once none is left).
  TopkKey remaining = argmax.best;
#pragma unroll
  for (unsigned d = 0; d < kDepth; ++d) {
    const TopkKey best = warp_max(remaining);
    if (threadIdx.x % 32 == 0) warp_best[warp * kDepth + d] = best;
    if (remaining == best) remaining = kEmptyKey;
  }
  return argmax.best_value;
}

/// Steps 1-4 for K > 1. kBucketSort: built with finish_in_buckets, for K > kLeaderSortMaxCandidates.
template <typename T, int kVectors, bool kBucketSort>
__global__ void __launch_bounds__(kClusterThreads, 1)
    topk_cluster_kernel(TopkProblem problem, ClusterTopkPlan plan) {
#if __CUDA_ARCH__ >= 900
  ClusterShared& s = cluster_shared();
  const auto [cta, held] = enter_row_cluster<T, kVectors>(problem, plan);
  const auto k = static_cast<unsigned>(problem.k);

  s.counting.local.clear();
  if (threadIdx.x == 0) {
    s.gathered = s.staged = 0;
    s.decision_mail.init();
    if (!cta.leader) s.decision_mail.expect(kDecisionBytes<kBucketSort>);
  }
  if (kBucketSort && threadIdx.x < kLargeCluster) s.bucket_sizes[threadIdx.x] = 0;
  __syncthreads();  // counters zeroed before the adds (and before the first cluster barrier)
  held.land();

  SoftmaxState state = empty_state();
  held.for_each_group([&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    s.counting.local.add_values(group);
  });
  // A state a warp, merged by the leader later: no block-wide reduction (three barriers and warp
  // 0's merge) in front of the first cluster barrier.
  state = warp_reduce(state, problem.k_exp);
  if (threadIdx.x % 32 == 0) s.warp_states[threadIdx.x / 32] = state;

  LevelDecision decision{};
  decision.remaining = k;
  for (unsigned level = 0;; ++level) {
    cluster_sync_shared();  // every count and warp state of the cluster visible, every mailbox ready
    if (cta.leader) decide<kBucketSort>(cta.cluster, s, decision, problem.k_exp);
    s.decision_mail.wait(level);  // sent after the leader's last read of the counts
    decision = s.inbox.decision;
    if (decision.done) break;
    if (threadIdx.x == 0 && !cta.leader) s.decision_mail.expect(kDecisionBytes<kBucketSort>);  // the next level's
    // The leader read the counts before it sent the decision, but racecheck sees no order
    // between those reads and the clear but a barrier (taken only where winners tie in a bin).
    cta.cluster.sync();
    s.counting.local.clear();
    __syncthreads();
    const int shift = digit_shift(decision.level);
    for_each_held_key(held, [&](TopkKey key) {
      if ((key & decision.decided) == decision.prefix)
        atomicAdd(&s.counting.local.counts[static_cast<unsigned>(key >> shift) & (kBins - 1)], 1u);
    });
  }

  if (decision.nan_row) {  // cluster-uniform; the row's normalizer says has_nan too
    cta.cluster.sync();  // the leader's reads of the warp states done, its normalizer written
    if (!cta.leader) return;
    write_row_status(problem, cta.row, s.row_normalizer);
    write_nan_row<kClusterThreads>(k, problem.probs + cta.row * problem.k, problem.indices + cta.row * problem.k);
    return;
  }

  if (decision.candidates <= plan.leader_sort_max)
    finish_at_leader(cta.cluster, s, held, decision, problem, cta.row);
  else if (sorts_in_buckets<kBucketSort>(decision.candidates, decision.level == 0, plan.leader_sort_max))
    finish_in_buckets(cta.cluster, s, held, decision, problem, cta.row);
  else
    finish_across_cluster(cta.cluster, s, held, decision, problem, cta.row);
#endif
}

/// K = 1 (greedy decoding): the row's largest key needs no threshold, so a CTA folds its chunk
/// into (m, d) and its largest key a warp, and after one cluster barrier the leader's warp 0
/// merges the cluster's warp results (one remote round trip) and writes the row: no histogram,
/// walk, gather or sort, and two cluster barriers instead of three. The (m, d) merge is the
/// top-k kernel's, so both give the same probability bits.
template <typename T, int kVectors>
__global__ void __launch_bounds__(kClusterThreads, 1)
    topk_cluster_argmax_kernel(TopkProblem problem, ClusterTopkPlan plan) {
#if __CUDA_ARCH__ >= 900
  __shared__ SoftmaxState warp_states[kClusterWarps];
  __shared__ TopkKey warp_best[kClusterWarps];
  const auto [cta, held] = enter_row_cluster<T, kVectors>(problem, plan);
  held.land();

  fold_largest_a_warp(held, problem.k_exp, warp_states, warp_best);
  cluster_sync_shared();  // every warp's result visible

  SoftmaxState row_state{};
  if (cta.leader && threadIdx.x < 32) {
    TopkKey keys[kStatesPerLane];
    gather_per_warp(cta.cluster, warp_best, keys, kEmptyKey);  // issued before the states' loads wait
    row_state = merge_row_state(cta.cluster, warp_states, problem.k_exp);
    TopkKey best = keys[0];
#pragma unroll
    for (int i = 1; i < kStatesPerLane; ++i) best = max(best, keys[i]);
    best = warp_max(best);
    // Kept in the leader's own slot 0 (read by this warp above, by no other CTA) across the
    // arrive: the store uses every remote read's value (through warp 0's shuffles), so the reads
    // are done when the other CTAs may exit (cluster_arrive_relaxed), and the row is written
    // after the arrive, not on the path the others wait on (written before it: K = 1 0.96-0.98x).
    if (threadIdx.x == 0) {
      warp_states[0] = row_state;
      warp_best[0] = best;
    }
  }
  cluster_arrive_relaxed();
  if (cta.leader && threadIdx.x == 0) write_argmax_row(problem, cta.row, warp_states[0], warp_best[0]);
  cluster_wait();
#endif
}

/// 1 < K <= kBoundedMaxK, the chunk in registers (cluster_bounded.cuh): step 1 as K = 1 takes it
/// (no counts; a largest key a warp, or past K = 64 four), each CTA's bound mailed to every other
/// CTA, then every CTA's keys at or above the row's bound likewise, and each CTA writes those of its own keys that rank
/// below K. Its one cluster barrier before the exit's readies the mailboxes, arrived at before the
/// chunk lands: mailed instead of read after a barrier, the bounds took K = 50 at batches of up
/// to 256000 tokens 0.98-1.06x, geomean ~1.02 (H100, 2026-11-24). kDepth: bound_warp_depth(K),
/// a parameter so that K <= 64 builds the code it measured (one kernel for both cost K = 50
/// 0.97-0.99x at batch 1, the parameter 0.98-1.00x: H200, 2026-12-02).
template <typename T, int kVectors, unsigned kDepth>
__global__ void __launch_bounds__(kClusterThreads, 1)
    topk_cluster_bounded_kernel(TopkProblem problem, ClusterTopkPlan plan) {
#if __CUDA_ARCH__ >= 900
  BoundedShared& s = bounded_shared();
  const auto [cta, held] = enter_row_cluster<T, kVectors>(problem, plan);
  const auto k = static_cast<unsigned>(problem.k);
  const unsigned ctas = cta.cluster.num_blocks();
  const unsigned q = bound_depth(k, ctas);
  if (threadIdx.x == 0) {
    s.appended = s.selected = 0;
    init_bounded_mail(s, ctas, cta.leader);
  }
  if (threadIdx.x < kBoundedRegionKeys) s.own_ranks[threadIdx.x] = 0;
  // The barrier that readies every mailbox, arrived at before the chunk lands, so that its wait
  // below finds every CTA long arrived. (The mailboxes' init fence is the one this needs.)
  cluster_arrive_relaxed();
  held.land();

  const float held_max = fold_largest_a_warp<kDepth>(held, problem.k_exp, s.warp_states[cta.rank], s.warp_best);
  // The other CTAs' warp states go to the leader by bulk copy; the leader's own are read in place.
  if (!cta.leader && threadIdx.x % 32 == 0) fence_shared_for_bulk_copy();
  __syncthreads();  // every warp's results, and the counters zeroed
  cluster_wait();   // every mailbox ready
  if (threadIdx.x < 32) {
    publish_row_bound<kDepth>(s, k, q, ctas, cta.rank);
  } else if (threadIdx.x < 64) {
    // The row's (m, d), merged by the leader while warp 0 waits for the bounds and mailed to
    // every CTA, which each write their own winners. (Merged by every CTA from remote reads, the
    // cluster's 16 x 256 remote reads took ~2,900 cycles where the leader's alone took ~1,200.)
    if (cta.leader)
      share_row_state(s, ctas, merge_mailed_states(s, ctas, problem.k_exp));
    else
      send_warp_states_to_leader(s, cta.rank);
  }
  await_row_bound();  // W visible; the leader's row state by the next barrier
  const RowBound bound = s.row_bound;
  // A NaN row shares empty regions, so that every CTA still waits for what is sent to it.
  const unsigned count = bound.nan ? 0u : fill_region(s, held, held_max, bound.floor, k, cta.rank);
  share_region(s, ctas, cta.rank, count);
  s.mail.wait(0);
  // Everything sent to this CTA has landed (warp 0 waited for the bounds, the leader's warp 1 for
  // the warp states, every thread for the regions), and nothing is read from another's: the exit
  // barrier's arrival, whose wait comes as the CTA leaves. Every CTA arrives only once its mail
  // has landed, so after the wait so have the bulk copies out of this CTA.
  cluster_arrive_relaxed();
  if (bound.nan) {
    __syncthreads();  // the leader's row state
    if (cta.leader) {
      write_row_status(problem, cta.row, Normalizer(s.row_state, problem.k_exp));
      write_nan_row<kClusterThreads>(k, problem.probs + cta.row * problem.k, problem.indices + cta.row * problem.k);
    }
  } else {
    // The leader's own row state is ordered by its fill's barrier, the others' by the mail.
    const Normalizer normalizer(s.row_state, problem.k_exp);
    write_own_winners(s, ctas, cta.rank, count, normalizer, problem, cta.row);
    if (cta.leader) write_row_status(problem, cta.row, normalizer);
  }
  cluster_wait();
#endif
}

template <typename F>
void with_held_vectors(int held_vectors, F&& f) {
  switch (held_vectors) {
    case kHeldInShared: f(std::integral_constant<int, kHeldInShared>{}); return;
    case 2: f(std::integral_constant<int, 2>{}); return;
    case 4: f(std::integral_constant<int, 4>{}); return;
    default: f(std::integral_constant<int, kMaxHeldVectors>{}); return;
  }
}

/// The cluster kernels, by what their dynamic shared memory holds.
enum class ClusterKernel {
  argmax,        ///< nothing it reads: K = 1 keeps its warps' results in static shared memory
  bounded,       ///< BoundedShared, the chunk in registers
  registers,     ///< ClusterShared, the chunk in registers
  shared_chunk,  ///< ClusterShared, then the chunk
};

/// The most tokens a batch may hold (rows x V) and take topk_cluster_bounded_kernel: it measured
/// 1.02-1.10x the threshold's kernel at up to 256000 (1-8 rows of 32000, 1-2 of 128256 and 1 of
/// 151936; 1 x 256000 1.00x) and 0.95-0.98x past it (16 rows of 32000, 2 of 256000, 8 of 128256
/// bf16) (K = 50, H100, one run of two rounds, 2026-11-24).
constexpr int64_t kBoundedMaxBatchTokens = 262144;

/// Whether a batch of `rows` rows of `vocab` tokens in `plan` runs K = k in the bounded kernel: a
/// bound needs two CTAs or more (the regions go by mail to the other CTAs) and q <= kClusterWarps x
/// bound_warp_depth(K) offered keys a CTA to vouch for its keys.
bool takes_bound(const ClusterTopkPlan& plan, int32_t k, int64_t rows, int64_t vocab) {
  return k > 1 && k <= kBoundedMaxK && plan.ctas >= 2 && plan.held_vectors != kHeldInShared &&
         bound_depth(static_cast<unsigned>(k), static_cast<unsigned>(plan.ctas)) <=
             kClusterWarps * bound_warp_depth(static_cast<unsigned>(k)) &&
         rows * vocab <= kBoundedMaxBatchTokens;
}

/// A CTA's dynamic shared memory in the kernel that runs `plan` at `k`.
std::size_t launch_shared_bytes(const ClusterTopkPlan& plan, int32_t k) {
  return k == 1 || plan.bounded ? plan.shared_bytes : kClusterSharedBytes + plan.shared_bytes;
}

/// Calls f(kernel, kind) for every cluster kernel of every dtype; the chunk is held in shared
/// memory only by a top-k kernel (cluster_plan_for never gives one to K = 1).
template <typename F>
void for_each_cluster_kernel(F&& f) {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16})
    with_input_type(dtype, [&](auto in) {
      using T = typename decltype(in)::type;
      f(topk_cluster_kernel<T, kHeldInShared, false>, ClusterKernel::shared_chunk);
      f(topk_cluster_kernel<T, kHeldInShared, true>, ClusterKernel::shared_chunk);
      const auto in_registers = [&](auto vectors) {
        f(topk_cluster_kernel<T, decltype(vectors)::value, false>, ClusterKernel::registers);
        f(topk_cluster_kernel<T, decltype(vectors)::value, true>, ClusterKernel::registers);
        f(topk_cluster_argmax_kernel<T, decltype(vectors)::value>, ClusterKernel::argmax);
        f(topk_cluster_bounded_kernel<T, decltype(vectors)::value, 1>, ClusterKernel::bounded);
        f(topk_cluster_bounded_kernel<T, decltype(vectors)::value, kBoundedWarpDepth>, ClusterKernel::bounded);
      };
      in_registers(std::integral_constant<int, 2>{});
      in_registers(std::integral_constant<int, 4>{});
      in_registers(std::integral_constant<int, kMaxHeldVectors>{});
    });
}

/// The launch of `rows` clusters of `ctas` CTAs (a row each: grid x is the cluster), for the
/// occupancy probe and the launch alike.
KernelLaunch cluster_launch(int ctas, int64_t rows, std::size_t shared_bytes, cudaStream_t stream) {
  KernelLaunch launch(dim3(static_cast<unsigned>(ctas), static_cast<unsigned>(rows)), kClusterThreads, shared_bytes,
                      stream);
  launch.cluster(static_cast<unsigned>(ctas));
  return launch;
}

/// Clusters of `ctas` CTAs of `kernel` that can be resident on this device at once (0: none,
/// or the size is refused).
template <typename Kernel>
int resident_clusters(Kernel* kernel, int ctas, std::size_t shared_bytes) {
  const KernelLaunch launch = cluster_launch(ctas, 1, shared_bytes, nullptr);
  int clusters = 0;
  const cudaError_t pending = cudaPeekAtLastError();
  const cudaError_t status = cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch.config());
  if (status != cudaSuccess) {
    if (pending == cudaSuccess) (void)cudaGetLastError();  // a refused size is an answer, not an error to leave behind
    return 0;
  }
  return clusters;
}

/// What the current device holds: the largest cluster (16 CTAs where it can be resident, else 8;
/// 0 where the device or the loaded image has no clusters, before sm_90), how many clusters of
/// each size up to 16 are resident at once (an H200: 7 of 10 to 16 CTAs, 9 of 9, 15 of 8), and
/// the most a CTA may hold in shared memory (kMaxSharedChunkBytes, or what the device leaves
/// beside ClusterShared). For K > 1 the top-k kernel holding the most in registers (512 threads
/// x 128 registers: one CTA an SM) answers for every top-k kernel: the others hold as many CTAs
/// an SM (the shared-memory chunk's kernel, registers bounding it first), so the count is a
/// lower bound for them. The K = 1 kernels, with their few registers, hold two CTAs an SM and
/// have counts of their own (an H100: 14 of 13-16 CTAs, 30 of 8, 62 of 4), and counts of one CTA
/// an SM, as they run with spread_bytes reserved. Asked once per device.
struct ClusterLimits {
  int max_ctas;
  std::array<int, kLargeCluster + 1> resident;         ///< by CTAs a cluster (1 to 16), K > 1
  std::array<int, kLargeCluster + 1> resident_argmax;  ///< the same for the K = 1 kernel
  std::array<int, kLargeCluster + 1> resident_spread;  ///< ...with spread_bytes reserved (all 0: it does not spread)
  std::size_t shared_chunk_bytes;
  std::size_t spread_bytes;  ///< shared memory that holds a K = 1 CTA alone on its SM

  const std::array<int, kLargeCluster + 1>& resident_for(int32_t k) const { return k == 1 ? resident_argmax : resident; }
};

/// The dynamic shared memory of the K = 1 kernel (at most: spread_bytes where it spreads) and of
/// the bounded kernel (always at least spread_bytes: one CTA an SM, as the top-k kernel's
/// registers hold it, so that its resident counts answer for it too).
std::size_t reserved_shared_bytes(const ClusterLimits& limits, ClusterKernel kind) {
  return kind == ClusterKernel::argmax ? limits.spread_bytes : std::max(limits.spread_bytes, kBoundedSharedBytes);
}

const ClusterLimits& cluster_limits(const DeviceInfo& device) {
  static const ClusterLimits kNone{};
  if (!sm90_image_loaded(device)) return kNone;
  return cached_per_device<ClusterLimits>([&](int) {
    ClusterLimits limits{};
    cudaFuncAttributes top_k{};
    SOFTK_CUDA_CHECK(cudaFuncGetAttributes(&top_k, topk_cluster_kernel<float, kHeldInShared, false>));
    const auto per_block = static_cast<std::size_t>(device.max_shared_memory_per_block);
    const std::size_t taken = top_k.sharedSizeBytes + kClusterSharedBytes;
    const std::size_t beside = per_block > taken ? per_block - taken : 0;
    limits.shared_chunk_bytes = std::min(kMaxSharedChunkBytes, beside / 16 * 16);
    // Past half of what a block may hold, two CTAs no longer share an SM.
    limits.spread_bytes = (per_block / 2 + 1024) / 128 * 128;
    for_each_cluster_kernel([&](auto* kernel, ClusterKernel kind) {
      SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      if (kind == ClusterKernel::argmax || kind == ClusterKernel::bounded)
        SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(reserved_shared_bytes(limits, kind))));
      else {
        const std::size_t chunk = kind == ClusterKernel::shared_chunk ? limits.shared_chunk_bytes : 0;
        SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(kClusterSharedBytes + chunk)));
      }
    });
    for (int ctas = 1; ctas <= kLargeCluster; ++ctas) {
      limits.resident[ctas] =
          resident_clusters(topk_cluster_kernel<float, kMaxHeldVectors, false>, ctas, kClusterSharedBytes);
      limits.resident_argmax[ctas] = resident_clusters(topk_cluster_argmax_kernel<float, kMaxHeldVectors>, ctas, 0);
      limits.resident_spread[ctas] =
          resident_clusters(topk_cluster_argmax_kernel<float, kMaxHeldVectors>, ctas, limits.spread_bytes);
    }
    if (limits.resident_spread[1] > device.sm_count) limits.resident_spread = {};  // the reservation did not spread
    limits.max_ctas = limits.resident[kLargeCluster] > 0 ? kLargeCluster
                      : limits.resident[kPortableCluster] > 0 ? kPortableCluster
                                                              : 0;
    return limits;
  });
}

/// A row of `vocab` tokens over at most `max_ctas` CTAs, each thread holding about
/// `target_elements` elements (more where max_ctas is too few): in registers where a thread then
/// holds at most `register_elements` (rounded up to 2, 4 or 8 vectors), else in shared memory.
ClusterTopkPlan plan_over(int64_t vocab, DType dtype, int max_ctas, int register_elements,
                          int target_elements = kTargetElementsPerThread) {
  const int64_t width = 16 / static_cast<int64_t>(dtype_size(dtype));
  const int64_t target = int64_t{target_elements} * kClusterThreads;
  const int ctas = static_cast<int>(std::min<int64_t>(max_ctas, (vocab + target - 1) / target));
  const int64_t chunk_length = ((vocab + ctas - 1) / ctas + 15) / 16 * 16;
  const int64_t vectors_per_thread = (chunk_length / width + kClusterThreads - 1) / kClusterThreads;
  int held = 2;
  while (held < vectors_per_thread) held *= 2;
  if (held <= kMaxHeldVectors && held * width <= register_elements) return {ctas, chunk_length, held, 0, 0};
  return {ctas, chunk_length, kHeldInShared, static_cast<std::size_t>(chunk_length) * dtype_size(dtype), 0};
}

constexpr ClusterTopkPlan kNoPlan{0, 0, 0, 0, 0};

/// The cluster size and chunks for `rows` rows of `vocab` tokens; ctas 0 when a row does not fit or
/// K is past kMaxFastTopK. Per row, it depends on V, K, the dtype and the device only, so a row
/// gets the same bits whatever batch it sits in: the finest chunks (kFinestElementsPerThread a
/// thread), held in registers. Per batch, those where the rows fit one wave of their clusters, else
/// the chunks of kTargetElementsPerThread a thread in the widest clusters where the rows fit one
/// wave of those; rows past what those clusters hold at once take narrower clusters, of which more
/// are resident (an H200: 7 of 10-16 CTAs, 9 of 9, 15 of 8), where that takes fewer waves: at K > 1
/// the widest size that takes the fewest, its chunks in registers up to kNarrowRegisterElements a
/// thread and in shared memory up to kNarrowSharedElements (a wave of longer chunks costs far less
/// than a second wave: 8 x 256000 f32 K = 50, one wave of 8 CTAs 12.6 us, two of 16 16.8, at
/// e741479; the rule below takes 9 there, 12.4 us); at K = 1 8-CTA clusters, in registers. Against
/// 8-CTA clusters only (H200, one run, auto, K 50 and 256): 16 rows of 128256-151936 1.28-1.51x (6
/// CTAs a row, one wave), 32 rows of 32000-151936 1.09-1.44x, 8 rows 1.01-1.11x (9 CTAs), the rest
/// 0.96-1.05x.
ClusterTopkPlan cluster_size_for(int64_t rows, int64_t vocab, DType dtype, int32_t k, const ClusterLimits& limits,
                                 SplitSizing sizing) {
  if (k > kMaxFastTopK || limits.max_ctas == 0) return kNoPlan;
  const int width = 16 / static_cast<int>(dtype_size(dtype));
  const ClusterTopkPlan finest =
      plan_over(vocab, dtype, limits.max_ctas, kMaxHeldVectors * width, kFinestElementsPerThread);
  if (finest.held_vectors == kHeldInShared) return kNoPlan;
  // The K = 1 kernel holds two CTAs an SM, so its counts are its own: with those the widest
  // clusters hold 8 rows of 128256 in one wave (5.66 us f32, against 6.88 in 8-CTA clusters,
  // which the top-k kernel's counts took; bf16 4.89 against 5.60; H200, one run).
  const auto& resident_at_once = limits.resident_for(k);
  if (sizing == SplitSizing::per_row || rows <= resident_at_once[finest.ctas]) return finest;
  const ClusterTopkPlan widest = plan_over(vocab, dtype, limits.max_ctas, kMaxHeldVectors * width);
  if (rows <= resident_at_once[widest.ctas]) return widest;
  // A size the probe refused (0 resident) never runs in any number of waves.
  const auto waves = [&](int ctas) {
    const int64_t resident = resident_at_once[ctas];
    return resident > 0 ? (rows + resident - 1) / resident : std::numeric_limits<int64_t>::max();
  };
  if (k == 1) {
    // Only the one narrower size measured for the K = 1 kernel, with the chunk in registers.
    const ClusterTopkPlan narrow = plan_over(vocab, dtype, kPortableCluster, kNarrowRegisterElements);
    const bool fewer_waves = widest.ctas > kPortableCluster && waves(kPortableCluster) < waves(widest.ctas);
    return fewer_waves && narrow.held_vectors != kHeldInShared ? narrow : widest;
  }
  // The fewest waves, then the widest clusters that take them (fewest elements a thread).
  ClusterTopkPlan best = widest;
  for (int ctas = widest.ctas - 1; ctas >= 1; --ctas) {
    const ClusterTopkPlan narrow = plan_over(vocab, dtype, ctas, kNarrowRegisterElements);
    const bool held = narrow.held_vectors != kHeldInShared ||
                      (narrow.chunk_length <= int64_t{kNarrowSharedElements} * kClusterThreads &&
                       narrow.shared_bytes <= limits.shared_chunk_bytes);
    if (!held) break;  // fewer CTAs would each hold more
    if (waves(ctas) < waves(best.ctas)) best = narrow;
  }
  return best;
}

/// The most waves of clusters a batch of K = k takes under `automatic` (kOneWaveClusterMaxK).
int64_t max_cluster_waves(int32_t k) {
  if (k == 1) return kArgmaxClusterMaxWaves;
  return k > kOneWaveClusterMaxK && k <= kMultiWaveClusterMaxK ? kMultiWaveClusterMaxWaves : 1;
}

/// Whether `automatic` streams a K = 1 batch over every SM in split-k's two launches rather than
/// in clusters (kClusterArgmaxMaxRowBytes, kClusterArgmaxMaxBatchBytes).
bool argmax_batch_takes_every_sm(int64_t rows, int64_t vocab, DType dtype) {
  const int64_t row_bytes = vocab * static_cast<int64_t>(dtype_size(dtype));
  return rows == 1 ? row_bytes > kClusterArgmaxMaxRowBytes : rows * row_bytes > kClusterArgmaxMaxBatchBytes;
}

/// cluster_size_for, and how the row's winners are sorted: by the leader alone up to
/// kLeaderSortMaxCandidates candidates, else across the cluster (finish_across_cluster), which
/// holds every CTA to the end. So where the batch takes more than one wave, whose next clusters
/// start on the SMs the other CTAs leave while the leader sorts, and in a cluster of one CTA,
/// the leader sorts them all: 16 x 256000 f32 K = 256 (9-CTA clusters, two waves) took 34.7 us
/// across the cluster against 29.6 at the leader (H100, one run). Under `automatic` a batch in more
/// waves than its K allows (max_cluster_waves), or a K = 1 batch that argmax_batch_takes_every_sm
/// names, takes no clusters; forced split_k keeps them, so that a row's bits never depend on its
/// batch.
ClusterTopkPlan cluster_plan_for(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                 SplitSizing sizing) {
  const bool per_batch = sizing == SplitSizing::per_batch;
  if (k == 1 && per_batch && argmax_batch_takes_every_sm(rows, vocab, dtype)) return kNoPlan;
  const ClusterLimits& limits = cluster_limits(device);
  ClusterTopkPlan plan = cluster_size_for(rows, vocab, dtype, k, limits, sizing);
  if (plan.ctas == 0) return kNoPlan;
  const bool one_wave = rows <= limits.resident[plan.ctas];
  // A size the probe refused (none resident) never runs under `automatic`, in any number of waves.
  if (per_batch && rows > max_cluster_waves(k) * limits.resident_for(k)[plan.ctas]) return kNoPlan;
  // Two K = 1 CTAs fit an SM, and the clusters of a small batch then share SMs: held one CTA an
  // SM, a batch that still runs in one wave streams over twice the SMs (4 rows of 32000-256000
  // 1.10-1.22x, 8 of 32000 1.21x; 1, 2 and 16-64 rows 0.99-1.02x; H200, one run). The bits do
  // not change.
  if (k == 1 && rows <= limits.resident_spread[plan.ctas]) plan.shared_bytes = limits.spread_bytes;
  plan.bounded = takes_bound(plan, k, rows, vocab);
  if (plan.bounded) plan.shared_bytes = reserved_shared_bytes(limits, ClusterKernel::bounded);
  plan.leader_sort_max = one_wave && plan.ctas > 1 ? kLeaderSortMaxCandidates : kGatherCapacity;
  return plan;
}

}  // namespace

TopkClusterBatch topk_cluster_batch(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                    SplitSizing sizing) {
  const ClusterTopkPlan plan = cluster_plan_for(rows, vocab, dtype, k, device, sizing);
  if (plan.ctas == 0) return {0, 0};
  const int64_t resident = cluster_limits(device).resident_for(k)[plan.ctas];
  return {plan.ctas, resident > 0 ? (rows + resident - 1) / resident : std::numeric_limits<int64_t>::max()};
}

void launch_topk_cluster(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                         SplitSizing sizing) {
  const ClusterTopkPlan plan = cluster_plan_for(problem.rows, problem.vocab, problem.dtype, problem.k, device, sizing);
  for_each_grid_row_run(problem.rows, device, [&](int64_t first_row, int64_t rows) {
    ClusterTopkPlan run = plan;
    run.first_row = first_row;
    KernelLaunch cluster = cluster_launch(plan.ctas, rows, launch_shared_bytes(plan, problem.k), launch.stream);
    cluster.programmatic(launch.programmatic);
    with_input_type(problem.dtype, [&](auto in) {
      using T = typename decltype(in)::type;
      with_held_vectors(plan.held_vectors, [&](auto vectors) {
        constexpr int kVectors = decltype(vectors)::value;
        if (problem.k > static_cast<int32_t>(kLeaderSortMaxCandidates))
          cluster(topk_cluster_kernel<T, kVectors, true>, problem, run);
        else if constexpr (kVectors == kHeldInShared)
          cluster(topk_cluster_kernel<T, kVectors, false>, problem, run);  // K > 1: cluster_plan_for
        else if (problem.k == 1)
          cluster(topk_cluster_argmax_kernel<T, kVectors>, problem, run);
        else if (plan.bounded && bound_warp_depth(static_cast<unsigned>(problem.k)) == 1)
          cluster(topk_cluster_bounded_kernel<T, kVectors, 1>, problem, run);
        else if (plan.bounded)
          cluster(topk_cluster_bounded_kernel<T, kVectors, kBoundedWarpDepth>, problem, run);
        else
          cluster(topk_cluster_kernel<T, kVectors, false>, problem, run);
      });
    });
  });
}

}  // namespace softk::kernels
