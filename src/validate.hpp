// Argument checks shared by the GPU ops, the CPU backend and the reference: every op rejects
// the same bad input with the same message, before anything is launched or written.
#pragma once

#include <cstddef>
#include <string>

#include "softk/sample.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk::detail {

/// Throws softk::Error("softk: <what> (got <value>)"): the failing half of SOFTK_REQUIRE.
[[noreturn]] void fail(const std::string& what, const std::string& value);

/// Unless `ok`, throws softk::Error("softk: <what> (got <value>)"). A macro, so that `what` and
/// `value` are built only when the check fails: an op runs its checks on every call of a decode
/// loop, and their messages built every time (~20 checks a call, each a heap allocation or more,
/// two printing a float through a stream) held a top-k call at batch 1 at 8.6-12.0 us of host time
/// instead of 4.3-8.5, longer than its kernel (H200; bench/RESULTS.md, "Host time per call").
#define SOFTK_REQUIRE(ok, what, value)                 \
  do {                                                 \
    if (!(ok)) ::softk::detail::fail((what), (value)); \
  } while (false)

/// Everything about the view: non-null, element-aligned data and a valid shape.
void validate_logits(const LogitsView& logits);
/// The shape alone (dtype, batch, steps, vocab, stride): what a workspace-size query needs, so a
/// caller can size workspaces before it has any logits.
void validate_logits_shape(const LogitsView& logits);
/// An input dtype softk serves (f32, f16, bf16); `name` names the field in the message.
void validate_input_dtype(DType dtype, const char* name);
void validate_temperature(float temperature);
void validate_k(const LogitsView& logits, int32_t k);
void validate_out_dtype(const LogitsView& logits, DType out_dtype);
void validate_not_null(const void* pointer, const char* name);
/// `pointer` (named `name` in the message) at a multiple of `alignment` bytes.
void validate_aligned(const void* pointer, const char* name, std::size_t alignment);
/// What a workspace's start must be a multiple of: the kernels load 16-byte vectors from it
/// (cudaMalloc gives 256).
constexpr std::size_t kWorkspaceAlignment = 16;
/// At least `needed` bytes, and where any are needed, a non-null, kWorkspaceAlignment-aligned start.
void validate_workspace(const void* workspace, std::size_t bytes, std::size_t needed);

/// Once out is non-null and options.out_dtype valid: out aligned to that dtype, and row_status.
void validate_softmax_outputs(const void* out, const SoftmaxOptions& options);

/// The argument checks every top-k entry point (op, reference, CPU) shares: logits, k, outputs
/// (non-null, element-aligned), row_status, temperature.
void validate_topk_call(const LogitsView& logits, int32_t k, const float* probs, const int32_t* indices,
                        const TopkOptions& options);

/// The sampling parameters of `rows` rows of `vocab` tokens: each scalar, and where
/// `per_row_on_host`, every value of each non-null array (a GPU op cannot read device arrays
/// before it launches). A bad per-row value is named with its row: "params.top_ps[3]".
void validate_sampling_params(const SamplingParams& params, int64_t rows, int64_t vocab, bool per_row_on_host);

/// A device sampling call (softk::sample, softk::reference::sample): the logits, `tokens`
/// (non-null), `row_status` (nullable) aligned, and the scalar parameters.
void validate_sample_call(const LogitsView& logits, const SamplingParams& params, const int32_t* tokens,
                          const int32_t* row_status);

}  // namespace softk::detail
