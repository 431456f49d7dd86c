// Synchronisation inside a thread-block cluster that costs less than cooperative_groups'
// cluster.sync() (sm_90+).
//
// cluster.sync() is a barrier with release and acquire semantics at cluster scope, which sm_90
// implements as MEMBAR.ALL.GPU before the arrive (every memory operation of the thread, global
// ones included, made visible GPU-wide) and an L1 invalidation after the wait: ~660 cycles a
// barrier of 16 CTAs of 512 threads, where a barrier with no memory ordering takes ~270 (H200,
// back-to-back rounds of write, barrier, remote read; 2026-11-22). Three cheaper forms:
//  - cluster_sync_shared(): the barrier for shared memory each CTA wrote itself and others read
//    after it. Its fences order shared memory alone (MEMBAR.ALL.CTA): ~390 cycles.
//  - cluster_arrive_relaxed() and cluster_wait(): a barrier that orders no memory, which a CTA
//    whose shared memory others read takes before it exits, and which readies mailboxes.
//  - ClusterMailbox: data sent into another CTA's shared memory with st.async, whose bytes that
//    CTA's mbarrier counts. Only the receiver waits, and only for its own mail: no barrier.
// The first and the last keep no CTA alive for others: a CTA whose shared memory others still
// read or write may exit only after a barrier with them (compute-sanitizer's racecheck, too,
// knows no other way: remote atomics answered by a mailbox read to it as touching a CTA that
// may have exited).
#pragma once

#include <cstdint>

namespace softk::kernels {

/// The shared-window address of `pointer` (into shared memory), as PTX's shared-memory operands
/// take it. Any architecture.
__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

/// An mbarrier in a CTA's shared memory that counts the bytes other CTAs send into it with
/// send(): one phase a message. The receiver announces each message's size (expect), its
/// threads wait for the phase, then read the message as ordinary shared memory. A send may land
/// before the receiver's expect: the count goes below zero and the phase still waits for the
/// expect. Where the owner writes a message itself, it arrives instead of expecting.
struct ClusterMailbox {
  uint64_t barrier;

  /// One thread of the owner, before the cluster barrier after which anyone may send.
  /// cluster_sync_shared(), or cluster_arrive_relaxed() and cluster_wait(), suffice (the init
  /// fence is the one such a barrier needs). A phase
  /// completes after `arrivals` arrivals (expect, arrive, or other CTAs' arrive_expecting) and
  /// once every byte they announced has landed.
  __device__ __forceinline__ void init(unsigned arrivals = 1) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(&barrier)), "r"(arrivals) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }

  /// One thread of the owner, once a phase: the phase completes when `bytes` have landed.
  __device__ __forceinline__ void expect(unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(&barrier)),
                 "r"(bytes)
                 : "memory");
  }

  /// One thread of the owner, once a phase, where the owner wrote the message itself (ordinary
  /// stores, ordered before this by the writers' barrier with this thread): the phase completes.
  __device__ __forceinline__ void arrive() {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(&barrier)) : "memory");
  }

  /// Every thread of the owner that reads phase `phase`'s message (phases count from 0).
  __device__ __forceinline__ void wait(unsigned phase) {
    uint32_t done = 0;
    do {
      asm volatile(
          "{\n"
          ".reg .pred landed;\n"
          "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 landed, [%1], %2;\n"
          "selp.u32 %0, 1, 0, landed;\n"
          "}\n"
          : "=r"(done)
          : "r"(shared_address(&barrier)), "r"(phase & 1u)
          : "memory");
    } while (done == 0);
  }
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

/// A cluster barrier after which every CTA may read, remotely, what any thread of another CTA
/// wrote into that CTA's own shared memory before it. It orders nothing else: not global
/// memory, and not stores into another CTA's shared memory (those need cluster.sync() or a
/// mailbox). Every thread of every CTA must call it, as for cluster.sync().
__device__ __forceinline__ void cluster_sync_shared() {
  asm volatile(
      "fence.release.sync_restrict::shared::cta.cluster;\n"
      "barrier.cluster.arrive.relaxed.aligned;\n"
      "barrier.cluster.wait.aligned;\n"
      "fence.acquire.sync_restrict::shared::cluster.cluster;\n" ::
          : "memory");
}

/// The halves of a cluster barrier that orders no memory (~270 cycles where cluster.sync() takes
/// ~660): for keeping a CTA's shared memory alive until every other CTA's remote reads of it are
/// done. A read is done once an instruction has used its value, so every remote read must feed a
/// store (to shared or global memory, which no compiler moves past the arrive, and which cannot
/// issue before its data has arrived) before the reader arrives; a value used only in registers
/// could still be in flight. Nothing waits for the CTA's writes to global memory, as
/// cluster.sync()'s MEMBAR.ALL.GPU does where a CTA has just written its share of the row, and
/// between the halves a CTA may do work of its own. In place of the cluster.sync() before each
/// top-k cluster kernel exits: K = 1 1.02-1.09x, K = 256 and 1024 1.03-1.07x, K = 50 (no such
/// barrier) 1.00x (rows 1 and 8 of 32000 and 128256, H100, one run of two rounds; 8 x 32000 f32
/// K = 1024 8.82 -> 8.41 us). Every thread of every CTA must call both, as for cluster.sync().
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

/// `local` (this CTA's shared memory) mapped to the same place in CTA `rank`'s, as
/// shared::cluster operands take it.
__device__ __forceinline__ uint32_t remote_shared_address(const void* local, unsigned rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(local)), "r"(rank));
  return remote;
}

/// Stores `value` at `to` in CTA `rank`'s shared memory (`to`, aligned to its size, and `mailbox`
/// as laid out in this CTA's) and counts its bytes in that CTA's `mailbox`. No completion is
/// awaited here. Not for the sender's own shared memory: refused in a cluster of one CTA.
__device__ __forceinline__ void send(const uint4* to, uint4 value, const ClusterMailbox& mailbox, unsigned rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   remote_shared_address(to, rank)),
               "r"(value.x), "r"(value.y), "r"(value.z), "r"(value.w), "r"(remote_shared_address(&mailbox.barrier, rank))
               : "memory");
}
__device__ __forceinline__ void send(const unsigned long long* to, unsigned long long value,
                                     const ClusterMailbox& mailbox, unsigned rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];\n" ::"r"(
                   remote_shared_address(to, rank)),
               "l"(value), "r"(remote_shared_address(&mailbox.barrier, rank))
               : "memory");
}
__device__ __forceinline__ void send(const unsigned* to, unsigned value, const ClusterMailbox& mailbox, unsigned rank) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(
                   remote_shared_address(to, rank)),
               "r"(value), "r"(remote_shared_address(&mailbox.barrier, rank))
               : "memory");
}

/// Copies `bytes` (a multiple of 16; both places 16-byte aligned) from `from` in this CTA's shared
/// memory to `to` in CTA `rank`'s (laid out as this CTA's), counting them in that CTA's `mailbox`:
/// one bulk copy, and one count at the receiver's mailbox, where a store a key made one each
/// (the counts of one mailbox are taken in turn). The writes to `from` must be ordered before it
/// by fence_shared_for_bulk_copy() in each writer, then a barrier. No completion is awaited here.
__device__ __forceinline__ void send_bulk(const void* to, const void* from, unsigned bytes,
                                          const ClusterMailbox& mailbox, unsigned rank) {
  asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   remote_shared_address(to, rank)),
               "r"(shared_address(from)), "r"(bytes), "r"(remote_shared_address(&mailbox.barrier, rank))
               : "memory");
}

/// A writer's shared-memory stores made visible to bulk copies (the async proxy) issued after a
/// barrier that follows this.
__device__ __forceinline__ void fence_shared_for_bulk_copy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// One arrival at CTA `rank`'s `mailbox` (as laid out in this CTA's) that announces `bytes` more
/// to land there: the sender's own count of what it sends, where the receiver cannot know it.
/// Relaxed: what it announces is st.async's, which the bytes' count orders, not the arrival.
__device__ __forceinline__ void arrive_expecting(const ClusterMailbox& mailbox, unsigned rank, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%0], %1;\n" ::"r"(
                   remote_shared_address(&mailbox.barrier, rank)),
               "r"(bytes)
               : "memory");
}

#endif  // sm_90+

}  // namespace softk::kernels
