// A streaming loop whose next round of loads is in flight while the current round is visited:
// each thread copies its next UNROLL body vectors global -> shared (cp.async, no registers)
// before it visits the round it holds, then takes that copy into registers.
//
// Why: for_each_body_vector loads a round, waits, visits it, and only then loads the next, so
// a thread has nothing in flight while it computes. The fused core's long stream (phase B) is
// bound by the loads in flight: ncu on 256 x 128256 fp32 at K = 50 (H200) had 69% of phase B's
// stall samples waiting on them, 0.78 eligible warps a scheduler and DRAM at 62% of peak, with
// the 64 registers a thread of two 512-thread blocks an SM leave no room for a second round.
// Here the second round lives in shared memory: UNROLL x 16 bytes a thread. It pays where a
// block has its SM to itself (1.03-1.16x); where two blocks share one, each already covers the
// other's visits, and the 32 KB a block comes out of L1 (0.96-0.99x; block_fused_topk.cuh).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/row_segment.cuh"

namespace softk::kernels {

/// Shared memory a block of kThreads threads needs for the staged stream.
template <int UNROLL, int kThreads>
constexpr std::size_t kStagedStreamBytes = std::size_t{UNROLL} * kThreads * sizeof(RawVector);

/// for_each_element over `segment`, with each round of the body fetched by the thread during
/// the round before. stage: kStagedStreamBytes<UNROLL, threads> of shared memory (16-byte
/// aligned) used by nothing else during the call; each thread touches only its own slots, so
/// no barrier is needed. A thread's last (fewer than UNROLL) vectors are loaded as in
/// for_each_body_vector, kTailLoads at a time.
template <int UNROLL, int kTailLoads = 1, typename T, typename Visit>
__device__ __forceinline__ void for_each_element_staged(const RowSegment<T>& segment, RawVector* stage, int thread,
                                                        int threads, Visit&& visit) {
  visit_edges(segment, thread, threads, visit);
  const RawVector* body = segment.body();
  const int64_t vectors = segment.body_vectors;
  const auto whole_round_at = [&](int64_t v) { return v + int64_t{UNROLL - 1} * threads < vectors; };
  const auto fetch_round = [&](int64_t v) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) copy_vector_async(&stage[u * threads + thread], body + v + int64_t{u} * threads);
  };
  int64_t v = thread;
  if (whole_round_at(v)) fetch_round(v);
  for (; whole_round_at(v); v += int64_t{UNROLL} * threads) {
    wait_for_vector_copies();
    RawVector raw[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) raw[u] = stage[u * threads + thread];
    // The slots are free once read: the next round is fetched while this one is visited.
    if (whole_round_at(v + int64_t{UNROLL} * threads)) fetch_round(v + int64_t{UNROLL} * threads);
    visit_round(segment, raw, v, threads, visit);
  }
  visit_last_vectors<kTailLoads>(
      segment, [&](int64_t w) { return load_vector(body + w); }, v, threads, visit);
}

}  // namespace softk::kernels
