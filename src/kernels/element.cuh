// Element types on the device: fp32 / fp16 / bf16 loaded as 16-byte vectors and widened to fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace softk::kernels {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ float to_float<__half>(__half x) { return __half2float(x); }
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/// Elements of T in one 16-byte vector: 4 for fp32, 8 for fp16 / bf16.
template <typename T>
constexpr int kVectorWidth = 16 / static_cast<int>(sizeof(T));

/// A 16-byte vector kept raw (4 registers whatever the dtype), widened on use: caching rows raw
/// halves the registers an fp16 / bf16 row needs.
using RawVector = uint4;

template <typename T>
__device__ __forceinline__ void widen(const RawVector& raw, float (&out)[kVectorWidth<T>]) {
  const T* elements = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kVectorWidth<T>; ++i) out[i] = to_float(elements[i]);
}

/// Read-only path load. Deliberately not an evict-first (.cs) load: the two-pass and split-k
/// kernels count on the first read leaving the row in L2 for the second.
__device__ __forceinline__ RawVector load_vector(const RawVector* p) { return __ldg(p); }

}  // namespace softk::kernels
