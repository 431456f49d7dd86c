// softk::sample. Where a top_k bounds the rows, softk::topk ranks each row's first tokens, then
// one block a row bounds and draws (kernels/sample_from_ranked.cu); where none does, a block or a
// cluster of them a row finds its nucleus from histograms of its logits and draws
// (kernels/sample_nucleus.cu), ranking nothing.
#include "softk/sample.hpp"

#include "kernels/sample_launch.hpp"
#include "softk/topk.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace softk {
namespace {

/// Whether softk::topk ranks the rows first: a top_k bounds them, per-row values or a scalar
/// short of the vocabulary (top_k = V bounds nothing).
bool ranks_rows(const LogitsView& logits, const SamplingParams& params) {
  return params.top_ks != nullptr || (params.top_k > 0 && params.top_k < logits.vocab);
}

/// How many of a row's tokens are ranked, where ranks_rows: the scalar top_k, which bounds the
/// per-row ones, or the whole vocabulary.
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
  int32_t* status;       ///< [rows], where the caller gives no row_status
  // Where ranks_rows only:
  int32_t k;             ///< ranked_length
  float* probabilities;  ///< [rows, k], written by topk, unread
  int32_t* ranked;       ///< [rows, k]
  void* topk;
  std::size_t topk_bytes;
  std::size_t bytes;
};

SampleWorkspace carve(const LogitsView& logits, const SamplingParams& params, void* base) {
  detail::WorkspaceCarver carver(base);
  SampleWorkspace w{};
  w.status = carver.take<int32_t>(static_cast<std::size_t>(logits.rows()));
  if (ranks_rows(logits, params)) {
    w.k = ranked_length(logits, params);
    const std::size_t listed = static_cast<std::size_t>(logits.rows()) * static_cast<std::size_t>(w.k);
    w.probabilities = carver.take<float>(listed);
    w.ranked = carver.take<int32_t>(listed);
    w.topk_bytes = topk_workspace_size(logits, w.k, ranking_options(nullptr));
    w.topk = carver.take<unsigned char>(w.topk_bytes);
  }
  w.bytes = carver.bytes();
  return w;
}

}  // namespace

std::size_t sample_workspace_size(const LogitsView& logits, const SamplingParams& params) {
  detail::validate_logits_shape(logits);
  detail::validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/false);
  return carve(logits, params, nullptr).bytes;
}

void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
            void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_sample_call(logits, params, tokens, row_status);
  // One carve sizes and places the arrays (the carver's offsets do not depend on the base), so
  // the ranking is sized once here, not twice; nothing is read through them before the check.
  const SampleWorkspace w = carve(logits, params, workspace);
  detail::validate_workspace(workspace, workspace_bytes, w.bytes);

  int32_t* status = row_status != nullptr ? row_status : w.status;
  const kernels::SampleProblem problem{logits.data, logits.dtype, logits.rows(), logits.vocab, logits.stride(),
                                       w.ranked,    w.k,          status,        params,       tokens};
  if (!ranks_rows(logits, params)) {
    kernels::launch_sample_nucleus(problem, current_device_info(), stream);
    return;
  }
  topk(logits, w.k, w.probabilities, w.ranked, ranking_options(status), w.topk, w.topk_bytes, stream);
  kernels::launch_sample_from_ranked(problem, stream);
}

}  // namespace softk
