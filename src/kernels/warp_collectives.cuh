// Collectives over the 32 lanes of a full warp, by shuffles: no shared memory, no barrier.
#pragma once

namespace softk::kernels {

/// Inclusive prefix sum: lane l gets the sum of lanes 0..l.
__device__ __forceinline__ unsigned warp_inclusive_sum(unsigned value) {
  const unsigned lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const unsigned below = __shfl_up_sync(0xffffffffu, value, offset);
    if (lane >= static_cast<unsigned>(offset)) value += below;
  }
  return value;
}

/// The maximum over the warp (fmaxf: NaN lanes are dropped); every lane gets it.
__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// The sum over the warp by a butterfly of round-to-nearest adds (no contraction into an FMA):
/// the two partners of each step add the same two numbers, so every lane gets the same bits.
__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = __fadd_rn(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

/// The largest 32-bit value over the warp; every lane gets it. One instruction from sm_80.
__device__ __forceinline__ unsigned warp_max(unsigned value) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, value);
#else
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
#endif
}

/// The sum over the warp; every lane gets it. One instruction from sm_80.
__device__ __forceinline__ unsigned warp_sum(unsigned value) {
#if __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffffu, value);
#else
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
#endif
}

/// The largest 64-bit value over the warp (a top-k key); every lane gets it. From sm_80 two
/// 32-bit reductions, the high word's, then the low word's among the lanes that hold it: two
/// instructions where five rounds of two shuffles and a compare are a chain of dependent round trips.
__device__ __forceinline__ unsigned long long warp_max(unsigned long long value) {
#if __CUDA_ARCH__ >= 800
  const auto high = static_cast<unsigned>(value >> 32);
  const unsigned top = __reduce_max_sync(0xffffffffu, high);
  const unsigned low = __reduce_max_sync(0xffffffffu, high == top ? static_cast<unsigned>(value) : 0u);
  return (static_cast<unsigned long long>(top) << 32) | low;
#else
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
#endif
}

}  // namespace softk::kernels
