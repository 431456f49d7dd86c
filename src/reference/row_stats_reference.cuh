// The reference's per-row statistics: max, sum and status by three plain cub::BlockReduce
// passes, with precise expf. Deliberately not the (m, d) machinery of the fast kernels, so
// the reference is an independent check of it.
#pragma once

#include <cub/block/block_reduce.cuh>
#include <math_constants.h>

#include "kernels/element.cuh"
#include "softk/types.hpp"

namespace softk::reference {

constexpr int kReferenceThreads = 256;

struct ReferenceRowStats {
  float max;
  float sum;  ///< sum of exp((x - max) / T), or the number of +inf logits when max is +inf
  RowStatus status;

  __device__ float probability(float x, float inv_temperature) const {
    if (status == RowStatus::has_nan) return CUDART_NAN_F;
    if (status == RowStatus::all_masked) return 0.0f;
    if (isinf(max)) return x == max ? 1.0f / sum : 0.0f;
    return expf((x - max) * inv_temperature) / sum;
  }
  __device__ float log_probability(float x, float inv_temperature) const {
    if (status == RowStatus::has_nan) return CUDART_NAN_F;
    if (status == RowStatus::all_masked) return -CUDART_INF_F;
    if (isinf(max)) return x == max ? -logf(sum) : -CUDART_INF_F;
    return (x - max) * inv_temperature - logf(sum);
  }
};

/// Called by all kReferenceThreads threads of a block; every thread gets the row's stats.
template <typename T>
__device__ ReferenceRowStats reference_row_stats(const T* row, int64_t vocab, float inv_temperature) {
  using Reduce = cub::BlockReduce<float, kReferenceThreads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ ReferenceRowStats shared;

  float local_max = -CUDART_INF_F, nan_count = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += kReferenceThreads) {
    const float x = kernels::to_float(row[v]);
    if (x != x) nan_count += 1.0f;
    else local_max = fmaxf(local_max, x);
  }
  const float max = Reduce(temp).Reduce(local_max, [](float a, float b) { return fmaxf(a, b); });
  __syncthreads();
  const float nans = Reduce(temp).Sum(nan_count);
  if (threadIdx.x == 0) {
    shared.max = max;
    shared.status = nans > 0.0f ? RowStatus::has_nan : (max == -CUDART_INF_F ? RowStatus::all_masked : RowStatus::ok);
  }
  __syncthreads();
  const float row_max = shared.max;
  float local_sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += kReferenceThreads) {
    const float x = kernels::to_float(row[v]);
    if (isinf(row_max)) local_sum += (x == row_max) ? 1.0f : 0.0f;
    else if (x == x) local_sum += expf((x - row_max) * inv_temperature);
  }
  __syncthreads();
  const float sum = Reduce(temp).Sum(local_sum);
  if (threadIdx.x == 0) shared.sum = sum;
  __syncthreads();
  return shared;
}

}  // namespace softk::reference
