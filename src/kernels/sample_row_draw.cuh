// The first position of a whole row, in token order, whose running sum of weights passes a
// target (first_passing_in_row), and the draw over a row that it gives (draw_over_row): what
// softk::sample's passes over a row take (sample_nucleus.cu, and sample_from_ranked.cu past the
// candidates it sorts). Two reads of the row, in the slots of row_slots.cuh, by the row's team
// (row_team.cuh: a block, or a cluster of them):
//  1. a warp a slot, each summing its slot's weights with kSlotLoads runs in flight a lane, and
//     sending the sum to the team's first CTA;
//  2. there, after warp 0's scan of the slot sums, warp 0 re-reads the slot the target falls
//     in, a step of 32 runs at a time in token order.
// Why not scan_weights (sample_draw.cuh) over the row: its block scan a tile of 4096 positions
// waits a memory round trip and two barriers a tile, and the block has one tile in flight:
// ~100 us a pass over 128256 tokens on an H200, where these reads have every warp's loads out
// at once.
// The sums are in double and in an order set by the row's length alone (a lane's runs in
// sequence, the lanes down a fixed tree, the slots by warp 0), so the position is the same bits in
// every run, team, block size and batch. The re-read's running sums add the same weights in token
// order instead, so rounding may keep them at or below the target inside the slot the slot sums
// chose: then the slot's last weighted position is taken, as draw_in_order takes the last
// weighted one where no running sum passes.
#pragma once

#include <cstdint>

#include "kernels/row_slots.cuh"
#include "kernels/row_team.cuh"
#include "kernels/sample_draw.cuh"

namespace softk::kernels::sampling {

constexpr unsigned kNoSlot = ~0u;

struct RowDrawScratch {
  double slot_sum[kSlots];
  unsigned chosen;      ///< the slot read again, or kNoSlot where nothing weighs anything
  double carry;         ///< the running sum before it
  double target;
  long long position;   ///< the answer, -1 where nothing weighs anything
};

/// Warp 0's choice among the slot sums (slots of them): the first slot with weight whose
/// running sum passes target_of(total), or where rounding lets none, the last with weight; with
/// the running sum before it and the target. Lane l sums slots [l n, (l + 1) n) in sequence, n =
/// slots / 32 rounded up, then the lanes' sums are scanned by shuffles: an order set by the
/// slots alone. (Where n was 32 at any count, a row of 126 slots had lanes 0-3 alone sum them:
/// ~4,500 cycles against ~2,200 at 1 x 128256 fp32, by clock64 on an H200.)
template <typename TargetOf>
__device__ __forceinline__ void choose_slot(int slots, const TargetOf& target_of, int lane, RowDrawScratch& sc) {
  const int per_lane = (slots + 31) / 32;
  const int mine = lane * per_lane;
  double run = 0.0;
  for (int j = 0; j < per_lane && mine + j < slots; ++j) run += sc.slot_sum[mine + j];
  double inclusive = run;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const double up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  const double lanes_below = __shfl_up_sync(0xffffffffu, inclusive, 1);
  const double before = lane > 0 ? lanes_below : 0.0;
  const double target = target_of(__shfl_sync(0xffffffffu, inclusive, 31));
  double running = before;
  int passing = -1, last_weighted = -1;
  double passing_carry = 0.0, last_carry = 0.0;
  for (int j = 0; j < per_lane && mine + j < slots; ++j) {
    const double sum = sc.slot_sum[mine + j];
    if (sum > 0.0) {
      if (passing < 0 && running + sum > target) {
        passing = mine + j;
        passing_carry = running;
      }
      last_weighted = mine + j;
      last_carry = running;
    }
    running += sum;
  }
  const unsigned passing_lanes = __ballot_sync(0xffffffffu, passing >= 0);
  const unsigned weighted_lanes = __ballot_sync(0xffffffffu, last_weighted >= 0);
  const int source = passing_lanes != 0 ? __ffs(passing_lanes) - 1 : 31 - __clz(weighted_lanes);
  const bool take_passing = passing_lanes != 0;
  if (lane == source) {  // no lane where nothing weighs (weighted_lanes = 0, source = -1)
    sc.chosen = static_cast<unsigned>(take_passing ? passing : last_weighted);
    sc.carry = take_passing ? passing_carry : last_carry;
  }
  if (lane == 0) {
    sc.target = target;
    if (weighted_lanes == 0) sc.chosen = kNoSlot;
  }
}

/// Which CTAs of the team get first_passing_in_row's answer.
enum class PositionTo {
  every_cta,  ///< every thread of every CTA
  leader,     ///< rank 0's threads alone: the team's last use of the scratch (its other CTAs may exit)
};

/// The first position of [0, vocab) with weight_of(x, i) > 0 whose running sum of weights in
/// token order passes target_of(total), where rounding lets none pass, the last weighted
/// position of the slot the slot sums chose; -1 where no position weighs anything. weight_of
/// gives each logit x at position i of the row its fp32 weight (>= 0). Called by every thread of
/// the team, each CTA of kBlockThreads; `to` says which get the position (the others get -1).
template <int kBlockThreads, typename Team, typename T, typename WeightOf, typename TargetOf>
__device__ int64_t first_passing_in_row(const Team& team, const T* logits, int64_t vocab, const WeightOf& weight_of,
                                        const TargetOf& target_of, PositionTo to, RowDrawScratch& sc) {
  constexpr int W = RowSlots<T>::kWidth;
  const RowSlots<T> slots(logits, vocab);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const auto weights_of = [&](const RawVector& raw, int count, int64_t first, float (&w)[W]) {
    float x[W];
    widen<T>(raw, x);
#pragma unroll
    for (int e = 0; e < W; ++e) w[e] = e < count ? weight_of(x[e], first + e) : 0.0f;
  };
  // 1. Each slot's sum, a warp a slot, sent to the leader.
  for (int slot = team_warp<kBlockThreads>(team); slot < slots.slots; slot += team_warps<kBlockThreads>(team)) {
    double lane_sum = 0.0;
    visit_slot(slots, slot, lane, [&](const RawVector& raw, int count, int64_t first) {
      float w[W];
      weights_of(raw, count, first, w);
#pragma unroll
      for (int e = 0; e < W; ++e) lane_sum += w[e];
      return false;
    });
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) lane_sum += __shfl_down_sync(0xffffffffu, lane_sum, offset);
    if (lane == 0) team.at(sc.slot_sum, 0)[slot] = lane_sum;
  }
  team.sync();  // every slot summed at the leader
  if (team.rank() != 0) {
    if (to == PositionTo::leader) return -1;
    team.sync();  // the leader's answer sent
    return sc.position;
  }
  // 2. The slot the target falls in, then that slot again in token order, by warp 0.
  if (warp == 0) {
    choose_slot(slots.slots, target_of, lane, sc);
    __syncwarp();  // the choice written
    long long found = -1, last = -1;
    const unsigned chosen = sc.chosen;
    if (chosen != kNoSlot) {
      const double target = sc.target;
      double base = sc.carry;
      visit_slot(slots, static_cast<int>(chosen), lane, [&](const RawVector& raw, int count, int64_t first) {
        float w[W];
        weights_of(raw, count, first, w);
        double step_sum = 0.0;
#pragma unroll
        for (int e = 0; e < W; ++e) step_sum += w[e];
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
  __syncthreads();  // the answer written
  if (to == PositionTo::every_cta) {
    if (threadIdx.x > 0 && threadIdx.x < team.ctas())  // thread c sends it to CTA c
      *team.at(&sc.position, static_cast<int>(threadIdx.x)) = sc.position;
    team.sync();  // sent (the leader's threads have read it too: the scratch's next writes follow a sync)
  }
  return sc.position;
}

/// The draw over the whole row in token order, among the tokens whose key is at least `cut` and
/// whose weight is at least `min_weight`: the first whose running sum passes u x their total.
/// A token's weight is taken only where it may count: at or above the cut, and not more than a
/// factor of 2 below min_weight by its logit (floor_logit; exp2f's error is 2 ulp), as most of a
/// row's tokens are outside a nucleus or under min_p. Called by every thread of the team, the
/// scratch's last use; rank 0's threads get the token, the others -1.
template <int kBlockThreads, typename Team, typename T>
__device__ int64_t draw_over_row(const Team& team, const T* logits, int64_t vocab, TopkKey cut, float min_weight,
                                 const Weigher& weigh, double u, RowDrawScratch& sc) {
  // weigh(x) >= min_weight needs (x - max) k >= log2(min_weight); a logit one unit of that below
  // the bound is far outside rounding (min_weight 0, or a row whose largest is +inf: no floor).
  const float floor_logit = min_weight > 0.0f && isfinite(weigh.max)
                                ? weigh.max + (log2f(min_weight) - 1.0f) / weigh.k_exp
                                : -CUDART_INF_F;
  return first_passing_in_row<kBlockThreads>(
      team, logits, vocab,
      [&](float x, int64_t i) {
        if (x < floor_logit || make_key(x, i) < cut) return 0.0f;
        const float w = weigh(x);
        return w >= min_weight ? w : 0.0f;
      },
      [&](double total) { return u * total; }, PositionTo::leader, sc);
}

}  // namespace softk::kernels::sampling
