// A row's tokens in slots whose layout is set by the row's length alone, so that a sum taken in
// slot order has the same bits whatever the row's alignment in memory, the block's size or the
// batch around it: what softk::sample's sums over a whole row need (DESIGN.md: a row's token
// depends on its own logits, parameters, seed and offset only).
//  - Slot c is tokens [c L, (c + 1) L), L a multiple of a warp read (kSlotRead tokens), the
//    smallest that leaves at most kSlots slots.
//  - One warp visits a slot, a step at a time: at step j lane l holds the run of W tokens from
//    c L + (32 j + l) W (W tokens a 16-byte vector of T), kSlotLoads steps loaded at once.
//  - A run is one 16-byte load where the row is 16-byte aligned and the run whole, else W
//    scalar loads of the same tokens: the order of the sums is the same either way. (A row whose
//    bytes are not a multiple of 16, V = 50257 bf16, then reads scalars throughout, where
//    RowSegment's vectors read its body: slower, not measured. Two aligned vectors a run and a
//    byte permute would keep its order and its loads, reading at most 15 bytes either side.)
#pragma once

#include <math_constants.h>

#include <cstdint>

#include "kernels/element.cuh"

namespace softk::kernels {

/// Runs a lane has in flight in a slot's read.
constexpr int kSlotLoads = 8;
/// The most slots a row has.
constexpr int kSlots = 1024;

template <typename T>
struct RowSlots {
  static constexpr int kWidth = kVectorWidth<T>;
  /// Tokens a warp reads at once: kSlotLoads steps of 32 runs.
  static constexpr int64_t kSlotRead = int64_t{32} * kWidth * kSlotLoads;

  const T* data;
  int64_t length;
  int64_t slot_length;  ///< a multiple of kSlotRead
  int slots;
  bool aligned;  ///< the row starts on a 16-byte boundary: whole runs are vector loads

  __device__ RowSlots(const T* logits, int64_t vocab) : data(logits), length(vocab) {
    const int64_t reads = (vocab + kSlotRead - 1) / kSlotRead;
    slot_length = max(int64_t{1}, (reads + kSlots - 1) / kSlots) * kSlotRead;
    slots = static_cast<int>((vocab + slot_length - 1) / slot_length);
    aligned = reinterpret_cast<uintptr_t>(logits) % 16 == 0;
  }

  /// The run at token `first` (a multiple of kWidth): a vector load where it may, else scalar
  /// loads, the tokens past the row as -inf. Its count of tokens in the row goes to `count`.
  __device__ __forceinline__ RawVector load_run(int64_t first, int& count) const {
    const int64_t left = length - first;
    count = left <= 0 ? 0 : left < kWidth ? static_cast<int>(left) : kWidth;
    if (aligned && count == kWidth) return load_vector(reinterpret_cast<const RawVector*>(data + first));
    RawVector raw;
    T* elements = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) elements[e] = e < count ? data[first + e] : from_float<T>(-CUDART_INF_F);
    return raw;
  }
};

/// Visits slot `slot` with one warp, in token order, a step at a time: visit(raw, count, first)
/// gets each lane's run of the step (raw's first count elements are tokens first.., past the row
/// -inf; lane l's run after lane l - 1's) and returns true, the same in every lane, to stop.
/// Every lane calls visit the same number of times.
template <typename T, typename Visit>
__device__ __forceinline__ void visit_slot(const RowSlots<T>& s, int slot, int lane, Visit&& visit) {
  constexpr int W = RowSlots<T>::kWidth;
  const int64_t begin = int64_t{slot} * s.slot_length;
  const int64_t end = min(begin + s.slot_length, s.length);
  for (int64_t read = begin; read < end; read += RowSlots<T>::kSlotRead) {
    RawVector raw[kSlotLoads];
    int count[kSlotLoads];
#pragma unroll
    for (int u = 0; u < kSlotLoads; ++u) raw[u] = s.load_run(read + (int64_t{u} * 32 + lane) * W, count[u]);
#pragma unroll
    for (int u = 0; u < kSlotLoads; ++u)
      if (visit(raw[u], count[u], read + (int64_t{u} * 32 + lane) * W)) return;
  }
}

}  // namespace softk::kernels
