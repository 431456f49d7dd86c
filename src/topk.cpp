// softk::topk: validate, pick the fused, split-k or radix path, launch.
#include "softk/topk.hpp"

#include <algorithm>
#include <cmath>

#include "device_info.hpp"
#include "dispatch.hpp"
#include "kernels/topk_launch.hpp"
#include "validate.hpp"

namespace softk {
namespace {

/// The checks that need no device: a known algorithm, and a forced one that can serve k.
void check_algorithm(int32_t k, TopkAlgorithm algorithm) {
  const auto a = static_cast<int32_t>(algorithm);
  SOFTK_REQUIRE(a >= 0 && a <= static_cast<int32_t>(TopkAlgorithm::split_k),
                "options.algorithm must be a TopkAlgorithm", std::to_string(a));
  if (algorithm == TopkAlgorithm::fused || algorithm == TopkAlgorithm::split_k)
    SOFTK_REQUIRE(k <= kMaxFastTopK,
                  std::string("algorithm ") + to_string(algorithm) + " serves k <= " + std::to_string(kMaxFastTopK) +
                      " (use radix_select or auto)",
                  "k=" + std::to_string(k));
}

/// The algorithm that will run and the workspace it needs. Only a forced fused path is settled
/// without the device (no workspace); the others read the SM count or CUB's sort scratch. For
/// `automatic` the workspace also covers split-k at any smaller row count (same V and K), so a
/// workspace sized once for the largest batch serves every batch.
struct Plan {
  TopkAlgorithm algorithm;
  std::size_t workspace_bytes;
  /// For `fused`: short rows (topk_warp_row_fits) a warp each. Forced `fused` takes the warp at
  /// any batch; `automatic` only where that pays (dispatch.cpp).
  bool warp_rows;
};

Plan plan_for(const LogitsView& logits, int32_t k, TopkAlgorithm algorithm) {
  if (algorithm == TopkAlgorithm::fused) return {algorithm, 0, true};
  const DeviceInfo& device = current_device_info();
  const int64_t rows = logits.rows();
  switch (algorithm) {
    case TopkAlgorithm::radix_select: return {algorithm, kernels::topk_radix_workspace_size(rows, k), false};
    case TopkAlgorithm::split_k:
      return {algorithm,
              kernels::topk_split_k_workspace_size(rows, logits.vocab, logits.dtype, k, device,
                                                   kernels::SplitSizing::per_row),
              false};
    default: break;
  }
  const TopkAlgorithm chosen = detail::choose_topk_algorithm(rows, logits.vocab, logits.dtype, k, device);
  if (chosen == TopkAlgorithm::radix_select) return {chosen, kernels::topk_radix_workspace_size(rows, k), false};
  const int64_t split_rows = std::min(rows, detail::max_split_k_topk_rows(logits.vocab, logits.dtype, k, device));
  return {chosen,
          split_rows > 0 ? kernels::topk_split_k_workspace_size(split_rows, logits.vocab, logits.dtype, k, device,
                                                                kernels::SplitSizing::per_batch)
                         : 0,
          chosen == TopkAlgorithm::fused && detail::warp_rows_pay(rows, logits.vocab, logits.dtype, k, device)};
}

}  // namespace

std::size_t topk_workspace_size(const LogitsView& logits, int32_t k, const TopkOptions& options) {
  detail::validate_logits_shape(logits);
  detail::validate_k(logits, k);
  check_algorithm(k, options.algorithm);
  return plan_for(logits, k, options.algorithm).workspace_bytes;
}

void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_topk_call(logits, k, probs, indices, options);
  check_algorithm(k, options.algorithm);
  const Plan plan = plan_for(logits, k, options.algorithm);
  detail::validate_workspace(workspace, workspace_bytes, plan.workspace_bytes);

  const kernels::TopkProblem problem{logits.data, logits.dtype, logits.rows(), logits.vocab, logits.stride(), k,
                                     static_cast<float>(M_LOG2E / options.temperature), options.log_probs, probs,
                                     indices, options.row_status};
  const DeviceInfo& device = current_device_info();
  const kernels::LaunchContext launch{stream, options.programmatic_launch && kernels::sm90_image_loaded(device)};
  // A forced algorithm keeps a row's bits the same in every batch; `automatic` may fit how it
  // cuts and lists a row to the batch too (topk.hpp).
  const auto sizing = options.algorithm == TopkAlgorithm::automatic ? kernels::SplitSizing::per_batch
                                                                     : kernels::SplitSizing::per_row;
  switch (plan.algorithm) {
    case TopkAlgorithm::fused: kernels::launch_topk_fused(problem, device, launch, plan.warp_rows, sizing); break;
    case TopkAlgorithm::split_k: kernels::launch_topk_split_k(problem, device, workspace, launch, sizing); break;
    case TopkAlgorithm::radix_select: kernels::launch_topk_radix(problem, workspace, stream); break;
    case TopkAlgorithm::automatic: break;  // resolved by plan_for
  }
}

}  // namespace softk
