// The fused core's candidate list in shared memory: the 16-byte vectors of a run that hold a
// logit >= a threshold known to be at most the run's K-th logit, each with its offset in the
// run. Every key >= the threshold is in a listed vector. After the run the list is rewritten
// in place as those keys (to_keys), for the select.
//
// Why vectors and not keys: with a threshold taken from a prefix of 1/32 of the run, about one
// element in 160 passes at K = 50, and a warp step covers 512 elements, so most warp steps have
// a lane whose group passes; the warp waits for that lane. Listing keys cost it a test, a key
// and a store for each of its 16 elements; listing the passing vector costs one shared-memory
// atomic and two stores. Phase B of a 64M-token bf16 row (264 chunks, H200): 95,600 cycles a
// block listing keys, 67,000 listing vectors.
#pragma once

#include <cstdint>

#include "kernels/element.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/topk_key.cuh"

namespace softk::kernels {

/// kThreads threads share a list in kBytes of shared memory (16-byte aligned).
template <typename T, int kThreads, std::size_t kBytes>
struct CandidateVectors {
  static constexpr int kWidth = kVectorWidth<T>;
  /// Offset flag of a vector holding a single element (a run's unaligned head or tail), in
  /// element 0: offsets are < 2^31, as the vocabulary is.
  static constexpr uint32_t kSingle = 0x80000000u;
  static constexpr unsigned capacity = kBytes / (sizeof(RawVector) + sizeof(uint32_t));

  RawVector* vectors;
  uint32_t* offsets;    ///< offset in the run of each vector's element 0, | kSingle
  unsigned* count;      ///< may exceed capacity: then the list overflowed and is incomplete
  float threshold;      ///< logits >= threshold are candidates
  int64_t first_index;  ///< token id of the run's element 0

  __device__ __forceinline__ CandidateVectors(void* storage, unsigned* count_, float threshold_, int64_t first_index_)
      : vectors(static_cast<RawVector*>(storage)),
        offsets(reinterpret_cast<uint32_t*>(vectors + capacity)),
        count(count_),
        threshold(threshold_),
        first_index(first_index_) {}

  /// Keys that to_keys() can write over the list.
  static constexpr unsigned key_capacity() { return kBytes / sizeof(TopkKey); }

  /// Lists the vectors of a group that hold a logit >= the threshold. A group below it (the
  /// common case) costs one compare of its maximum. segment_first_index: the token id of the
  /// group's segment's element 0 (a segment of the run).
  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t segment_first_index) const {
    // NaN compares false: NaN rows are never read back. -inf >= -inf keeps a masked row's
    // candidates when the threshold is itself -inf.
    if (!(group.max >= threshold)) return;
    unsigned taken = 0;
#pragma unroll
    for (int n = 0; n < N; ++n) taken |= (run_max(group, n) >= threshold ? 1u : 0u) << n;
    // One slot claim for all of a lane's passing vectors: a claim for each made a warp run N
    // claim blocks in turn (the compiler's warp-aggregated atomic, ~25 instructions each), each
    // for the few lanes whose vector passed (ncu, 256 x 32000 fp32 at K = 1024: ~4 lanes a block).
    unsigned slot = atomicAdd(count, static_cast<unsigned>(__popc(taken)));
#pragma unroll
    for (int n = 0; n < N; ++n) {
      if ((taken >> n) & 1u) {
        if (slot < capacity) {
          vectors[slot] = narrow<T>(group.x[n]);
          const auto run_offset = static_cast<uint32_t>(segment_first_index - first_index + group.offset[n]);
          offsets[slot] = run_offset | (W == 1 ? kSingle : 0u);
        }
        ++slot;
      }
    }
  }

  /// Rewrites the list, which must not have overflowed, as the keys of its elements >= the
  /// threshold, over the same shared memory, and returns their count (more than key_capacity():
  /// they did not fit, and the keys are incomplete). key_count must be zero. Called by the whole
  /// block; the keys are visible to it on return.
  ///
  /// Keys, not vectors, are what the select visits up to eight times (once a radix pass), and a
  /// vector's keys are one to eight of its elements: visiting the vectors in every pass made the
  /// select phase 1.4-3x slower than this one conversion (64M-token rows, H200). A thread takes its vector's passing elements one at a time,
  /// picking the value with a select chain rather than branching per element position, so a
  /// warp stays converged: a vector mostly holds one.
  __device__ __forceinline__ unsigned to_keys(unsigned listed, unsigned* key_count) const {
    constexpr int kPerThread = (capacity + kThreads - 1) / kThreads;
    RawVector held[kPerThread];
    uint32_t held_offsets[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const unsigned i = threadIdx.x + j * kThreads;
      if (i < listed) {
        held[j] = vectors[i];
        held_offsets[j] = offsets[i];
      }
    }
    __syncthreads();  // every vector is in registers before the first key overwrites one
    TopkKey* keys = reinterpret_cast<TopkKey*>(vectors);
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      if (threadIdx.x + j * kThreads >= listed) break;
      float x[kWidth];
      widen<T>(held[j], x);
      unsigned passing = 0;
#pragma unroll
      for (int e = 0; e < kWidth; ++e) passing |= (x[e] >= threshold ? 1u : 0u) << e;
      if (held_offsets[j] & kSingle) passing &= 1u;
      const int64_t first = first_index + (held_offsets[j] & ~kSingle);
      unsigned slot = atomicAdd(key_count, static_cast<unsigned>(__popc(passing)));
      while (passing != 0) {
        const int e = __ffs(passing) - 1;
        passing &= passing - 1;
        float value = x[0];
#pragma unroll
        for (int i = 1; i < kWidth; ++i) value = i == e ? x[i] : value;
        if (slot < key_capacity()) keys[slot] = make_key(value, first + e);
        ++slot;
      }
    }
    __syncthreads();
    return *key_count;
  }

  /// The keys that to_keys() wrote.
  __device__ __forceinline__ const TopkKey* listed_keys() const { return reinterpret_cast<const TopkKey*>(vectors); }
};

}  // namespace softk::kernels
