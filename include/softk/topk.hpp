// softk — exact top-k of softmax over the last dimension of [B, T, V] logits, on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "softk/types.hpp"

namespace softk {

/// How the top-k of a row is found. `automatic` lets the dispatcher choose.
///  - fused:        block per row; one read computes (m, d) and lists every logit at or above
///                  a threshold taken from a prefix of the row (a lower bound of the K-th), then
///                  selects and sorts the K winners from that list. A list that overflows sends
///                  the block over the row itself (inside the same block), so the result is
///                  exact on every input. K <= 1024. Rows of at most 32 KB (8192 fp32 tokens,
///                  16384 16-bit) at K <= 64 take a warp per row instead (the same
///                  bound-and-list scheme, sorted in registers, exact); under `automatic` past
///                  two rows an SM, and in smaller batches where a warp's row is as quick
///                  as a block's (at most 1024 tokens; at K = 1, 8 KB). Rows of at most 1024
///                  tokens at K > 64 are sorted whole by a block in shared memory, at any batch;
///                  longer rows of up to 128 KB at K > 64 take their candidates from one read
///                  (each thread's largest logits up to 32 KB, each 16-byte vector's maximum
///                  past it) and a re-read of the few places that hold the winners.
///  - radix_select: any K; radix-selects the K-th key of each row, gathers the winners and
///                  sorts them (CUB segmented sort). Slower, exact, the path for K > 1024.
///  - split_k:      few rows, long rows: each row is cut into chunks, one block each, and
///                  the chunks' (m, d) and candidate keys are merged into the row's top-K. On
///                  sm_90+, a row that fits the registers of one thread-block cluster (up to
///                  256K fp32 or 512K fp16 / bf16 tokens) runs in one launch, its chunks
///                  agreeing on a threshold through distributed shared memory (no workspace;
///                  under `automatic`, at 1 < K <= 64 and K > 256 only in a batch the clusters
///                  take in one wave, at 64 < K <= 256 in up to two, at K = 1 in up to three
///                  and a batch of up to 4 MiB; past SMs / 8 rows, only in clusters of 4 CTAs
///                  or more, or in one wave where a block per row would not read its row once).
///                  Otherwise a chunk writes its (m, d) and a list of keys holding its local
///                  top-K to the workspace, and a second launch merges them.
///                  K <= kMaxFastTopK.
enum class TopkAlgorithm : int32_t { automatic, fused, radix_select, split_k };

const char* to_string(TopkAlgorithm algorithm);

/// The largest K the fused and split-k paths serve; larger K goes to radix_select.
constexpr int32_t kMaxFastTopK = 1024;

struct TopkOptions {
  /// Probabilities are softmax(x / temperature); must be finite and > 0 (and >= 4.3e-39, so
  /// that log2(e) / temperature fits in fp32). The ranking itself is by the raw logits, so
  /// temperature never changes which tokens win.
  float temperature = 1.0f;
  /// Write log-probabilities (x - m)/T - log d instead of probabilities.
  bool log_probs = false;
  TopkAlgorithm algorithm = TopkAlgorithm::automatic;
  /// Optional device array of rows() int32 RowStatus values; nullptr to skip.
  int32_t* row_status = nullptr;
  /// On sm_90+, launch the op's kernels as programmatic dependent launches: each may be
  /// scheduled while the kernel before it on the stream is still running, and waits
  /// (griddepcontrol.wait) for it to complete before touching memory, so the results are the
  /// same; the launch latency hides behind that kernel (~1 us an op at batch 1). Kernels after
  /// this op that were launched the same way may start early too and must wait likewise. Ignored
  /// before sm_90 and by the radix_select path (CUB's sort launches the ordinary way).
  bool programmatic_launch = true;
};

/// Bytes of workspace topk() needs (0 for the fused path). It queries the current device (except
/// for a forced fused path): the split-k chunking depends on the SM count and the radix_select
/// path on CUB's sort scratch. For `automatic`, a workspace sized for `rows` rows also serves
/// every smaller row count with the same V and K (the dispatcher picks split-k for few rows),
/// so a decode loop sizes it once for its largest batch. logits.data may be null here.
std::size_t topk_workspace_size(const LogitsView& logits, int32_t k, const TopkOptions& options = {});

/// For each row, the K most probable tokens: probs[r, j] and indices[r, j] for j < K, dense as
/// [rows, K], descending by probability.
///
/// Ordering contract: rows are ranked by the raw logit, descending; equal logits go to the
/// smaller index. Probabilities are normalised over the whole vocabulary.
/// Non-finite logits: -inf tokens are masked: they never appear in the output. When a row has
/// fewer than K unmasked tokens, the remaining slots hold index -1 and probability 0 (log-prob
/// -inf). +inf tokens share the probability mass equally. A row that holds NaN gets index -1
/// and NaN in every slot; see RowStatus.
///
/// Stream-ordered, no allocation, no host synchronisation, capturable in a CUDA graph, bitwise
/// deterministic. (CUDA itself may wait for the device to go idle on the first launch of each
/// kernel, while it loads the kernel lazily: see README, "Lazy loading".) Indices are exact, so
/// they never depend on the algorithm or the batch. The probabilities of a forced algorithm are
/// the same bits whatever batch a row sits in (at the same 16-byte phase, as for softmax);
/// `automatic` may pick another algorithm for another row count, or cut a row into fewer parts
/// when a batch has more rows, and its probabilities then agree to rounding (~1e-6 relative).
/// Throws softk::Error on bad arguments (null pointers, pointers off their element alignment, K
/// outside [1, V], non-positive temperature, too-small workspace) before anything is launched.
/// logits.data must be aligned to its element size, probs, indices and options.row_status to 4
/// bytes, and a workspace, where one is needed, to 16 (cudaMalloc gives 256).
void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace softk
