// softk::topk: validate, pick the fused or the radix path, launch.
#include "softk/topk.hpp"

#include <cmath>

#include "device_info.hpp"
#include "kernels/topk_launch.hpp"
#include "validate.hpp"

namespace softk {
namespace {

TopkAlgorithm resolve(TopkAlgorithm algorithm, int32_t k) {
  const auto a = static_cast<int32_t>(algorithm);
  detail::require(a >= 0 && a <= static_cast<int32_t>(TopkAlgorithm::radix_select),
                  "options.algorithm must be a TopkAlgorithm", std::to_string(a));
  if (algorithm == TopkAlgorithm::automatic)
    return k <= kMaxFastTopK ? TopkAlgorithm::fused : TopkAlgorithm::radix_select;
  detail::require(algorithm != TopkAlgorithm::fused || k <= kMaxFastTopK,
                  "algorithm fused serves k <= " + std::to_string(kMaxFastTopK) + " (use radix_select or auto)",
                  "k=" + std::to_string(k));
  return algorithm;
}

}  // namespace

std::size_t topk_workspace_size(const LogitsView& logits, int32_t k, const TopkOptions& options) {
  detail::validate_logits(logits);
  detail::validate_k(logits, k);
  const TopkAlgorithm algorithm = resolve(options.algorithm, k);
  return algorithm == TopkAlgorithm::radix_select ? kernels::topk_radix_workspace_size(logits.rows(), k) : 0;
}

void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_logits(logits);
  detail::validate_k(logits, k);
  detail::validate_not_null(probs, "probs");
  detail::validate_not_null(indices, "indices");
  detail::validate_temperature(options.temperature);
  const TopkAlgorithm algorithm = resolve(options.algorithm, k);
  detail::validate_workspace(workspace, workspace_bytes, topk_workspace_size(logits, k, options));

  const kernels::TopkProblem problem{logits.data, logits.dtype, logits.rows(), logits.vocab, logits.stride(), k,
                                     static_cast<float>(M_LOG2E / options.temperature), options.log_probs, probs,
                                     indices, options.row_status};
  if (algorithm == TopkAlgorithm::fused) kernels::launch_topk_fused(problem, stream);
  else kernels::launch_topk_radix(problem, workspace, stream);
}

}  // namespace softk
