// Host-side entry points of the softmax kernels, one per algorithm. Plain C++: the op layer
// (src/softmax.cpp) resolves arguments and calls exactly one of these.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device_info.hpp"
#include "softk/types.hpp"

namespace softk::kernels {

/// Everything a softmax kernel needs, resolved and validated by the op layer.
struct SoftmaxProblem {
  const void* logits;
  DType dtype;
  int64_t rows;
  int64_t vocab;
  int64_t row_stride;  ///< elements
  void* out;           ///< dense [rows, vocab]
  DType out_dtype;
  float k;             ///< log2(e) / temperature
  int32_t* row_status; ///< nullable
};

/// Largest V the register-resident kernel holds (registers only).
int64_t register_capacity(DType dtype);
/// Largest V the shared-memory kernel holds (registers + dynamic shared memory) on `device`.
int64_t shared_memory_capacity(DType dtype, const DeviceInfo& device);

void launch_softmax_register(const SoftmaxProblem& problem, cudaStream_t stream);
void launch_softmax_shared(const SoftmaxProblem& problem, const DeviceInfo& device, cudaStream_t stream);
void launch_softmax_two_pass(const SoftmaxProblem& problem, cudaStream_t stream);

/// Split-k processes at most this many rows per pair of launches, so its workspace is bounded
/// and each group of rows can stay in L2 between the two reads.
constexpr int64_t kSplitKMaxGroupRows = 64;
/// Chunks per row at most; the workspace holds one (m, d) state per chunk.
constexpr int64_t kSplitKMaxChunks = 1024;
std::size_t split_k_workspace_size(int64_t rows);
void launch_softmax_split_k(const SoftmaxProblem& problem, const DeviceInfo& device, void* workspace,
                            cudaStream_t stream);

}  // namespace softk::kernels
