// The CTAs that share one row in softk::sample's kernels: a block alone (RowByBlock), or a
// thread-block cluster (RowByCluster, sm_90+), whose CTAs reach each other's shared memory.
// The passes over a row are written once against this interface, so that a row at batch 1 can
// spread over up to 16 SMs and a row in a large batch keeps one block, with the same code and
// the same sums (sample_nucleus.cu).
//
// The rules the passes keep: no CTA touches another's shared memory before wait_for_start(); a
// CTA writes another's shared memory (at(), then a store) and the receiver reads it
// only after sync(); no CTA reads another's shared memory except in the span between two syncs in
// which its owner does not write it. So a CTA may exit after its last sync(): nothing is read
// from it later.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

namespace softk::kernels {

/// The most CTAs a row's team has: a cluster of 16, past the portable 8, where the device allows.
constexpr int kMostRowCtas = 16;

/// A row's one block.
struct RowByBlock {
  static constexpr bool kOneCta = true;
  __device__ __forceinline__ int rank() const { return 0; }
  __device__ __forceinline__ int ctas() const { return 1; }
  /// The row this block serves (a grid of one block a row).
  __device__ __forceinline__ int64_t row() const { return blockIdx.x; }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  /// RowByCluster's first barrier: nothing to wait for here.
  __device__ __forceinline__ void arrive_at_start() const {}
  __device__ __forceinline__ void wait_for_start() const {}
  template <typename X>
  __device__ __forceinline__ X* at(X* local, int) const {
    return local;
  }
};

/// A row's cluster: grid x is the cluster (its CTAs, rank by rank), grid y the row.
struct RowByCluster {
  static constexpr bool kOneCta = false;
  __device__ __forceinline__ int rank() const {
#if __CUDA_ARCH__ >= 900
    return static_cast<int>(cooperative_groups::this_cluster().block_rank());
#else
    return 0;
#endif
  }
  __device__ __forceinline__ int ctas() const {
#if __CUDA_ARCH__ >= 900
    return static_cast<int>(cooperative_groups::this_cluster().num_blocks());
#else
    return 1;
#endif
  }
  __device__ __forceinline__ int64_t row() const { return blockIdx.y; }
  /// Every thread of every CTA. Release and acquire at cluster scope: stores into other CTAs'
  /// shared memory before it are visible to their threads after it (a barrier that orders only
  /// a CTA's own shared memory, cluster_signal.cuh's, would not carry them). A cluster of one
  /// CTA takes a block barrier: cluster.sync() fences memory GPU-wide, ~660 cycles where
  /// __syncthreads() takes tens (cluster_signal.cuh).
  __device__ __forceinline__ void sync() const {
#if __CUDA_ARCH__ >= 900
    if (ctas() > 1) {
      cooperative_groups::this_cluster().sync();
      return;
    }
#endif
    __syncthreads();  // before sm_90 never launched as a cluster (launch_sample_nucleus)
  }
  /// The first barrier in halves, each called once by every thread of every CTA, the arrive
  /// as the kernel starts: no CTA may touch another's shared memory before that CTA has started
  /// (wait_for_start). It orders no memory.
  __device__ __forceinline__ void arrive_at_start() const {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
  }
  __device__ __forceinline__ void wait_for_start() const {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
  }
  /// `local`'s place in CTA `rank`'s shared memory.
  template <typename X>
  __device__ __forceinline__ X* at(X* local, int rank) const {
#if __CUDA_ARCH__ >= 900
    return cooperative_groups::this_cluster().map_shared_rank(local, static_cast<unsigned>(rank));
#else
    return local;
#endif
  }
};

/// A thread's warp among every warp of its team, and how many those are.
template <int kBlockThreads, typename Team>
__device__ __forceinline__ int team_warp(const Team& team) {
  return team.rank() * (kBlockThreads / 32) + static_cast<int>(threadIdx.x / 32);
}
template <int kBlockThreads, typename Team>
__device__ __forceinline__ int team_warps(const Team& team) {
  return team.ctas() * (kBlockThreads / 32);
}

}  // namespace softk::kernels
