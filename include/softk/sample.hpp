// softk — sampling: temperature, top-k, top-p and min-p, and the seeded draw; the GPU op.
// Plain C++17 plus cuda_runtime_api.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "softk/types.hpp"

namespace softk {

/// What a row samples from, and the draw that picks its token. Each parameter is one value for
/// every row, or, where its array is non-null, one value a row (`rows` entries, in the memory the
/// op reads: host memory for softk::cpu::sample).
///
/// A row's candidates are its tokens in the contract's order (descending logit, ties to the
/// smaller index), cut to the shortest prefix that every bound allows:
///  - top_k: the first top_k tokens (0: no bound);
///  - top_p: the first n tokens whose probabilities, renormalised over the top_k kept, sum to at
///    least top_p (1: no bound);
///  - min_p: the tokens whose probability is at least min_p times the largest (0: no bound).
/// Each bound keeps at least the first token. Probabilities are softmax(x / temperature).
///
/// The draw: u = (word 0 of Philox4x32-10 at key (seed low, seed high) and counter (offset low,
/// offset high, 0, 0), shifted right by 8) x 2^-24, in [0, 1); the token is the candidate, taken
/// in ascending token order, at which the candidates' running sum of probability first passes
/// u x their total (inverse CDF). So a row's token depends on its logits, its parameters, its
/// seed and its offset only, never on the rows around it. temperature 0 is greedy: the first
/// token in the contract's order, with no draw.
///
/// A row holding NaN, or all -inf, samples token -1 and reports its RowStatus, as top-k does;
/// a -inf token is never sampled.
struct SamplingParams {
  float temperature = 1.0f;  ///< finite and >= 0 (0: greedy); else >= 4.3e-39, as for top-k
  int32_t top_k = 0;         ///< 0 (no bound) or in [1, vocab]
  float top_p = 1.0f;        ///< in (0, 1]
  float min_p = 0.0f;        ///< in [0, 1]
  uint64_t seed = 0;
  uint64_t offset = 0;  ///< which draw of the seed's stream (a request's decode step, say)

  const float* temperatures = nullptr;  ///< per row, or null: `temperature`
  /// Per row, or null: `top_k`. With it, a non-zero `top_k` bounds every row's: a row's 0, or a
  /// value past the bound, takes the bound (so that a GPU op ranks top_k tokens a row at most).
  const int32_t* top_ks = nullptr;
  const float* top_ps = nullptr;        ///< per row, or null: `top_p`
  const float* min_ps = nullptr;        ///< per row, or null: `min_p`
  const uint64_t* seeds = nullptr;      ///< per row, or null: `seed`
  const uint64_t* offsets = nullptr;    ///< per row, or null: `offset`
};

/// The workspace softk::sample needs for `logits` under `params` (sized once for the largest
/// shape serves any smaller batch of the same V, top_k and per-row form: with `top_ks` or
/// without). Throws softk::Error on bad scalars.
std::size_t sample_workspace_size(const LogitsView& logits, const SamplingParams& params);

/// One token a row into `tokens` ([rows] int32) as SamplingParams defines it, on the device:
/// the logits, `tokens`, `row_status` (nullable: each row's RowStatus) and params' arrays are
/// device memory. Stream-ordered, no allocation and no host synchronisation (graph-capturable).
///
/// How: where a top_k bounds the rows (`top_ks`, or a scalar below V), softk::topk ranks each
/// row's first `top_k` tokens, and one block a row bounds that list by the row's own top_k, top_p
/// and min_p and draws. With `top_ks`, the scalar top_k bounds every row's value (0: none, and
/// the whole row is ranked: slower). Where none does, nothing is ranked: one block a row, or a
/// cluster of up to 16 a row where the batch leaves SMs to spare, finds the top_p nucleus from
/// histograms of the row's weights by logit, a few passes over the row.
/// The host cannot read device arrays, so per-row values are not checked there; out of range,
/// a row takes: a temperature that is not finite, below 0 or below 4.3e-39 but not 0: greedy;
/// a top_k outside [0, the bound]: the bound; a top_p outside (0, 1]: 1; a min_p outside
/// [0, 1]: 0.
///
/// The weights are fp32, where softk::cpu::sample's are double (and the nucleus kernel's masses
/// fixed-point, to 2^-63 of the row's): the two draw the same token except where u falls within
/// rounding of a boundary between two candidates, or a row's running mass within rounding of
/// top_p or a weight of min_p.
void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
            void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace softk
