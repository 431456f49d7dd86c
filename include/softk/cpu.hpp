// softk — the CPU backend: the same ops on host memory, accumulating in double.
// It is the oracle every GPU test compares against, and the fallback on machines with no GPU.
#pragma once

#include "softk/sample.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk::cpu {

/// Same contract as softk::softmax, on host pointers (logits.data, out, options.row_status).
/// options.algorithm is ignored: there is one CPU algorithm.
void softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options);

/// Same contract as softk::topk, on host pointers. options.algorithm is ignored.
void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options);

/// One token a row into `tokens` ([rows] int32) as SamplingParams defines it (sample.hpp), on
/// host pointers, its per-row arrays included; `row_status`, where non-null, gets each row's
/// RowStatus. Throws softk::Error naming the argument (and a per-row value's row) before
/// writing anything.
void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status = nullptr);

}  // namespace softk::cpu
