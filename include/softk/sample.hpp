// softk — sampling parameters: temperature, top-k, top-p and min-p, and the seeded draw.
// Plain C++17: includes nothing from CUDA.
#pragma once

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

}  // namespace softk
