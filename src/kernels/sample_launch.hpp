// Host-side entry point of the sampling kernel (sample_from_ranked.cu). Plain C++: src/sample.cpp
// ranks the rows with softk::topk, then calls this.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

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
  const int32_t* status;   ///< [rows] RowStatus, from the ranking
  SamplingParams params;   ///< its arrays in device memory
  int32_t* tokens;         ///< [rows]
};

void launch_sample_from_ranked(const SampleProblem& problem, cudaStream_t stream);

}  // namespace softk::kernels
