// Host-side entry points of the top-k kernels. Plain C++: src/topk.cpp resolves the arguments
// and calls one of these.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device_info.hpp"
#include "kernels/kernel_launch.hpp"
#include "softk/types.hpp"

namespace softk::kernels {

struct TopkProblem {
  const void* logits;
  DType dtype;
  int64_t rows;
  int64_t vocab;
  int64_t row_stride;  ///< elements
  int32_t k;
  float k_exp;         ///< log2(e) / temperature
  bool log_probs;
  float* probs;        ///< dense [rows, k]
  int32_t* indices;    ///< dense [rows, k]
  int32_t* row_status; ///< nullable
};

enum class SplitSizing;

/// Fused top-k, k <= kMaxFastTopK: a warp per row where `warp_rows` and topk_warp_row_fits, a
/// block sorting the whole row where topk_sorted_row_fits, else the block-per-row core (at K = 1
/// a block's one-read argmax). No workspace. `sizing`: whether the core's list and prefix may
/// depend on the row count.
void launch_topk_fused(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                       bool warp_rows, SplitSizing sizing);
/// Whether a block per row reads its row once: the argmax at K = 1, spans at 1 < K <= 64
/// (takes_spans), and past K = 64 a whole-row sort, slotted seeds or vector maxima (rows of at
/// most 128 KB); else the fused core, which reads a prefix first and lists candidates as it
/// streams the rest.
bool topk_fused_reads_row_once(int64_t vocab, DType dtype, int32_t k);

/// The warp-per-row kernel (topk_warp_row.cu) serves K up to its in-warp sort's 64 keys, on rows
/// of at most kWarpRowMaxBytes. A warp's time grows with the row where a block's barely does:
/// past one wave of blocks (H100, one run of two rounds, 2048 and 8192 rows, K 1 and 50, against
/// a block per row) rows of 8000 tokens took it 1.25-1.39x fp32 (8192 x 8000 K = 50 252.3 -> 181.4
/// us) and 1.34-2.31x bf16, rows of 16000 1.24-1.51x bf16 (32 KB) but 0.80-0.96x fp32 (64 KB:
/// 8192 x 16000 K = 50 283.4 -> 356.4). So bytes bound it, not tokens. (The first design, a radix
/// select per row reading it about five times, took 1.05-2.14x a block's time at 16000 tokens.)
constexpr int32_t kWarpRowMaxK = 64;
constexpr int64_t kWarpRowMaxBytes = 32 * 1024;
bool topk_warp_row_fits(int64_t vocab, DType dtype, int32_t k);
void launch_topk_warp_rows(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch);

/// The whole-row sort (topk_sorted_row.cu) serves the K the warp per row does not, on rows of at
/// most 1024 tokens. Its network doubles with the row where the block core's phases barely
/// grow: at K = 256 it took rows of 1000 1.5-1.8x, of 2000 0.8-0.97x, of 4000 0.23-0.54x (H100).
constexpr int64_t kSortedRowMaxVocab = 1024;
bool topk_sorted_row_fits(int64_t vocab, int32_t k);
void launch_topk_sorted_rows(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch);

/// How split-k cuts a row into parts (the CTAs of its cluster, or its chunks), and how the fused
/// core lists a run's candidates and how long its prefix is (with_fused_core_shape,
/// block_fused_topk.cuh).
enum class SplitSizing {
  per_row,    ///< from V, K, the dtype and the device only: a row gets the same bits in any batch
  per_batch,  ///< also from the row count: a row of a larger batch may take fewer parts (narrower
              ///< clusters, or longer chunks), so the batch fills about one wave, and the fused
              ///< core counts the rows resident at once rather than a full wave of them
};

/// Split-k top-k, k <= kMaxFastTopK. A row that fits one thread-block cluster (topk_cluster_batch)
/// runs in one launch with no workspace (topk_cluster.cu); a longer one as a chunk kernel and a
/// merge kernel, with the workspace from the size query (topk_split_k.cu). The query takes the
/// sizing the launch will: under per_batch, a batch in more waves of clusters than its K allows
/// takes the two launches (topk_cluster_batch).
std::size_t topk_split_k_workspace_size(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                        SplitSizing sizing);
void launch_topk_split_k(const TopkProblem& problem, const DeviceInfo& device, void* workspace,
                         const LaunchContext& launch, SplitSizing sizing);

/// How split-k runs `rows` rows as one cluster a row (topk_cluster.cu): `ctas` a cluster, in
/// `waves` waves of them; both 0 where it takes the two launches instead. A row takes a cluster
/// where it fits the cluster's registers on this device (sm_90+), and, under per_batch sizing,
/// where the batch then runs in as many waves as its K allows (one; two at 64 < K <= 256, three at
/// K = 1) and, at K = 1, holds at most 4 MiB of logits (a lone row at most 768 KB). Waves are
/// counted as the kernel that K takes is resident (the K = 1 kernel holds twice the clusters at
/// once).
struct TopkClusterBatch {
  int ctas;
  int64_t waves;
};
TopkClusterBatch topk_cluster_batch(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                    SplitSizing sizing);
void launch_topk_cluster(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch,
                         SplitSizing sizing);

/// Any k: radix select + gather into the workspace, CUB segmented sort, decode.
std::size_t topk_radix_workspace_size(int64_t rows, int32_t k);
void launch_topk_radix(const TopkProblem& problem, void* workspace, cudaStream_t stream);

}  // namespace softk::kernels
