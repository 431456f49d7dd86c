// Argument checks shared by the GPU ops, the CPU backend and the reference: every op rejects
// the same bad input with the same message, before anything is launched or written.
#pragma once

#include <string>

#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk::detail {

/// Throws softk::Error("softk: <what> (got <value>)") when `ok` is false.
void require(bool ok, const std::string& what, const std::string& value);

/// Everything about the view: non-null, element-aligned data and a valid shape.
void validate_logits(const LogitsView& logits);
/// The shape alone (dtype, batch, steps, vocab, stride): what a workspace-size query needs, so a
/// caller can size workspaces before it has any logits.
void validate_logits_shape(const LogitsView& logits);
void validate_temperature(float temperature);
void validate_k(const LogitsView& logits, int32_t k);
void validate_out_dtype(const LogitsView& logits, DType out_dtype);
void validate_not_null(const void* pointer, const char* name);
void validate_workspace(const void* workspace, std::size_t bytes, std::size_t needed);

/// The argument checks every top-k entry point (op, reference, CPU) shares: logits, k, outputs,
/// temperature.
void validate_topk_call(const LogitsView& logits, int32_t k, const float* probs, const int32_t* indices,
                        float temperature);

}  // namespace softk::detail
