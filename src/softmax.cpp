// softk::softmax: validate, pick an algorithm, launch exactly one kernel family.
#include "softk/softmax.hpp"

#include <cmath>

#include "device_info.hpp"
#include "dispatch.hpp"
#include "kernels/softmax_launch.hpp"
#include "validate.hpp"

namespace softk {
namespace {

void validate_algorithm(SoftmaxAlgorithm algorithm) {
  const auto a = static_cast<int32_t>(algorithm);
  SOFTK_REQUIRE(a >= 0 && a <= static_cast<int32_t>(SoftmaxAlgorithm::split_k),
                "options.algorithm must be a SoftmaxAlgorithm", std::to_string(a));
}

bool uses_workspace(SoftmaxAlgorithm algorithm) {
  return algorithm == SoftmaxAlgorithm::automatic || algorithm == SoftmaxAlgorithm::split_k;
}

}  // namespace

std::size_t softmax_workspace_size(const LogitsView& logits, const SoftmaxOptions& options) {
  detail::validate_logits_shape(logits);
  validate_algorithm(options.algorithm);
  return uses_workspace(options.algorithm) ? kernels::split_k_workspace_size(logits.rows()) : 0;
}

void softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_logits(logits);
  detail::validate_not_null(out, "out");
  SOFTK_REQUIRE(out != logits.data, "out must not alias logits.data", "the same pointer");
  detail::validate_temperature(options.temperature);
  detail::validate_out_dtype(logits, options.out_dtype);
  detail::validate_softmax_outputs(out, options);
  validate_algorithm(options.algorithm);
  detail::validate_workspace(workspace, workspace_bytes, softmax_workspace_size(logits, options));

  const DeviceInfo& device = current_device_info();
  SoftmaxAlgorithm algorithm = options.algorithm;
  if (algorithm == SoftmaxAlgorithm::automatic)
    algorithm = detail::choose_softmax_algorithm(logits.rows(), logits.vocab, logits.dtype, device);
  if (algorithm == SoftmaxAlgorithm::register_resident) {
    const int64_t capacity = kernels::register_capacity(logits.dtype);
    SOFTK_REQUIRE(logits.vocab <= capacity,
                  "algorithm register_resident holds V <= " + std::to_string(capacity) + " for " +
                      to_string(logits.dtype),
                  "V=" + std::to_string(logits.vocab));
  }
  if (algorithm == SoftmaxAlgorithm::shared_memory) {
    const int64_t capacity = kernels::shared_memory_capacity(logits.dtype, device);
    SOFTK_REQUIRE(logits.vocab <= capacity,
                  "algorithm shared_memory holds V <= " + std::to_string(capacity) + " for " +
                      to_string(logits.dtype) + " on this device",
                  "V=" + std::to_string(logits.vocab));
  }

  const kernels::SoftmaxProblem problem{logits.data, logits.dtype, logits.rows(), logits.vocab, logits.stride(), out,
                                        options.out_dtype, static_cast<float>(M_LOG2E / options.temperature),
                                        options.row_status};
  switch (algorithm) {
    case SoftmaxAlgorithm::register_resident: kernels::launch_softmax_register(problem, stream); break;
    case SoftmaxAlgorithm::shared_memory: kernels::launch_softmax_shared(problem, device, stream); break;
    case SoftmaxAlgorithm::two_pass: kernels::launch_softmax_two_pass(problem, stream); break;
    case SoftmaxAlgorithm::split_k: kernels::launch_softmax_split_k(problem, device, workspace, stream); break;
    case SoftmaxAlgorithm::automatic: break;  // resolved above
  }
}

}  // namespace softk
