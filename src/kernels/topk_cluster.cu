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
// Two or three cluster barriers (two more a further level) and no workspace: nothing to zero,
// nothing to launch in between. Each DSMEM round trip is ~200 ns, so every remote read a step
// needs is issued before any is used. K = 1 (greedy decoding) needs no threshold and takes a
// kernel of its own: step 1 without the counts, then the leader merges every warp's largest key
// and (m, d).
#include <cooperative_groups.h>

#include <algorithm>
#include <array>
#include <limits>
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/cluster_signal.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kClusterThreads = 512;
/// 16 CTAs a cluster is past the portable limit of 8, so it is asked for per device; the
/// register capacity of a row doubles with it.
constexpr int kLargeCluster = 16;
constexpr int kPortableCluster = 8;
/// 16-byte vectors a thread holds. The largest holds 512 threads x 8 vectors = 16K fp32 (32K
/// bf16) elements a CTA, so 256K fp32 tokens fit a 16-CTA cluster.
constexpr int kMaxHeldVectors = 8;
/// The held-vectors count of a plan whose chunks are held in shared memory instead (SharedChunk).
constexpr int kHeldInShared = -1;
/// The most a CTA holds in shared memory: 32768 fp32 (64 a thread; 8 CTAs of 256000 fp32 a row
/// hold 32000), within the 227 KB of shared memory an sm_90 CTA may have, ClusterShared's ~68 KB
/// included.
constexpr std::size_t kMaxSharedChunkBytes = 128 * 1024;
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
struct ClusterTopkPlan {
  int ctas;                  ///< CTAs a row (the cluster size); 0: the row does not take this form
  int64_t chunk_length;      ///< elements a CTA (a multiple of 16: every chunk keeps the row's 16-byte phase)
  int held_vectors;          ///< 16-byte vectors a thread holds in registers (2, 4 or 8), or kHeldInShared
  /// K > 1: a CTA's chunk in shared memory where kHeldInShared, else 0 (after ClusterShared). K = 1:
  /// ClusterLimits::spread_bytes where the clusters spread one CTA an SM, else 0.
  std::size_t shared_bytes;
  unsigned leader_sort_max;  ///< the most candidates the leader sorts alone (finish_at_leader)
};


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

constexpr int kWarps = kClusterThreads / 32;

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

/// In a one-wave batch of clusters of 2 or more CTAs, up to this many candidates the leader sorts
/// them alone (finish_at_leader); more are ranked across the cluster (finish_across_cluster),
/// whose copies and last barrier cost ~1.7 us more than the leader's gather and rank sort at
/// K = 50 (1 x 128256 f32: 9.94 us against 8.17, H100), and save more than that once the
/// leader's sort is a network of 512 keys or more (K = 256: 11.45 -> 10.33 us; K = 1024: 29.54
/// us in two launches -> 14.10).
constexpr unsigned kLeaderSortMaxCandidates = 256;

/// Past this many candidates, where the threshold came at the first level, the cluster sorts
/// them in buckets (finish_in_buckets): K = 1024 on rows 1-8 of 32000-256000 1.03-1.08x against
/// ranking them across the cluster. At K = 256 (~350 candidates) the buckets ran 0.95-0.96x on
/// rows of 32000 (H200, one run each), so those rows keep the ranking.
constexpr unsigned kBucketSortMinCandidates = 512;

/// Whether a row's `candidates`, settled at the first level or not, are sorted in buckets by a
/// kernel built with the bucket sort (kBucketSort: for K > kLeaderSortMaxCandidates only, so
/// that the kernels for smaller K hold none of its code).
template <bool kBucketSort>
__device__ __forceinline__ bool sorts_in_buckets(unsigned candidates, bool first_level, unsigned leader_sort_max) {
  return kBucketSort && first_level && candidates > leader_sort_max && candidates > kBucketSortMinCandidates;
}

/// Past this K, `automatic` takes the cluster form only where the batch runs in one wave of
/// clusters (cluster_plan_for).
constexpr int32_t kMultiWaveClusterMaxK = 256;
/// A cluster runs on one GPC, whose share of the memory system bounds how fast it streams a row:
/// under `automatic`, up to kEverySmArgmaxMaxRows rows of K = 1 longer than this take split-k's two
/// launches, whose chunks stream over every SM, instead (1 x 256000 f32 5.30 -> 4.84 us, 1 x 201088
/// f32 4.92 -> 4.78; but 1 x 151936 f32 4.41 -> 4.62, and bf16 0.84-0.94x up to 256000 tokens;
/// H200, one run).
constexpr int64_t kClusterArgmaxMaxRowBytes = 768 * 1024;
constexpr int64_t kEverySmArgmaxMaxRows = 1;

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
  SoftmaxState warp_states[kWarps];  ///< this CTA's (m, d), a state a warp
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

/// A top-k kernel's ClusterShared lies at the start of its dynamic shared memory (past the 48 KB
/// that static shared memory may take), a SharedChunk's vectors after it.
constexpr std::size_t kClusterSharedBytes =
    (sizeof(ClusterShared) + kDynamicSharedAlignment - 1) / kDynamicSharedAlignment * kDynamicSharedAlignment;
static_assert(kClusterSharedBytes + kMaxSharedChunkBytes <= 227 * 1024, "a CTA's shared memory on sm_90");

/// The unaligned head and tail of a CTA's chunk: one scalar a thread, held in a register.
template <typename T>
struct ChunkEdges {
  RowSegment<T> segment;
  float edge;

  __device__ __forceinline__ ChunkEdges(const T* data, int64_t first_index, int64_t length)
      : segment(data, first_index, length), edge(0.0f) {}

  /// After the body's loads are issued, so that the edge's joins them in flight.
  __device__ __forceinline__ void load_edge() {
    if (threadIdx.x < segment.edges()) edge = to_float(segment.data[segment.edge_offset(threadIdx.x)]);
  }

  template <typename Visit>
  __device__ __forceinline__ void visit_edge(Visit&& visit) const {
    if (threadIdx.x < segment.edges()) {
      visit(single_element_group(edge, segment.edge_offset(threadIdx.x)));
    }
  }
};

/// A CTA's chunk of the row held in registers: body vectors tid + j x kClusterThreads
/// (coalesced), visited as they arrive.
template <typename T, int kVectors>
struct RegisterChunk : ChunkEdges<T> {
  RawVector raw[kVectors];

  __device__ __forceinline__ RegisterChunk(const T* data, int64_t first_index, int64_t length)
      : ChunkEdges<T>(data, first_index, length) {
    const RawVector* body = this->segment.body();
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t v = threadIdx.x + int64_t{j} * kClusterThreads;
      raw[j] = v < this->segment.body_vectors ? load_vector(body + v) : RawVector{};
    }
    this->load_edge();
  }

  __device__ __forceinline__ void land() const {}

  /// Visits the thread's elements as ElementGroups (the form accumulate() takes).
  template <typename Visit>
  __device__ __forceinline__ void for_each_group(Visit&& visit) const {
    this->visit_edge(visit);
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int64_t v = threadIdx.x + int64_t{j} * kClusterThreads;
      if (v < this->segment.body_vectors) {
        ElementGroup<1, kVectorWidth<T>> group;
        fill_runs<T>(group, raw + j);
        group.offset[0] = this->segment.body_offset(v);
        visit(group);
      }
    }
  }
};

/// A top-k kernel's dynamic shared memory: its ClusterShared, then (plan.shared_bytes) a
/// SharedChunk's vectors.
__device__ __forceinline__ unsigned char* dynamic_shared() {
  extern __shared__ __align__(kDynamicSharedAlignment) unsigned char memory[];
  return memory;
}

__device__ __forceinline__ ClusterShared& cluster_shared() {
  return *reinterpret_cast<ClusterShared*>(dynamic_shared());
}

/// Past ClusterShared at a kDynamicSharedAlignment boundary, so that a warp's 32 vectors are 4
/// shared-memory wavefronts, not 5 (208 bytes more of ClusterShared, when the chunk followed it
/// unaligned, took 8 x 256000 f32 K = 50 (9 CTAs, chunks in shared memory) from 12.03 to 13.21
/// us; aligned, 11.99; H200).
__device__ __forceinline__ RawVector* dynamic_shared_vectors() {
  return reinterpret_cast<RawVector*>(dynamic_shared() + kClusterSharedBytes);
}

/// Vectors a thread reads from a SharedChunk before visiting any.
constexpr int kSharedChunkUnroll = 4;

/// A CTA's chunk of the row held in shared memory, for chunks past a thread's registers. Thread
/// t copies body vectors t, t + kClusterThreads, ... and is the only thread to read them back,
/// so waiting for its own copies (land()) is all the synchronisation they need. Slower than
/// registers where both hold a chunk (0.80-0.99x at batch 1, H200: the fold waits for every
/// copy, where it starts on registers as their loads land), so only the narrow clusters' longer
/// chunks take it.
template <typename T>
struct SharedChunk : ChunkEdges<T> {
  RawVector* held;

  /// Issues the copies of the body into `storage`; they are in flight until land().
  __device__ __forceinline__ SharedChunk(const T* data, int64_t first_index, int64_t length, RawVector* storage)
      : ChunkEdges<T>(data, first_index, length), held(storage) {
    const RawVector* body = this->segment.body();
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < this->segment.body_vectors; v += kClusterThreads)
      copy_vector_async(held + v, body + v);
    this->load_edge();
  }

  __device__ __forceinline__ void land() const { wait_for_vector_copies(); }

  template <typename Visit>
  __device__ __forceinline__ void for_each_group(Visit&& visit) const {
    this->visit_edge(visit);
    for_each_body_vector<kSharedChunkUnroll>(
        this->segment, [&](int64_t v) { return held[v]; }, threadIdx.x, kClusterThreads, visit);
  }
};

template <typename T, int kVectors>
using HeldChunk = std::conditional_t<kVectors == kHeldInShared, SharedChunk<T>, RegisterChunk<T, kVectors>>;

/// Visits the key of every element a chunk holds.
template <typename Chunk, typename Visit>
__device__ __forceinline__ void for_each_held_key(const Chunk& held, Visit&& visit) {
  held.for_each_group([&](const auto& group) { visit_keys(group, held.segment.first_index, visit); });
}

/// Visits every held key at or above `prefix`. (Comparing the values first, as the SharedChunk
/// overload does, pushed the kernels holding 32 elements a thread in registers past 128
/// registers; forming the index from 32 bits rather than a 64-bit offset a vector measured no
/// faster.)
template <typename Chunk, typename Visit>
__device__ __forceinline__ void for_each_held_key_at_least(const Chunk& held, TopkKey prefix, Visit&& visit) {
  for_each_held_key(held, [&](TopkKey key) {
    if (key >= prefix) visit(key);
  });
}

/// The same for a chunk in shared memory: its 33-64 elements a thread make the scan
/// instruction-bound, so an element forms its key only once its value reaches the prefix's (a
/// necessary condition: key_threshold), a few percent of them.
template <typename T, typename Visit>
__device__ __forceinline__ void for_each_held_key_at_least(const SharedChunk<T>& held, TopkKey prefix, Visit&& visit) {
  const float floor = key_threshold(prefix);
  held.for_each_group([&](const auto& group) {
    visit_elements(group, held.segment.first_index, [&](float x, int64_t index) {
      if (x >= floor) {
        const TopkKey key = make_key(x, index);
        if (key >= prefix) visit(key);
      }
    });
  });
}

/// CTA `rank`'s chunk of `row`: plan.chunk_length tokens from rank x chunk_length, clipped to V
/// (a cluster's last CTAs may hold a short or an empty one). Its loads are in flight until
/// land().
template <typename T, int kVectors>
__device__ __forceinline__ HeldChunk<T, kVectors> hold_chunk(const TopkProblem& problem, const ClusterTopkPlan& plan,
                                                            int64_t row, unsigned rank) {
  // Clamped: a rank past the row's end holds nothing, and its pointer stays within the row.
  const int64_t begin = min(int64_t{rank} * plan.chunk_length, problem.vocab);
  const int64_t length = max(int64_t{0}, min(plan.chunk_length, problem.vocab - begin));
  const T* data = row_pointer<T>(problem.logits, row, problem.row_stride) + begin;
  if constexpr (kVectors == kHeldInShared)
    return SharedChunk<T>(data, begin, length, dynamic_shared_vectors());
  else
    return RegisterChunk<T, kVectors>(data, begin, length);
}

// The cluster steps exist from sm_90 on; an image built for an older GPU gets an empty kernel,
// which cluster_limits() never offers (it asks sm90_image_loaded()).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// Bin b summed over the cluster's CTAs. The loop is unrolled to the largest cluster so that
/// every remote load is issued before the first add: a rolled loop waits one DSMEM round trip
/// (~200 ns) per CTA.
__device__ __forceinline__ unsigned cluster_count(const cg::cluster_group& cluster, ClusterShared& s, unsigned b) {
  const unsigned ranks = cluster.num_blocks();
  unsigned counts[kLargeCluster];
#pragma unroll
  for (unsigned r = 0; r < kLargeCluster; ++r) counts[r] = r < ranks ? cluster.map_shared_rank(s.counting.local.counts, r)[b] : 0u;
  unsigned sum = 0;
#pragma unroll
  for (unsigned r = 0; r < kLargeCluster; ++r) sum += counts[r];
  return sum;
}

/// Fetches every warp's value of a per-warp array (`per_warp`, kWarps long in every CTA's shared
/// memory) into one warp of the leader: lane l gets slots [kPerLane l, kPerLane (l + 1)) of the
/// (rank, warp) order, `none` past the last CTA. Independent loads: one remote round trip for all.
template <int kPerLane, typename T>
__device__ __forceinline__ void gather_per_warp(const cg::cluster_group& cluster, T* per_warp, T (&out)[kPerLane],
                                                T none) {
  const unsigned slots = cluster.num_blocks() * kWarps;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const unsigned slot = (threadIdx.x % 32) * kPerLane + i;
    out[i] = slot < slots ? *cluster.map_shared_rank(&per_warp[slot % kWarps], slot / kWarps) : none;
  }
}
constexpr int kStatesPerLane = kLargeCluster * kWarps / 32;

/// The row's (m, d) from every warp state of the cluster (one warp of the leader; every lane
/// gets the same bits). Not a chain of pairwise merges, whose two exponentials a step form the
/// leader's longest dependency chain: the maximum first, then every state rescaled to it at
/// once, summed in a fixed order (each lane its slots in order, then a butterfly, whose two
/// partners add the same two numbers), so the bits never depend on scheduling.
__device__ SoftmaxState merge_row_state(const cg::cluster_group& cluster, SoftmaxState* warp_states, float k_exp) {
  SoftmaxState states[kStatesPerLane];
  gather_per_warp(cluster, warp_states, states, empty_state());
  float m = states[0].max;
#pragma unroll
  for (int i = 1; i < kStatesPerLane; ++i) m = fmaxf(m, states[i].max);
  m = warp_max(m);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kStatesPerLane; ++i) sum = __fadd_rn(sum, __fmul_rn(states[i].sum, rescale(states[i].max, m, k_exp)));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, offset));
  return {m, sum};
}

struct WalkResult {
  bool nan_row;
  BinThreshold cut;
  unsigned in_bin;  ///< keys in cut.bin
};

/// Value bits below a level-0 bin: bin b holds the values (ordered bits) [b, b + 1) << kBinValueBits.
constexpr int kBinValueBits = 32 - kBinBits;

/// Lane l's splitter between buckets l and l + 1 of `ranks` (one warp): about (l + 1) / ranks of
/// the row's `total` candidates lie at or above it. From the leader's last walk step, where bin
/// top - l held `count` keys and `cumulative` lie at or above its floor (`above` of them in the
/// bins of earlier steps): the bin where the (l + 1)-th share ends, cut in proportion inside it,
/// as if its keys were spread evenly over its values. Only the buckets' balance rests on this,
/// never the answer: whatever splitters the CTAs share, the buckets are ranges of keys.
__device__ uint32_t bucket_splitter(unsigned ranks, unsigned total, unsigned above, unsigned cumulative,
                                    unsigned count, int top) {
  const unsigned lane = threadIdx.x % 32;
  const unsigned target = (lane + 1) * total / ranks;
  int below = -1;  // the last lane whose bins hold fewer than `target` keys: a binary search over the lanes
  for (int step = 16; step > 0; step /= 2) {
    const unsigned reached = __shfl_sync(0xffffffffu, cumulative, below + step);
    if (reached < target) below += step;
  }
  const int last = below + 1;
  const unsigned reached = __shfl_sync(0xffffffffu, cumulative, last);
  const unsigned in_bin = __shfl_sync(0xffffffffu, count, last);
  const auto bin_end = [](int bin) {
    return static_cast<uint32_t>(min((static_cast<uint64_t>(bin) + 1) << kBinValueBits, uint64_t{0xFFFFFFFFu}));
  };
  if (target <= above) return bin_end(top);  // the share ends in an earlier step's bins
  const float share = __fdividef(static_cast<float>(target - (reached - in_bin)), static_cast<float>(in_bin));
  return bin_end(top - last) - static_cast<uint32_t>(share * static_cast<float>(1u << kBinValueBits));
}

/// The bucket of `key`: how many splitters lie above its value. Each term falls as the key
/// grows, so the buckets are ranges of keys, the largest in bucket 0, whatever the splitters.
__device__ __forceinline__ unsigned bucket_of(const ClusterShared& s, TopkKey key) {
  const auto value = static_cast<uint32_t>(key >> 32);
  unsigned bucket = 0;
#pragma unroll
  for (int i = 0; i < kLargeCluster; i += 4) {
    const uint4 cut = *reinterpret_cast<const uint4*>(&s.splitters[i]);
    bucket += (value < cut.x) + (value < cut.y) + (value < cut.z) + (value < cut.w);
  }
  return bucket;
}

/// Level 0 (warp 0 of the leader): the bin of the k-th largest key, walking the cluster's
/// counts down from the bin of the row's maximum, 32 bins a step (lane l reads bin top - l of
/// every CTA: one remote round trip a step). Logits put the K-th key within a few bins of the
/// maximum's, so this is one step where a full scan reads 4096 bins of every CTA; a row whose
/// maximum sits far above the rest (+inf) walks further. A NaN row (NaN keys lie outside the
/// walk) is reported before it.
template <bool kBucketSort>
__device__ WalkResult walk_from_max(const cg::cluster_group& cluster, ClusterShared& s, unsigned k) {
  SoftmaxState states[kStatesPerLane];
  gather_per_warp(cluster, s.warp_states, states, empty_state());
  float m = states[0].max;
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kStatesPerLane; ++i) {
    m = fmaxf(m, states[i].max);
    nan = nan || states[i].sum != states[i].sum;
  }
  if (__any_sync(0xffffffffu, nan)) return {true, {0, 0}, 0};
  m = warp_max(m);
  const unsigned lane = threadIdx.x % 32;
  unsigned above = 0;
  for (int top = static_cast<int>(key_bin(make_key(m, 0))); top >= 0; top -= 32) {
    const int bin = top - static_cast<int>(lane);
    const unsigned count = bin >= 0 ? cluster_count(cluster, s, static_cast<unsigned>(bin)) : 0u;
    const unsigned inclusive = warp_inclusive_sum(count);
    const unsigned reached = __ballot_sync(0xffffffffu, above + inclusive >= k);
    if (reached != 0) {
      const int first = __ffs(reached) - 1;
      const BinThreshold cut{static_cast<unsigned>(top - first), above + __shfl_sync(0xffffffffu, inclusive, first)};
      if constexpr (kBucketSort) {  // sent with the decision
        s.inbox.walk.counts[lane] = count;
        if (lane == 0) {
          s.inbox.walk.top = top;
          s.inbox.walk.above = above;
        }
      }
      return {false, cut, __shfl_sync(0xffffffffu, count, first)};
    }
    above += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  __trap();  // unreachable: a row without NaN has all its V >= k keys at or below its maximum's bin
}

/// Levels past the first (the whole leader CTA): the cluster's counts summed into `total`, then
/// scanned for the bin of the remaining-th largest matching key.
__device__ BinThreshold pull_and_scan(const cg::cluster_group& cluster, ClusterShared& s, unsigned remaining) {
  BinHistogram<kClusterThreads>& total = s.counting.total;
  for (unsigned b = threadIdx.x; b < kBins; b += kClusterThreads) total.counts[b] = cluster_count(cluster, s, b);
  return total.threshold(remaining);  // starts with a barrier: every sum is written
}

/// Sends the leader's inbox, where warp 0 of the leader composed the decision, to every other
/// CTA's, counted by its decision_mail (kDecisionBytes in 16-byte words, every store issued
/// before any completes), and marks the leader's own as arrived. (st.async into the sender's
/// own shared memory is refused in a cluster of one CTA.)
template <bool kBucketSort>
__device__ __forceinline__ void send_decision(const cg::cluster_group& cluster, ClusterShared& s) {
  constexpr unsigned kWords = kDecisionBytes<kBucketSort> / 16;
  const auto* words = reinterpret_cast<const uint4*>(&s.inbox);
  const unsigned lane = threadIdx.x % 32;
  for (unsigned i = lane; i < (cluster.num_blocks() - 1) * kWords; i += 32) {
    const unsigned word = i % kWords;
    send(words + word, words[word], s.decision_mail, 1 + i / kWords);
  }
  if (lane == 0) s.decision_mail.arrive();
}

/// The leader's step (the whole leader CTA, after the barrier that made every count visible):
/// find the digit of the remaining-th largest matching key, then fix the threshold or go one
/// level down, and send the decision to every CTA. Every remote read of the walk is done before
/// the decision leaves; warp 1's (the row's (m, d), read at level 0 while warp 0 walks) are
/// done by the next cluster barrier, which every path takes before a CTA exits.
template <bool kBucketSort>
__device__ void decide(const cg::cluster_group& cluster, ClusterShared& s, const LevelDecision& current, float k_exp) {
  LevelDecision next = current;
  if (current.level == 0) {
    if (threadIdx.x >= 64) return;  // warp 0 walks and sends the decision
    if (threadIdx.x >= 32) {
      // Warp 1 merges the row's (m, d) into its normalizer meanwhile, off the path every CTA waits on.
      const SoftmaxState merged = merge_row_state(cluster, s.warp_states, k_exp);
      if (threadIdx.x == 32) s.row_normalizer = Normalizer(merged, k_exp);
      return;
    }
    const WalkResult walk = walk_from_max<kBucketSort>(cluster, s, current.remaining);
    next.nan_row = walk.nan_row;
    next.prefix = bin_floor_key(walk.cut.bin);
    next.decided = TopkKey{kBins - 1} << digit_shift(0);
    next.candidates = walk.cut.at_or_above;
    next.done = walk.nan_row || next.candidates <= kGatherCapacity;
    next.remaining = current.remaining - (walk.cut.at_or_above - walk.in_bin);
    next.above = walk.cut.at_or_above - walk.in_bin;
  } else {
    const BinThreshold cut = pull_and_scan(cluster, s, current.remaining);  // its barrier: every remote read done
    if (threadIdx.x >= 32) return;
    const int shift = digit_shift(current.level);
    const unsigned above_bin = cut.at_or_above - s.counting.total.counts[cut.bin];
    next.prefix = current.prefix | (TopkKey{cut.bin} << shift);
    next.decided = current.decided | (TopkKey{kBins - 1} << shift);
    // Keys matching a level-4 prefix differ only in their low 4 bits, so at most 16 share that
    // level's bin and the count is at most K + 15: the search ends there at the latest (the
    // shift == 0 test only makes the bound visible to a reader).
    next.candidates = current.above + cut.at_or_above;
    next.done = next.candidates <= kGatherCapacity || shift == 0;
    next.remaining = current.remaining - above_bin;
    next.above = current.above + above_bin;
  }
  if (!next.done) ++next.level;
  if (threadIdx.x == 0) s.inbox.decision = next;
  __syncwarp();  // the message composed
  send_decision<kBucketSort>(cluster, s);
}

/// A CTA's `length` candidates, sorted, wherever block_sort_descending left them. Only pointer
/// arithmetic: `candidates` may be another CTA's, and nothing of it is read here.
__device__ __forceinline__ const TopkKey* sorted_run(const ClusterCandidates& candidates, unsigned length) {
  return sorted_into_ranked(length) ? candidates.ranked : candidates.keys;
}

/// Copies every CTA's sorted run into candidates.row, run after run (run_begin, from the lengths
/// every CTA wrote into s.run_lengths), and the leader's row state. Every remote load a thread
/// makes is issued before the first is stored: one DSMEM round trip for all.
__device__ void copy_runs(const cg::cluster_group& cluster, ClusterShared& s) {
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
__device__ void write_ranked_slice(const cg::cluster_group& cluster, const ClusterCandidates& c,
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

/// The row's status, from the leader's thread 0 at the end of its work (written earlier, it sits
/// on the path every CTA waits on: the leader's warp 0 sends keys too).
__device__ __forceinline__ void write_row_status(const TopkProblem& problem, int64_t row,
                                                 const Normalizer& normalizer) {
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);
}

/// Writes sorted[0, count) (the whole block) as the row's entries offset, offset + 1, ...: those
/// that fall below K.
__device__ __forceinline__ void write_sorted_keys(const TopkKey* sorted, unsigned count, unsigned offset,
                                                  const Normalizer& normalizer, const TopkProblem& problem,
                                                  int64_t row) {
  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  for (unsigned j = threadIdx.x; j < count && offset + j < static_cast<unsigned>(problem.k); j += kClusterThreads)
    write_topk_entry(sorted[j], normalizer, problem.log_probs, probs + offset + j, indices + offset + j);
}

/// Appends every held key at or above `prefix` to keys[0, *count) (this CTA's, or the leader's).
template <typename Chunk>
__device__ __forceinline__ void send_candidates(const Chunk& held, TopkKey prefix, unsigned* count, TopkKey* keys) {
  // The decision bounded the cluster's count by kGatherCapacity.
  append_keys_at_least(
      prefix, [&](auto&& visit) { for_each_held_key_at_least(held, prefix, visit); }, count, keys, kGatherCapacity);
}

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

/// Step 4 for more candidates, where the threshold came at the first level: every CTA sends its
/// keys at or above it to the CTA whose bucket holds them (bucket_of: the leader's splitters cut
/// the row's candidates into one range of keys a CTA), sorts what it received, and writes it at
/// its bucket's offset in the row, the candidates of the buckets before it.
template <typename Chunk>
__device__ void finish_in_buckets(const cg::cluster_group& cluster, ClusterShared& s, const Chunk& held,
                                  const LevelDecision& decision, const TopkProblem& problem, int64_t row) {
  ClusterCandidates& candidates = s.candidates;
  const unsigned ranks = cluster.num_blocks();
  if (threadIdx.x < 32) {  // the splitters, from the leader's walk step (the same bits in every CTA)
    const WalkStep& walk = s.inbox.walk;
    const unsigned count = walk.counts[threadIdx.x];
    const uint32_t splitter = bucket_splitter(ranks, decision.candidates, walk.above,
                                              walk.above + warp_inclusive_sum(count), count, walk.top);
    if (threadIdx.x < kLargeCluster) s.splitters[threadIdx.x] = threadIdx.x + 1 < ranks ? splitter : 0u;
  }
  // The keys are staged here first, then one remote atomic a bucket claims their room in its
  // owner: a remote atomic a key, serialised on each owner's counter, cost ~1.4 us at K = 1024
  // (H200).
  send_candidates(held, decision.prefix, &s.staged, candidates.row);
  __syncthreads();
  const unsigned staged = min(s.staged, kGatherCapacity);
  TopkKey keys[kGatheredPerThread];
  unsigned places[kGatheredPerThread];  // bucket << 16 | slot in this CTA's part of the bucket
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < staged) {
      keys[i] = candidates.row[j];
      const unsigned bucket = bucket_of(s, keys[i]);
      places[i] = bucket << 16 | atomicAdd(&s.bucket_sizes[bucket], 1u);
    }
  }
  __syncthreads();
  if (threadIdx.x < ranks && s.bucket_sizes[threadIdx.x] != 0)
    s.bucket_starts[threadIdx.x] = atomicAdd(cluster.map_shared_rank(&s.gathered, threadIdx.x), s.bucket_sizes[threadIdx.x]);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGatheredPerThread; ++i) {
    const unsigned j = threadIdx.x + i * kClusterThreads;
    if (j < staged) {
      const unsigned bucket = places[i] >> 16;
      const unsigned slot = s.bucket_starts[bucket] + (places[i] & 0xFFFFu);
      if (slot < kGatherCapacity) cluster.map_shared_rank(candidates.keys, bucket)[slot] = keys[i];
    }
  }
  cluster.sync();  // every key in its bucket
  // The offset and the row's normalizer: one remote round trip, taken by the last warp, which
  // has no part in the sort of a bucket of up to 512 keys.
  if (threadIdx.x >= kClusterThreads - 32) {
    const unsigned lane = threadIdx.x % 32;
    const unsigned rank = cluster.block_rank();
    const unsigned before = lane < rank ? *cluster.map_shared_rank(&s.gathered, lane) : 0u;
    const bool copies_state = lane == 31 && rank != 0;
    Normalizer row_normalizer{};
    if (copies_state) row_normalizer = *cluster.map_shared_rank(&s.row_normalizer, 0);
    const unsigned offset = warp_sum(before);
    if (lane == 0) s.bucket_offset = offset;
    if (copies_state) s.row_normalizer = row_normalizer;
  }
  const unsigned count = min(s.gathered, kGatherCapacity);
  const TopkKey* sorted = block_sort_descending<kClusterThreads>(candidates.keys, count, candidates.ranked);
  const Normalizer normalizer = s.row_normalizer;
  write_sorted_keys(sorted, count, s.bucket_offset, normalizer, problem, row);
  if (cluster.block_rank() == 0) write_row_status(problem, row, normalizer);
  // No CTA exits while another may still read its count. (A split arrive before the sort, as in
  // finish_across_cluster, had compute-sanitizer racecheck report the remote key stores against
  // the sort's reads, ordered though they are by the barrier before it.)
  cluster_arrive_relaxed();
  cluster_wait();
}

#endif  // sm_90+

/// Steps 1-4 for K > 1. kBucketSort: built with finish_in_buckets, for K > kLeaderSortMaxCandidates.
template <typename T, int kVectors, bool kBucketSort>
__global__ void __launch_bounds__(kClusterThreads, 1)
    topk_cluster_kernel(TopkProblem problem, ClusterTopkPlan plan) {
#if __CUDA_ARCH__ >= 900
  ClusterShared& s = cluster_shared();
  enter_after_previous_grid();
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const bool leader = rank == 0;
  const int64_t row = blockIdx.y;
  const auto k = static_cast<unsigned>(problem.k);

  const HeldChunk<T, kVectors> held = hold_chunk<T, kVectors>(problem, plan, row, rank);

  s.counting.local.clear();
  if (threadIdx.x == 0) {
    s.gathered = s.staged = 0;
    s.decision_mail.init();
    if (!leader) s.decision_mail.expect(kDecisionBytes<kBucketSort>);
  }
  if (kBucketSort && threadIdx.x < kLargeCluster) s.bucket_sizes[threadIdx.x] = 0;
  __syncthreads();  // counters zeroed before the adds (and before the first cluster barrier)
  held.land();

  SoftmaxState state = empty_state();
  held.for_each_group([&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    s.counting.local.add_values(group);
  });
  // A state a warp, merged by the leader later: no block-wide reduction (two barriers and a
  // serial merge) in front of the first cluster barrier.
  state = warp_reduce(state, problem.k_exp);
  if (threadIdx.x % 32 == 0) s.warp_states[threadIdx.x / 32] = state;

  LevelDecision decision{};
  decision.remaining = k;
  for (unsigned level = 0;; ++level) {
    cluster_sync_shared();  // every count and warp state of the cluster visible, every mailbox ready
    if (leader) decide<kBucketSort>(cluster, s, decision, problem.k_exp);
    s.decision_mail.wait(level);  // sent after the leader's last read of the counts
    decision = s.inbox.decision;
    if (decision.done) break;
    if (threadIdx.x == 0 && !leader) s.decision_mail.expect(kDecisionBytes<kBucketSort>);  // the next level's
    // The leader read the counts before it sent the decision, but racecheck sees no order
    // between those reads and the clear but a barrier (taken only where winners tie in a bin).
    cluster.sync();
    s.counting.local.clear();
    __syncthreads();
    const int shift = digit_shift(decision.level);
    for_each_held_key(held, [&](TopkKey key) {
      if ((key & decision.decided) == decision.prefix)
        atomicAdd(&s.counting.local.counts[static_cast<unsigned>(key >> shift) & (kBins - 1)], 1u);
    });
  }

  if (decision.nan_row) {  // cluster-uniform; the row's normalizer says has_nan too
    cluster.sync();  // the leader's reads of the warp states done, its normalizer written
    if (!leader) return;
    write_row_status(problem, row, s.row_normalizer);
    write_nan_row<kClusterThreads>(k, problem.probs + row * problem.k, problem.indices + row * problem.k);
    return;
  }

  if (decision.candidates <= plan.leader_sort_max)
    finish_at_leader(cluster, s, held, decision, problem, row);
  else if (sorts_in_buckets<kBucketSort>(decision.candidates, decision.level == 0, plan.leader_sort_max))
    finish_in_buckets(cluster, s, held, decision, problem, row);
  else
    finish_across_cluster(cluster, s, held, decision, problem, row);
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
  __shared__ SoftmaxState warp_states[kWarps];
  __shared__ TopkKey warp_best[kWarps];
  enter_after_previous_grid();
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank();
  const int64_t row = blockIdx.y;

  const HeldChunk<T, kVectors> held = hold_chunk<T, kVectors>(problem, plan, row, rank);
  held.land();

  SoftmaxState state = empty_state();
  RunningArgmax argmax;
  held.for_each_group([&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    argmax.offer(group, held.segment.first_index);
  });
  state = warp_reduce(state, problem.k_exp);
  TopkKey best = warp_max(argmax.best);
  if (threadIdx.x % 32 == 0) {
    warp_states[threadIdx.x / 32] = state;
    warp_best[threadIdx.x / 32] = best;
  }
  cluster_sync_shared();  // every warp's result visible

  SoftmaxState row_state{};
  if (rank == 0 && threadIdx.x < 32) {
    TopkKey keys[kStatesPerLane];
    gather_per_warp(cluster, warp_best, keys, kEmptyKey);  // issued before the states' loads wait
    row_state = merge_row_state(cluster, warp_states, problem.k_exp);
    best = keys[0];
#pragma unroll
    for (int i = 1; i < kStatesPerLane; ++i) best = max(best, keys[i]);
    best = warp_max(best);
  }
  cluster_arrive_relaxed();  // the leader's remote reads done: no CTA's shared memory is read after this
  if (rank == 0 && threadIdx.x == 0) write_argmax_row(problem, row, row_state, best);
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
  registers,     ///< ClusterShared, the chunk in registers
  shared_chunk,  ///< ClusterShared, then the chunk
};

/// A CTA's dynamic shared memory in the kernel that runs `plan` at `k`.
std::size_t launch_shared_bytes(const ClusterTopkPlan& plan, int32_t k) {
  return k == 1 ? plan.shared_bytes : kClusterSharedBytes + plan.shared_bytes;
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
      if (kind == ClusterKernel::argmax)
        SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(limits.spread_bytes)));
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

/// cluster_size_for, and how the row's winners are sorted: by the leader alone up to
/// kLeaderSortMaxCandidates candidates, else across the cluster (finish_across_cluster), which
/// holds every CTA to the end. So where the batch takes more than one wave, whose next clusters
/// start on the SMs the other CTAs leave while the leader sorts, and in a cluster of one CTA,
/// the leader sorts them all: 16 x 256000 f32 K = 256 (9-CTA clusters, two waves) took 34.7 us
/// across the cluster against 29.6 at the leader (H100, one run). Past kMultiWaveClusterMaxK
/// there, `automatic` takes the two-launch form instead (K = 1024: 37.1 us, where ranking
/// across the cluster in two waves took 47.5; the leader's sort of ~1800 keys is unmeasured);
/// forced split_k keeps the cluster, so that a row's bits never depend on its batch. So too for
/// a lone long row at K = 1, which `automatic` streams over every SM (kClusterArgmaxMaxRowBytes).
ClusterTopkPlan cluster_plan_for(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                 SplitSizing sizing) {
  const bool over_every_sm = k == 1 && sizing == SplitSizing::per_batch && rows <= kEverySmArgmaxMaxRows &&
                                   vocab * static_cast<int64_t>(dtype_size(dtype)) > kClusterArgmaxMaxRowBytes;
  if (over_every_sm) return kNoPlan;
  const ClusterLimits& limits = cluster_limits(device);
  ClusterTopkPlan plan = cluster_size_for(rows, vocab, dtype, k, limits, sizing);
  if (plan.ctas == 0) return kNoPlan;
  const bool one_wave = rows <= limits.resident[plan.ctas];
  if (!one_wave && k > kMultiWaveClusterMaxK && sizing == SplitSizing::per_batch) return kNoPlan;
  // Two K = 1 CTAs fit an SM, and the clusters of a small batch then share SMs: held one CTA an
  // SM, a batch that still runs in one wave streams over twice the SMs (4 rows of 32000-256000
  // 1.10-1.22x, 8 of 32000 1.21x; 1, 2 and 16-64 rows 0.99-1.02x; H200, one run). The bits do
  // not change.
  if (k == 1 && rows <= limits.resident_spread[plan.ctas]) plan.shared_bytes = limits.spread_bytes;
  plan.leader_sort_max = one_wave && plan.ctas > 1 ? kLeaderSortMaxCandidates : kGatherCapacity;
  return plan;
}

}  // namespace

int64_t topk_cluster_waves(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                           SplitSizing sizing) {
  const ClusterTopkPlan plan = cluster_plan_for(rows, vocab, dtype, k, device, sizing);
  if (plan.ctas == 0) return 0;
  const int64_t resident = cluster_limits(device).resident_for(k)[plan.ctas];
  return resident > 0 ? (rows + resident - 1) / resident : std::numeric_limits<int64_t>::max();
}

void launch_topk_cluster(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                         SplitSizing sizing) {
  const ClusterTopkPlan plan = cluster_plan_for(problem.rows, problem.vocab, problem.dtype, problem.k, device, sizing);
  KernelLaunch cluster = cluster_launch(plan.ctas, problem.rows, launch_shared_bytes(plan, problem.k), launch.stream);
  cluster.programmatic(launch.programmatic);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    with_held_vectors(plan.held_vectors, [&](auto vectors) {
      constexpr int kVectors = decltype(vectors)::value;
      if (problem.k > static_cast<int32_t>(kLeaderSortMaxCandidates))
        cluster(topk_cluster_kernel<T, kVectors, true>, problem, plan);
      else if constexpr (kVectors == kHeldInShared)
        cluster(topk_cluster_kernel<T, kVectors, false>, problem, plan);  // K > 1: cluster_plan_for
      else if (problem.k == 1)
        cluster(topk_cluster_argmax_kernel<T, kVectors>, problem, plan);
      else
        cluster(topk_cluster_kernel<T, kVectors, false>, problem, plan);
    });
  });
}

}  // namespace softk::kernels
