// softk — exact top-k of softmax over the last dimension of [B, T, V] logits, on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "softk/types.hpp"

namespace softk {

/// How the top-k of a row is found. `automatic` lets the dispatcher choose.
///  - fused:        block per row; one read computes (m, d) and per-thread register top-k
///                  buffers, merged per warp and per block. An exactness guard redoes a row
///                  exactly (inside the same block) whenever a per-thread buffer may have dropped
///                  a winner, so the result is exact on every input. K <= 1024.
///  - radix_select: any K; radix-selects the K-th key of each row, gathers the winners and
///                  sorts them (CUB segmented sort). Slower, exact, the path for K > 1024.
enum class TopkAlgorithm : int32_t { automatic, fused, radix_select };

const char* to_string(TopkAlgorithm algorithm);

/// The largest K the fused path serves; larger K goes to radix_select.
constexpr int32_t kMaxFastTopK = 1024;

struct TopkOptions {
  /// Probabilities are softmax(x / temperature); must be finite and > 0. The ranking itself
  /// is by the raw logits, so temperature never changes which tokens win.
  float temperature = 1.0f;
  /// Write log-probabilities (x - m)/T - log d instead of probabilities.
  bool log_probs = false;
  TopkAlgorithm algorithm = TopkAlgorithm::automatic;
  /// Optional device array of rows() int32 RowStatus values; nullptr to skip.
  int32_t* row_status = nullptr;
};

/// Bytes of workspace topk() needs (0 for the fused path). For the radix_select path (forced, or
/// chosen by automatic for K > kMaxFastTopK) it includes CUB's sort scratch, so it queries the
/// current device; otherwise it depends only on the arguments.
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
/// deterministic. Throws softk::Error on bad arguments (null pointers, K outside [1, V],
/// non-positive temperature, too-small workspace) before anything is launched.
void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace softk
