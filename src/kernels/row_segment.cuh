// A contiguous run of logits (a row, or a split-k chunk of one) cut for 16-byte vector loads:
// a scalar head up to the first 16-byte boundary, a body of whole vectors, a scalar tail.
// Any base alignment and any length work; only the body uses vector loads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/element.cuh"

namespace softk::kernels {

template <typename T>
struct RowSegment {
  static constexpr int kWidth = kVectorWidth<T>;

  const T* data;          ///< first element of the segment
  int64_t first_index;    ///< index of data[0] within its row (the token id of data[0])
  int64_t length;
  int head;               ///< scalar elements before the first 16-byte boundary (< kWidth)
  int64_t body_vectors;   ///< whole vectors after the head
  int tail;               ///< scalar elements after the body (< kWidth)

  __device__ __forceinline__ RowSegment(const T* segment, int64_t first, int64_t n)
      : data(segment), first_index(first), length(n) {
    const auto misalignment = static_cast<int>(reinterpret_cast<uintptr_t>(segment) % 16);
    const int to_boundary = misalignment == 0 ? 0 : (16 - misalignment) / static_cast<int>(sizeof(T));
    head = static_cast<int>(to_boundary < n ? to_boundary : n);
    body_vectors = (n - head) / kWidth;
    tail = static_cast<int>(n - head - body_vectors * kWidth);
  }

  __device__ __forceinline__ const RawVector* body() const { return reinterpret_cast<const RawVector*>(data + head); }
  /// Offset within the segment of body vector v's first element.
  __device__ __forceinline__ int64_t body_offset(int64_t v) const { return head + v * kWidth; }
  /// Offset within the segment of edge element e, e < head + tail (head first, then tail).
  __device__ __forceinline__ int64_t edge_offset(int e) const { return e < head ? e : length - tail + (e - head); }
  __device__ __forceinline__ int edges() const { return head + tail; }
};

/// N runs of W consecutive elements of a segment, widened to fp32: run n is x[n][0..W) and
/// starts at element offset[n] of the segment. Visitors get a whole group at once so that they
/// can reduce it as a tree (one rescale, a shallow dependency chain) instead of one long chain.
template <int N, int W>
struct ElementGroup {
  static constexpr int kRuns = N;
  static constexpr int kWidth = W;
  float x[N][W];
  int64_t offset[N];
  float max;  ///< the largest of x by fmaxf's rule (NaN only where all are): set with x (fill_runs)
};

/// One level of a pairwise tree over v[0..Width): v[i] = op(v[i], v[i + ceil(Width / 2)]).
/// Levels recurse at compile time, so every index is a constant and v stays in registers.
template <int Width, typename V, int S, typename Op>
__device__ __forceinline__ void tree_level(V (&v)[S], Op op) {
  if constexpr (Width > 1) {
    constexpr int kHalf = (Width + 1) / 2;
#pragma unroll
    for (int i = 0; i < Width / 2; ++i) v[i] = op(v[i], v[i + kHalf]);
    tree_level<kHalf>(v, op);
  }
}

/// Reduces v[0..S) pairwise as a tree (depth ceil(log2 S)), overwriting v.
template <int S, typename V, typename Op>
__device__ __forceinline__ V tree_reduce(V (&v)[S], Op op) {
  tree_level<S>(v, op);
  return v[0];
}

/// The largest of a group's elements by fmaxf over the widened floats: for fp32 groups, for a
/// group filled element by element (the resident softmax pads its vectors with -inf so; fill_runs
/// over -inf vectors grew its spills, 152 -> 160 bytes a thread at 1024 threads), and for the
/// softmax passes, where the packed pairs of packed_pairs_max measured slower (softmax_passes.cuh).
template <int N, int W>
__device__ __forceinline__ float elements_max(const ElementGroup<N, W>& group) {
  float v[N * W];
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int i = 0; i < W; ++i) v[n * W + i] = group.x[n][i];
  return tree_reduce(v, [](float a, float b) { return fmaxf(a, b); });
}

/// The largest element of the vectors raw[0..N) of a 16-bit T, by fmaxf's rule (NaN only where
/// every element is NaN), compared as packed pairs (max.bf16x2 / max.f16x2 from sm_80, which drop
/// a NaN as fmaxf does; __hmax2_nan would keep it), only the last pair widened: 10 instructions
/// for a group of 16 bf16 elements where elements_max takes 15, in streams that are issue-bound
/// (bench/RESULTS.md, optimisation log).
template <typename T, int N>
__device__ __forceinline__ float packed_pairs_max(const RawVector* raw) {
  static_assert(sizeof(T) == 2, "16-bit elements, two a word");
  using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  Pair v[4 * N];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const uint32_t words[4] = {raw[n].x, raw[n].y, raw[n].z, raw[n].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) v[4 * n + i] = *reinterpret_cast<const Pair*>(&words[i]);
  }
  const Pair top = tree_reduce(v, [](Pair a, Pair b) { return __hmax2(a, b); });
  float pair[2];
  widen_pair<T>(*reinterpret_cast<const uint32_t*>(&top), pair);
  return fmaxf(pair[0], pair[1]);
}

/// Fills the runs of `group` with the widened vectors raw[0..N) of T, and its max. (The
/// offsets are the caller's.)
template <typename T, int N>
__device__ __forceinline__ void fill_runs(ElementGroup<N, kVectorWidth<T>>& group, const RawVector* raw) {
#pragma unroll
  for (int n = 0; n < N; ++n) widen<T>(raw[n], group.x[n]);
  if constexpr (sizeof(T) == 4) {
    group.max = elements_max(group);
  } else {
    group.max = packed_pairs_max<T, N>(raw);
  }
}

/// A group of the one element x at offset.
__device__ __forceinline__ ElementGroup<1, 1> single_element_group(float x, int64_t offset) {
  ElementGroup<1, 1> group;
  group.x[0][0] = x;
  group.offset[0] = offset;
  group.max = x;
  return group;
}

/// The maximum of run n of a group (n a compile-time constant in an unrolled loop, so the run
/// stays in registers).
template <int N, int W>
__device__ __forceinline__ float run_max(const ElementGroup<N, W>& group, int n) {
  float v[W];
#pragma unroll
  for (int i = 0; i < W; ++i) v[i] = group.x[n][i];
  return tree_reduce(v, [](float a, float b) { return fmaxf(a, b); });
}

/// Vectors per visited group: at most 16 elements, so that a group's fp32 values and the
/// visitor's temporaries fit the register budget of a 64-register kernel.
template <int UNROLL, int W>
constexpr int kGroupVectors = UNROLL * W > 16 ? 16 / W : UNROLL;

/// Visits a thread's round of UNROLL body vectors, raw[u] being vector v + u x threads, as
/// groups of kGroupVectors vectors.
template <int UNROLL, typename T, typename Visit>
__device__ __forceinline__ void visit_round(const RowSegment<T>& segment, const RawVector (&raw)[UNROLL], int64_t v,
                                            int threads, Visit&& visit) {
  constexpr int W = RowSegment<T>::kWidth;
  constexpr int G = kGroupVectors<UNROLL, W>;
  static_assert(UNROLL % G == 0, "UNROLL must split into whole groups");
#pragma unroll
  for (int g = 0; g < UNROLL; g += G) {
    ElementGroup<G, W> group;
    fill_runs<T>(group, raw + g);
#pragma unroll
    for (int u = 0; u < G; ++u) group.offset[u] = segment.body_offset(v + int64_t{g + u} * threads);
    visit(group);
  }
}

/// Visits a thread's last body vectors, v, v + threads, ... (fewer than a round), as
/// ElementGroup<1, W>, fetched by load(v) kTailLoads at a time: 1, 2, or all of them
/// (kTailLoads >= 3, at most UNROLL - 1 being left; each load past the body skipped).
template <int kTailLoads, typename T, typename Load, typename Visit>
__device__ __forceinline__ void visit_last_vectors(const RowSegment<T>& segment, Load&& load, int64_t v, int threads,
                                                   Visit&& visit) {
  constexpr int W = RowSegment<T>::kWidth;
  const int64_t vectors = segment.body_vectors;
  // Fetched one at a time, each waits a round trip (a 1/32 prefix of 256000 fp32 logits leaves
  // three a thread: phase A took 4.0 us there, 1.3 where it leaves one; H200 trace). Two at a
  // time where nothing else hides that latency and the registers allow (the fused core's
  // prefix: three at once spill in its 16-bit kernels); all at once (kStreamTailLoads) in the
  // streams that measured faster so. The fused core keeps the one- and two-load loops below
  // as they are: at its 64-register cap, reshaping them (the same loads, predicated) moved
  // its kernels by -17% to +8% from shape to shape (H200, 2026-11-23; bench/RESULTS.md).
  const auto visit_vector = [&](const RawVector& raw, int64_t at) {
    ElementGroup<1, W> group;
    fill_runs<T>(group, &raw);
    group.offset[0] = segment.body_offset(at);
    visit(group);
  };
  if constexpr (kTailLoads >= 3) {
    for (; v < vectors; v += int64_t{kTailLoads} * threads) {
      RawVector raw[kTailLoads];
#pragma unroll
      for (int u = 0; u < kTailLoads; ++u)
        if (v + int64_t{u} * threads < vectors) raw[u] = load(v + int64_t{u} * threads);
#pragma unroll
      for (int u = 0; u < kTailLoads; ++u) {
        if (v + int64_t{u} * threads >= vectors) break;
        visit_vector(raw[u], v + int64_t{u} * threads);
      }
    }
  } else {
    static_assert(kTailLoads == 1 || kTailLoads == 2, "one, two or all tail loads in flight");
    if constexpr (kTailLoads == 2) {
      for (; v + threads < vectors; v += 2 * int64_t{threads}) {
        const RawVector raw[2] = {load(v), load(v + threads)};
#pragma unroll
        for (int u = 0; u < 2; ++u) visit_vector(raw[u], v + int64_t{u} * threads);
      }
    }
    for (; v < vectors; v += threads) {
      const RawVector raw = load(v);
      visit_vector(raw, v);
    }
  }
}

/// Visits body vectors thread, thread + threads, ... of `segment`, each fetched by load(v)
/// (from global memory, or from a copy of the body held in shared memory). UNROLL vectors go
/// at a time (all fetched before any is used, so each thread keeps UNROLL 16-byte loads in
/// flight), visited as groups of kGroupVectors vectors; a thread's last (fewer than UNROLL)
/// vectors come as ElementGroup<1, W>, fetched kTailLoads at a time (visit_last_vectors).
template <int UNROLL, int kTailLoads = 1, typename T, typename Load, typename Visit>
__device__ __forceinline__ void for_each_body_vector(const RowSegment<T>& segment, Load&& load, int thread, int threads,
                                                     Visit&& visit) {
  const int64_t vectors = segment.body_vectors;
  int64_t v = thread;
  for (; v + int64_t{UNROLL - 1} * threads < vectors; v += int64_t{UNROLL} * threads) {
    RawVector raw[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) raw[u] = load(v + int64_t{u} * threads);
    visit_round(segment, raw, v, threads, visit);
  }
  visit_last_vectors<kTailLoads>(segment, load, v, threads, visit);
}

/// Visits the scalar head and tail of `segment` as ElementGroup<1, 1>, read from global memory.
template <typename T, typename Visit>
__device__ __forceinline__ void visit_edges(const RowSegment<T>& segment, int thread, int threads, Visit&& visit) {
  for (int e = thread; e < segment.edges(); e += threads) {
    const int64_t offset = segment.edge_offset(e);
    visit(single_element_group(to_float(segment.data[offset]), offset));
  }
}

/// Visits every element of `segment` once across `threads` cooperating threads, read from
/// global memory: the scalar head and tail as ElementGroup<1, 1>, the body as
/// for_each_body_vector groups.
template <int UNROLL, int kTailLoads = 1, typename T, typename Visit>
__device__ __forceinline__ void for_each_element(const RowSegment<T>& segment, int thread, int threads, Visit&& visit) {
  visit_edges(segment, thread, threads, visit);
  const RawVector* body = segment.body();
  for_each_body_vector<UNROLL, kTailLoads>(
      segment, [&](int64_t v) { return load_vector(body + v); }, thread, threads, visit);
}

/// Writes W consecutive outputs at out[0..W): one or two 16-byte stores when `aligned`
/// (the caller checked the output address), else W scalar stores.
template <typename OutT, int W>
__device__ __forceinline__ void store_outputs(OutT* out, const float (&p)[W], bool aligned) {
  constexpr int kPerStore = 16 / static_cast<int>(sizeof(OutT));
  if constexpr (W % kPerStore == 0) {
    if (aligned) {
#pragma unroll
      for (int s = 0; s < W / kPerStore; ++s) {
        RawVector raw;
        OutT* lanes = reinterpret_cast<OutT*>(&raw);
#pragma unroll
        for (int i = 0; i < kPerStore; ++i) lanes[i] = from_float<OutT>(p[s * kPerStore + i]);
        reinterpret_cast<RawVector*>(out)[s] = raw;
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < W; ++i) out[i] = from_float<OutT>(p[i]);
}

}  // namespace softk::kernels
