// A CTA's chunk of a row in the cluster top-k kernel (topk_cluster.cu): loaded once, held in
// registers or (past what a thread holds in them) in shared memory after ClusterShared, and
// visited again at each step that needs its keys, where a streaming kernel would read the row
// again. Apart, so that the threshold and the finishes visit the keys one way wherever they lie.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/block_topk.cuh"
#include "kernels/cluster_shared.cuh"
#include "kernels/element.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {

/// 16-byte vectors a thread holds. The largest holds 512 threads x 8 vectors = 16K fp32 (32K
/// bf16) elements a CTA, so 256K fp32 tokens fit a 16-CTA cluster.
constexpr int kMaxHeldVectors = 8;
/// The held-vectors count of a plan whose chunks are held in shared memory instead (SharedChunk).
constexpr int kHeldInShared = -1;
/// The most a CTA holds in shared memory: 32768 fp32 (64 a thread; 8 CTAs of 256000 fp32 a row
/// hold 32000), within the 227 KB of shared memory an sm_90 CTA may have, ClusterShared's ~68 KB
/// included.
constexpr std::size_t kMaxSharedChunkBytes = 128 * 1024;

struct ClusterTopkPlan {
  int ctas;                  ///< CTAs a row (the cluster size); 0: the row does not take this form
  int64_t chunk_length;      ///< elements a CTA (a multiple of 16: every chunk keeps the row's 16-byte phase)
  int held_vectors;          ///< 16-byte vectors a thread holds in registers (2, 4 or 8), or kHeldInShared
  /// K > 1: a CTA's chunk in shared memory where kHeldInShared, else 0 (after ClusterShared). K = 1:
  /// ClusterLimits::spread_bytes where the clusters spread one CTA an SM, else 0.
  std::size_t shared_bytes;
  unsigned leader_sort_max;  ///< the most candidates the leader sorts alone (finish_at_leader)
  bool bounded = false;      ///< K > 1 runs topk_cluster_bounded_kernel (cluster_bounded.cuh)
  int64_t first_row = 0;     ///< the launch's first row (a grid row each: for_each_grid_row_run)
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

  __device__ __forceinline__ explicit ChunkEdges(const RowSegment<T>& chunk) : segment(chunk), edge(0.0f) {}

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

  __device__ __forceinline__ explicit RegisterChunk(const RowSegment<T>& chunk) : ChunkEdges<T>(chunk) {
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

  /// Visits every held key at or above `prefix`, where few are (a thread holding one): a mask of
  /// the vectors whose maximum reaches the prefix's value, then one copy of the per-element code
  /// for whichever vectors it names. Why: on the path every CTA of the bounded kernel waits on
  /// (its fill), the element-by-element visit, unrolled over every vector, took a thread ~1,300
  /// cycles for 16 fp32 elements and ~2,200 for 32, ~1,500 and ~2,900 where its code was not yet
  /// in the SM's instruction cache; this takes ~750 and ~900 either way (clock64, 1 x 128256 and
  /// 1 x 256000 at K = 50, H100), and the bounded kernel's 16-bit forms no longer spill.
  template <typename Visit>
  __device__ __forceinline__ void for_each_key_at_least(TopkKey prefix, Visit&& visit) const {
    constexpr int W = kVectorWidth<T>;
    const float floor = key_threshold(prefix);
    const auto visit_group = [&](const auto& group) {
      visit_keys_at_least(group, this->segment.first_index, prefix, floor, visit);
    };
    this->visit_edge(visit_group);
    unsigned reaching = 0;  // bit j: vector j's maximum reaches the floor
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      ElementGroup<1, W> group;
      fill_runs<T>(group, raw + j);
      const int64_t v = threadIdx.x + int64_t{j} * kClusterThreads;
      if (v < this->segment.body_vectors && group.max >= floor) reaching |= 1u << j;
    }
    while (reaching != 0) {
      const int j = __ffs(reaching) - 1;
      reaching &= reaching - 1;
      RawVector vector = raw[0];
#pragma unroll
      for (int c = 1; c < kVectors; ++c) vector = c == j ? raw[c] : vector;  // selects: raw stays in registers
      ElementGroup<1, W> group;
      fill_runs<T>(group, &vector);
      group.offset[0] = this->segment.body_offset(threadIdx.x + int64_t{j} * kClusterThreads);
      visit_group(group);
    }
  }
};

/// A top-k kernel's dynamic shared memory: its ClusterShared, then (plan.shared_bytes) a
/// SharedChunk's vectors.
__device__ __forceinline__ unsigned char* cluster_dynamic_shared() {
  extern __shared__ __align__(kDynamicSharedAlignment) unsigned char memory[];
  return memory;
}

__device__ __forceinline__ ClusterShared& cluster_shared() {
  return *reinterpret_cast<ClusterShared*>(cluster_dynamic_shared());
}

/// Past ClusterShared at a kDynamicSharedAlignment boundary, so that a warp's 32 vectors are 4
/// shared-memory wavefronts, not 5 (208 bytes more of ClusterShared, when the chunk followed it
/// unaligned, took 8 x 256000 f32 K = 50 (9 CTAs, chunks in shared memory) from 12.03 to 13.21
/// us; aligned, 11.99; H200).
__device__ __forceinline__ RawVector* dynamic_shared_vectors() {
  return reinterpret_cast<RawVector*>(cluster_dynamic_shared() + kClusterSharedBytes);
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
  __device__ __forceinline__ SharedChunk(const RowSegment<T>& chunk, RawVector* storage)
      : ChunkEdges<T>(chunk), held(storage) {
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

/// The same, where an element forms its key only once its value reaches the prefix's (a
/// necessary condition: key_threshold), a few percent of them: for scans that are
/// instruction-bound (a shared-memory chunk's 33-64 elements a thread). (A chunk in registers on
/// the bounded kernel's path takes RegisterChunk::for_each_key_at_least; the threshold kernels'
/// finishes keep the visit above, whose registers the vector mask would add to: their fp32
/// 8-vector forms went from 20-36 to 148-168 bytes of spills.)
template <typename Chunk, typename Visit>
__device__ __forceinline__ void for_each_held_key_at_least_by_value(const Chunk& held, TopkKey prefix, Visit&& visit) {
  const float floor = key_threshold(prefix);
  held.for_each_group(
      [&](const auto& group) { visit_keys_at_least(group, held.segment.first_index, prefix, floor, visit); });
}
template <typename T, typename Visit>
__device__ __forceinline__ void for_each_held_key_at_least(const SharedChunk<T>& held, TopkKey prefix, Visit&& visit) {
  for_each_held_key_at_least_by_value(held, prefix, visit);
}

/// CTA `rank`'s chunk of `row`: plan.chunk_length tokens from rank x chunk_length, clipped to V
/// (a cluster's last CTAs may hold a short or an empty one). Addresses only: no memory is read.
template <typename T>
__device__ __forceinline__ RowSegment<T> chunk_of_row(const TopkProblem& problem, const ClusterTopkPlan& plan,
                                                      int64_t row, unsigned rank) {
  // Clamped: a rank past the row's end holds nothing, and its pointer stays within the row.
  const int64_t begin = min(int64_t{rank} * plan.chunk_length, problem.vocab);
  const int64_t length = max(int64_t{0}, min(plan.chunk_length, problem.vocab - begin));
  return RowSegment<T>(row_pointer<T>(problem.logits, row, problem.row_stride) + begin, begin, length);
}

/// The chunk's loads, in flight until land().
template <typename T, int kVectors>
__device__ __forceinline__ HeldChunk<T, kVectors> hold_chunk(const RowSegment<T>& chunk) {
  if constexpr (kVectors == kHeldInShared)
    return SharedChunk<T>(chunk, dynamic_shared_vectors());
  else
    return RegisterChunk<T, kVectors>(chunk);
}

}  // namespace softk::kernels
