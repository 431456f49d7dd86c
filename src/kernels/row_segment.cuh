// A contiguous run of logits (a row, or a split-k chunk of one) cut for 16-byte vector loads:
// a scalar head up to the first 16-byte boundary, a body of whole vectors, a scalar tail.
// Any base alignment and any length work; only the body uses vector loads.
#pragma once

#include <cstdint>

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

/// Visits every element of `segment` once across `threads` cooperating threads, as
/// visit(const float (&x)[W], int64_t offset) with W = the vector width for the body and W = 1
/// for head and tail elements. UNROLL vector loads are issued before any is used, so that each
/// thread keeps several 16-byte loads in flight.
template <int UNROLL, typename T, typename Visit>
__device__ __forceinline__ void for_each_element(const RowSegment<T>& segment, int thread, int threads, Visit&& visit) {
  constexpr int W = RowSegment<T>::kWidth;
  for (int e = thread; e < segment.edges(); e += threads) {
    const int64_t offset = segment.edge_offset(e);
    const float x[1] = {to_float(segment.data[offset])};
    visit(x, offset);
  }
  const RawVector* body = segment.body();
  const int64_t vectors = segment.body_vectors;
  int64_t v = thread;
  for (; v + int64_t{UNROLL - 1} * threads < vectors; v += int64_t{UNROLL} * threads) {
    RawVector raw[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) raw[u] = load_vector(body + v + int64_t{u} * threads);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float x[W];
      widen<T>(raw[u], x);
      visit(x, segment.body_offset(v + int64_t{u} * threads));
    }
  }
  for (; v < vectors; v += threads) {
    float x[W];
    widen<T>(load_vector(body + v), x);
    visit(x, segment.body_offset(v));
  }
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
