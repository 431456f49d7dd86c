#include "dispatch.hpp"

#include "kernels/softmax_launch.hpp"

namespace softk::detail {

SoftmaxAlgorithm choose_softmax_algorithm(int64_t rows, int64_t vocab, DType dtype, const DeviceInfo& device) {
  // Too few rows to give every SM a block: cut rows across CTAs once a row is long enough to
  // repay the second launch (crossover measured in bench/RESULTS.md, "softmax dispatch").
  const bool few_rows = rows * 2 < device.sm_count;
  if (few_rows && vocab >= 65536) return SoftmaxAlgorithm::split_k;
  if (vocab <= kernels::register_capacity(dtype)) return SoftmaxAlgorithm::register_resident;
  if (vocab <= kernels::shared_memory_capacity(dtype, device)) return SoftmaxAlgorithm::shared_memory;
  return SoftmaxAlgorithm::two_pass;
}

}  // namespace softk::detail
