// Host-side entry points of the sampling kernels. Plain C++: src/sample.cpp ranks the rows with
// softk::topk and calls launch_sample_from_ranked (sample_from_ranked.cu), or, where no top_k
// bounds the rows, calls launch_sample_nucleus (sample_nucleus.cu) on the logits alone.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "device_info.hpp"
#include "softk/sample.hpp"

namespace softk::kernels {

struct SampleProblem {
  const void* logits;
  DType dtype;
  int64_t rows;
  int64_t vocab;
  int64_t row_stride;      ///< elements
  const int32_t* ranked;   ///< [rows, ranked_length]: each row's first tokens in the contract's order
  int32_t ranked_length;   ///< the bound on every row's top_k
  int32_t* status;         ///< [rows] RowStatus: the ranking's (read), or the nucleus kernel's (written)
  SamplingParams params;   ///< its arrays in device memory
  int32_t* tokens;         ///< [rows]
};

void launch_sample_from_ranked(const SampleProblem& problem, cudaStream_t stream);

/// `ranked` unused: the nucleus kernel finds each row's status, cut and token from its logits.
void launch_sample_nucleus(const SampleProblem& problem, const DeviceInfo& device, cudaStream_t stream);

}  // namespace softk::kernels
