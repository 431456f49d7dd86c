// softk::sample: each row's first tokens ranked by softk::topk, then one block a row bounds and
// draws (kernels/sample_from_ranked.cu).
#include "softk/sample.hpp"

#include "kernels/sample_launch.hpp"
#include "softk/topk.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace softk {
namespace {

/// How many of a row's tokens are ranked: the scalar top_k, which bounds the per-row ones, or
/// the whole vocabulary.
int32_t ranked_length(const LogitsView& logits, const SamplingParams& params) {
  return params.top_k > 0 ? params.top_k : static_cast<int32_t>(logits.vocab);
}

/// The ranking's order does not depend on the temperature, and its probabilities are not read.
TopkOptions ranking_options(int32_t* row_status) {
  TopkOptions options;
  options.row_status = row_status;
  return options;
}

struct SampleWorkspace {
  float* probabilities;  ///< [rows, k], written by topk, unread
  int32_t* ranked;       ///< [rows, k]
  int32_t* status;       ///< [rows], where the caller gives no row_status
  void* topk;
  std::size_t topk_bytes;
  std::size_t bytes;
};

SampleWorkspace carve(const LogitsView& logits, int32_t k, void* base) {
  detail::WorkspaceCarver carver(base);
  const std::size_t listed = static_cast<std::size_t>(logits.rows()) * static_cast<std::size_t>(k);
  SampleWorkspace w{};
  w.probabilities = carver.take<float>(listed);
  w.ranked = carver.take<int32_t>(listed);
  w.status = carver.take<int32_t>(static_cast<std::size_t>(logits.rows()));
  w.topk_bytes = topk_workspace_size(logits, k, ranking_options(nullptr));
  w.topk = carver.take<unsigned char>(w.topk_bytes);
  w.bytes = carver.bytes();
  return w;
}

}  // namespace

std::size_t sample_workspace_size(const LogitsView& logits, const SamplingParams& params) {
  detail::validate_logits_shape(logits);
  detail::validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/false);
  return carve(logits, ranked_length(logits, params), nullptr).bytes;
}

void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
            void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_logits(logits);
  detail::validate_not_null(tokens, "tokens");
  detail::validate_aligned(tokens, "tokens", sizeof(int32_t));
  if (row_status != nullptr) detail::validate_aligned(row_status, "row_status", sizeof(int32_t));
  detail::validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/false);
  const int32_t k = ranked_length(logits, params);
  // One carve sizes and places the arrays (the carver's offsets do not depend on the base), so
  // the ranking is sized once here, not twice; nothing is read through them before the check.
  const SampleWorkspace w = carve(logits, k, workspace);
  detail::validate_workspace(workspace, workspace_bytes, w.bytes);

  int32_t* status = row_status != nullptr ? row_status : w.status;
  topk(logits, k, w.probabilities, w.ranked, ranking_options(status), w.topk, w.topk_bytes, stream);
  kernels::launch_sample_from_ranked({logits.data, logits.dtype, logits.rows(), logits.vocab, logits.stride(),
                                      w.ranked, k, status, params, tokens},
                                     stream);
}

}  // namespace softk
