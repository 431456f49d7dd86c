// Radix select over unique 64-bit keys, most significant byte first, by a whole block or by one
// warp: finds the threshold t such that exactly K of the visited keys are >= t. The keys are
// never stored: each of the (at most 8) passes re-visits them through `for_each_key`, which can
// read registers (the fused kernel's buffers) or stream a row from memory (the exact paths).
#pragma once

#include <cstdint>

#include "kernels/topk_key.cuh"
#include "kernels/warp_collectives.cuh"

namespace softk::kernels {

struct RadixSelectStorage {
  unsigned histogram[256];
  TopkKey prefix;
  unsigned remaining;  ///< keys still to take from the chosen bin
  unsigned bin_count;  ///< keys in the chosen bin
};

/// The threads that select together: a whole block, synchronised by barriers.
template <int kThreads>
struct BlockTeam {
  static constexpr int kSize = kThreads;
  __device__ static unsigned rank() { return threadIdx.x; }
  __device__ static void sync() { __syncthreads(); }
};

/// One warp of a block, on its own (the other warps may select other rows, or have exited).
struct WarpTeam {
  static constexpr int kSize = 32;
  __device__ static unsigned rank() { return threadIdx.x % 32; }
  __device__ static void sync() { __syncwarp(); }
};

/// Every thread of the team calls this with the same k; every thread gets the same threshold.
/// kLowestShift: the low bits below it are not examined (32 when only the value half of the
/// keys matters), so the search takes at most (64 - kLowestShift) / 8 passes.
/// kValueBits: the keys' logits were widened from a type with that many significant bits
/// (kSignificantBits), so the value half's lower bits are copies of its inverted sign bit
/// (make_key) and a pass over a byte of them would find one bin: it is skipped (two of eight
/// passes for bf16, whose tied logits send the search on into the index bytes).
/// index_bits: every visited index is below 2^index_bits, so the index half's bytes above them
/// are all ones (the index is stored inverted) and are skipped too: a short row whose K-th logit
/// ties goes on into one or two index bytes, not four.
/// `for_each_key(visit)` must visit, across the team, the same set of unique keys on every call.
/// With fewer than k keys there is no k-th key: the result is kEmptyKey (every key passes).
template <typename Team, int kLowestShift = 0, int kValueBits = 32, typename ForEachKey>
__device__ TopkKey team_radix_select(unsigned k, ForEachKey&& for_each_key, RadixSelectStorage& storage,
                                     int index_bits = 32) {
  TopkKey prefix = 0;
  TopkKey decided = 0;  // mask of the bits fixed so far
  unsigned remaining = k;
  for (int shift = 56; shift >= kLowestShift; shift -= 8) {
    if (shift >= 32 && shift + 8 <= 64 - kValueBits) {
      // The passes above fixed the sign bit: the byte is 0x00 under a positive sign, 0xFF under
      // a negative one.
      prefix |= ((prefix >> 63) != 0 ? TopkKey{0} : TopkKey{0xFF}) << shift;
      decided |= TopkKey{0xFF} << shift;
      continue;
    }
    if (shift < 32 && shift >= index_bits) {
      prefix |= TopkKey{0xFF} << shift;
      decided |= TopkKey{0xFF} << shift;
      continue;
    }
    for (unsigned b = Team::rank(); b < 256; b += Team::kSize) storage.histogram[b] = 0;
    Team::sync();
    for_each_key([&](TopkKey key) {
      if ((key & decided) == prefix) atomicAdd(&storage.histogram[(key >> shift) & 0xFF], 1u);
    });
    Team::sync();
    if (Team::rank() < 32) {
      // Lane l owns bins 255-8l .. 248-8l, so a scan over lanes walks the bins from the top.
      const int lane = static_cast<int>(Team::rank());
      unsigned counts[8];
      unsigned lane_total = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        counts[i] = storage.histogram[255 - 8 * lane - i];
        lane_total += counts[i];
      }
      const unsigned inclusive = warp_inclusive_sum(lane_total);
      unsigned above = inclusive - lane_total;
      const unsigned total = __shfl_sync(0xffffffffu, inclusive, 31);
      if (shift == 56 && total < remaining) {  // fewer than k keys: no threshold
        if (lane == 0) {
          storage.prefix = kEmptyKey;
          storage.remaining = storage.bin_count = 0;
        }
      } else if (above < remaining && remaining <= inclusive) {  // exactly one lane
        bool found = false;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          if (!found && above + counts[i] >= remaining) {
            found = true;
            storage.prefix = prefix | (TopkKey(255 - 8 * lane - i) << shift);
            storage.remaining = remaining - above;
            storage.bin_count = counts[i];
          }
          above += found ? 0 : counts[i];
        }
      }
    }
    Team::sync();
    prefix = storage.prefix;
    remaining = storage.remaining;
    decided |= TopkKey{0xFF} << shift;
    // Taking the whole bin: the keys >= prefix (lower bits zero) are exactly the k wanted.
    if (remaining == storage.bin_count) break;
  }
  return prefix;
}

/// team_radix_select by the whole block.
template <int kThreads, int kLowestShift = 0, int kValueBits = 32, typename ForEachKey>
__device__ TopkKey block_radix_select(unsigned k, ForEachKey&& for_each_key, RadixSelectStorage& storage) {
  return team_radix_select<BlockTeam<kThreads>, kLowestShift, kValueBits>(k, for_each_key, storage);
}

}  // namespace softk::kernels
