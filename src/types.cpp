#include "softk/softmax.hpp"
#include "softk/topk.hpp"
#include "softk/types.hpp"

namespace softk {

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

const char* to_string(RowStatus status) {
  switch (status) {
    case RowStatus::ok: return "ok";
    case RowStatus::all_masked: return "all_masked";
    case RowStatus::has_nan: return "has_nan";
  }
  return "unknown";
}

const char* to_string(SoftmaxAlgorithm algorithm) {
  switch (algorithm) {
    case SoftmaxAlgorithm::automatic: return "auto";
    case SoftmaxAlgorithm::register_resident: return "register";
    case SoftmaxAlgorithm::shared_memory: return "smem";
    case SoftmaxAlgorithm::two_pass: return "two_pass";
    case SoftmaxAlgorithm::split_k: return "split_k";
  }
  return "unknown";
}

const char* to_string(TopkAlgorithm algorithm) {
  switch (algorithm) {
    case TopkAlgorithm::automatic: return "auto";
    case TopkAlgorithm::fused: return "fused";
    case TopkAlgorithm::radix_select: return "radix_select";
    case TopkAlgorithm::split_k: return "split_k";
  }
  return "unknown";
}

}  // namespace softk
