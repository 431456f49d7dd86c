// The first position of a whole row, in token order, whose running sum of weights passes a
// target (first_passing_in_row), and the draw over a row that it gives (draw_over_row): what
// softk::sample's passes over a row take (sample_nucleus.cu, and sample_from_ranked.cu past the
// candidates it sorts). Two reads of the row:
//  1. the row in slots (its scalar head, chunks of its 16-byte body vectors, its scalar tail),
//     a warp a slot, each summing its slot's weights with kSlotLoads vectors in flight a lane;
//  2. after one block scan of the slot sums, one warp re-reads the slot the target falls in,
//     a step of 32 vectors at a time in token order.
// Why not scan_weights (sample_draw.cuh) over the row: its block scan a tile of 4096 positions
// waits a memory round trip and two barriers a tile, and the block has one tile in flight:
// ~100 us a pass over 128256 tokens on an H200, where these reads have every warp's loads out
// at once.
// The sums are in double and in one fixed order (a lane's elements in sequence, the lanes down a
// fixed tree, the slots by the block scan), so the position is the same bits in every run. The
// re-read's running sums add the same weights in token order instead, so rounding may keep them
// at or below the target inside the slot the slot sums chose: then the slot's last weighted
// position is taken, as draw_in_order takes the last weighted one where no running sum passes.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "kernels/row_segment.cuh"
#include "kernels/sample_draw.cuh"

namespace softk::kernels::sampling {

/// Body vectors a lane has in flight in a slot's read.
constexpr int kSlotLoads = 8;
/// A row's slots: its head, at most kSlots - 2 chunks of its body, its tail.
constexpr int kSlots = 1024;
constexpr unsigned kNoSlot = ~0u;

/// The shared memory of first_passing_in_row in a block of kBlockThreads.
template <int kBlockThreads>
struct RowDrawScratch {
  static_assert(kSlots % kBlockThreads == 0, "a thread takes whole slots in the scan");
  double slot_sum[kSlots];
  typename cub::BlockScan<double, kBlockThreads>::TempStorage scan;
  unsigned passing;        ///< the first slot whose running sum passes the target, or kNoSlot
  unsigned last_weighted;  ///< + 1: the last slot with weight, 0 where none has
  double carry;            ///< the running sum before the slot read again
  long long position;      ///< the answer, -1 where nothing weighs anything
};

/// A row cut into slots: slot 0 its head (fewer than a vector's elements before the first
/// 16-byte boundary), slots 1 .. slots - 2 its body in chunks of chunk_vectors vectors, slot
/// slots - 1 its tail.
template <typename T>
struct RowSlots {
  static constexpr int kWidth = kVectorWidth<T>;
  /// Vectors a warp reads at once: a step of 32 (a vector a lane) kSlotLoads times.
  static constexpr int64_t kRead = int64_t{32} * kSlotLoads;

  RowSegment<T> row;
  int64_t chunk_vectors;  ///< a multiple of kRead
  int slots;

  __device__ RowSlots(const T* logits, int64_t vocab) : row(logits, 0, vocab) {
    const int64_t reads = (row.body_vectors + kRead - 1) / kRead;
    const int64_t reads_a_chunk = max(int64_t{1}, (reads + kSlots - 3) / (kSlots - 2));
    chunk_vectors = reads_a_chunk * kRead;
    slots = static_cast<int>((row.body_vectors + chunk_vectors - 1) / chunk_vectors) + 2;
  }
};

/// Visits slot `slot` with one warp, in token order, a step at a time: visit(x, count, first)
/// gets each lane's elements of the step, x[0..count) at positions first.., lane l's after lane
/// l - 1's (a head or tail element a lane; a body vector a lane), and returns true (the same in
/// every lane) to stop. Every lane calls visit the same number of times.
template <typename T, typename Visit>
__device__ __forceinline__ void visit_slot(const RowSlots<T>& s, int slot, int lane, Visit&& visit) {
  constexpr int W = RowSlots<T>::kWidth;
  float x[W];
  if (slot == 0 || slot == s.slots - 1) {  // warp-uniform
    const int edge = slot == 0 ? s.row.head : s.row.tail;
    const int64_t first = (slot == 0 ? 0 : s.row.length - s.row.tail) + lane;
    const bool mine = lane < edge;
    x[0] = mine ? to_float(s.row.data[first]) : 0.0f;
    visit(x, mine ? 1 : 0, first);
    return;
  }
  const RawVector* body = s.row.body();
  const int64_t begin = int64_t{slot - 1} * s.chunk_vectors;
  const int64_t end = min(begin + s.chunk_vectors, s.row.body_vectors);
  for (int64_t read = begin; read < end; read += RowSlots<T>::kRead) {
    RawVector raw[kSlotLoads];
#pragma unroll
    for (int u = 0; u < kSlotLoads; ++u) {
      const int64_t v = read + int64_t{u} * 32 + lane;
      raw[u] = v < end ? load_vector(body + v) : RawVector{};
    }
#pragma unroll
    for (int u = 0; u < kSlotLoads; ++u) {
      const int64_t v = read + int64_t{u} * 32 + lane;
      widen<T>(raw[u], x);
      if (visit(x, v < end ? W : 0, s.row.body_offset(v))) return;
    }
  }
}

/// The first position of [0, vocab) with weight_of(x, i) > 0 whose running sum of weights in
/// token order passes target_of(total), where rounding lets none pass, the last weighted
/// position of the slot the slot sums chose; -1 where no position weighs anything. weight_of
/// gives each logit x at position i its fp32 weight (>= 0). Called by the whole block; ends on
/// a barrier.
template <int kBlockThreads, typename T, typename WeightOf, typename TargetOf>
__device__ int64_t first_passing_in_row(const T* logits, int64_t vocab, const WeightOf& weight_of,
                                        const TargetOf& target_of, RowDrawScratch<kBlockThreads>& sc) {
  constexpr int W = RowSlots<T>::kWidth;
  constexpr int kSlotsPerThread = kSlots / kBlockThreads;
  const RowSlots<T> slots(logits, vocab);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  // 1. Each slot's sum, a warp a slot.
  for (int slot = warp; slot < slots.slots; slot += kBlockThreads / 32) {
    double lane_sum = 0.0;
    visit_slot(slots, slot, lane, [&](const float (&x)[W], int count, int64_t first) {
#pragma unroll
      for (int e = 0; e < W; ++e)
        if (e < count) lane_sum += weight_of(x[e], first + e);
      return false;
    });
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) lane_sum += __shfl_down_sync(0xffffffffu, lane_sum, offset);
    if (lane == 0) sc.slot_sum[slot] = lane_sum;
  }
  if (threadIdx.x == 0) {
    sc.passing = kNoSlot;
    sc.last_weighted = 0;
  }
  __syncthreads();  // every slot summed, the choice reset
  // The slot the target falls in, by one scan of the slot sums: kSlotsPerThread a thread.
  const int mine = static_cast<int>(threadIdx.x) * kSlotsPerThread;
  double sums[kSlotsPerThread];
  double run = 0.0;
#pragma unroll
  for (int j = 0; j < kSlotsPerThread; ++j) {
    sums[j] = mine + j < slots.slots ? sc.slot_sum[mine + j] : 0.0;
    run += sums[j];
  }
  double before = 0.0, total = 0.0;
  cub::BlockScan<double, kBlockThreads>(sc.scan).ExclusiveSum(run, before, total);
  const double target = target_of(total);
  double running = before;
  int passing = -1, last_weighted = -1;
#pragma unroll
  for (int j = 0; j < kSlotsPerThread; ++j) {
    running += sums[j];
    if (sums[j] > 0.0) {
      if (passing < 0 && running > target) passing = mine + j;
      last_weighted = mine + j;
    }
  }
  if (passing >= 0) atomicMin(&sc.passing, static_cast<unsigned>(passing));
  if (last_weighted >= 0) atomicMax(&sc.last_weighted, static_cast<unsigned>(last_weighted) + 1);
  __syncthreads();
  const unsigned chosen = sc.passing != kNoSlot ? sc.passing : sc.last_weighted - 1;  // kNoSlot where none weighs
  if (chosen / kSlotsPerThread == threadIdx.x) {
    double carry = before;
    for (int j = 0; j < static_cast<int>(chosen % kSlotsPerThread); ++j) carry += sums[j];
    sc.carry = carry;
  }
  __syncthreads();  // the carry written
  // 2. The chosen slot again, by warp 0, in token order from the running sum before it.
  if (warp == 0) {
    long long found = -1, last = -1;
    if (chosen != kNoSlot) {
      double base = sc.carry;
      visit_slot(slots, static_cast<int>(chosen), lane, [&](const float (&x)[W], int count, int64_t first) {
        float w[W];
        double step_sum = 0.0;
#pragma unroll
        for (int e = 0; e < W; ++e) {
          w[e] = e < count ? weight_of(x[e], first + e) : 0.0f;
          step_sum += w[e];
        }
        double inclusive = step_sum;  // the lanes' running sum through this lane
#pragma unroll
        for (int offset = 1; offset < 32; offset *= 2) {
          const double up = __shfl_up_sync(0xffffffffu, inclusive, offset);
          if (lane >= offset) inclusive += up;
        }
        const double lanes_below = __shfl_up_sync(0xffffffffu, inclusive, 1);
        double running_sum = base + (lane > 0 ? lanes_below : 0.0);
        int hit = -1, weighted = -1;
#pragma unroll
        for (int e = 0; e < W; ++e) {
          running_sum += w[e];
          if (w[e] > 0.0f) {
            if (hit < 0 && running_sum > target) hit = e;
            weighted = e;
          }
        }
        const unsigned hits = __ballot_sync(0xffffffffu, hit >= 0);
        const unsigned weighted_lanes = __ballot_sync(0xffffffffu, weighted >= 0);
        if (hits != 0) {
          found = __shfl_sync(0xffffffffu, first + max(hit, 0), __ffs(hits) - 1);
          return true;
        }
        if (weighted_lanes != 0) last = __shfl_sync(0xffffffffu, first + max(weighted, 0), 31 - __clz(weighted_lanes));
        base += __shfl_sync(0xffffffffu, inclusive, 31);
        return false;
      });
    }
    if (lane == 0) sc.position = found >= 0 ? found : last;
  }
  __syncthreads();
  const int64_t position = sc.position;
  __syncthreads();  // sc free for the next call
  return position;
}

/// The draw over the whole row in token order, among the tokens whose key is at least `cut` and
/// whose weight is at least `min_weight`: the first whose running sum passes u x their total.
/// A token's weight is taken only where it may count: at or above the cut, and not more than a
/// factor of 2 below min_weight by its logit (floor_logit; exp2f's error is 2 ulp), as most of a
/// row's tokens are outside a nucleus or under min_p. Called by the whole block.
template <int kBlockThreads, typename T>
__device__ int64_t draw_over_row(const T* logits, int64_t vocab, TopkKey cut, float min_weight, const Weigher& weigh,
                                 double u, RowDrawScratch<kBlockThreads>& sc) {
  // weigh(x) >= min_weight needs (x - max) k >= log2(min_weight); a logit one unit of that below
  // the bound is far outside rounding (min_weight 0, or a row whose largest is +inf: no floor).
  const float floor_logit = min_weight > 0.0f && isfinite(weigh.max)
                                ? weigh.max + (log2f(min_weight) - 1.0f) / weigh.k_exp
                                : -CUDART_INF_F;
  return first_passing_in_row(
      logits, vocab,
      [&](float x, int64_t i) {
        if (x < floor_logit || make_key(x, i) < cut) return 0.0f;
        const float w = weigh(x);
        return w >= min_weight ? w : 0.0f;
      },
      [&](double total) { return u * total; }, sc);
}

}  // namespace softk::kernels::sampling
