// Element types on the device: fp32 / fp16 / bf16 loaded as 16-byte vectors and widened to fp32.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

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

/// Bits of an fp32 pattern that a value widened from T can set: sign, 8 exponent bits and the
/// mantissa T keeps (7 for bf16, 10 for fp16). The bits below them are zero.
template <typename T>
constexpr int kSignificantBits = 32;
template <>
constexpr int kSignificantBits<__nv_bfloat16> = 16;
template <>
constexpr int kSignificantBits<__half> = 19;

/// A 16-byte vector kept raw (4 registers whatever the dtype), widened on use: caching rows raw
/// halves the registers an fp16 / bf16 row needs.
using RawVector = uint4;

/// The alignment of a kernel's dynamic shared memory where warps read or write 16-byte vectors
/// there (a stage, a candidate list, a row): 128 bytes, so that a warp's 32 vectors lie on 4
/// whole 128-byte lines. Its base follows the kernel's static shared memory, which left it only
/// 16-byte aligned (32 bytes past a line in the fused kernels). Measured against that (H100, one
/// run of two rounds): the staged K = 1024 streams 1.02x, the rest within the rounds' spread.
constexpr int kDynamicSharedAlignment = 128;

template <typename T>
__device__ __forceinline__ void widen(const RawVector& raw, float (&out)[kVectorWidth<T>]) {
  const T* elements = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kVectorWidth<T>; ++i) out[i] = to_float(elements[i]);
}

/// The two 16-bit elements of a 32-bit word, widened (low element first).
template <typename T>
__device__ __forceinline__ void widen_pair(uint32_t word, float (&out)[2]) {
  const T* elements = reinterpret_cast<const T*>(&word);
  out[0] = to_float(elements[0]);
  out[1] = to_float(elements[1]);
}

/// bf16 is the top half of an fp32, so widening is a shift or a mask: one instruction an
/// element, where __bfloat162float takes two for the upper element of each pair (a byte
/// permute, then the shift). The streaming loops of bf16 rows are instruction-bound.
template <>
__device__ __forceinline__ void widen_pair<__nv_bfloat16>(uint32_t word, float (&out)[2]) {
  out[0] = __uint_as_float(word << 16);
  out[1] = __uint_as_float(word & 0xFFFF0000u);
}

template <>
__device__ __forceinline__ void widen<__nv_bfloat16>(const RawVector& raw, float (&out)[8]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float pair[2];
    widen_pair<__nv_bfloat16>(words[i], pair);
    out[2 * i] = pair[0];
    out[2 * i + 1] = pair[1];
  }
}

/// The inverse of widen for values that came from T (exact for them): x[0..W) into the first
/// W elements of a vector, the rest zero.
template <typename T, int W>
__device__ __forceinline__ RawVector narrow(const float (&x)[W]) {
  static_assert(W <= kVectorWidth<T>, "at most one vector");
  RawVector raw{};
  T* elements = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < W; ++i) elements[i] = from_float<T>(x[i]);
  return raw;
}

/// Read-only path load. Deliberately not an evict-first (.cs) load: the two-pass and split-k
/// kernels count on the first read leaving the row in L2 for the second.
__device__ __forceinline__ RawVector load_vector(const RawVector* p) { return __ldg(p); }

/// out[i] = words[i] for i < N, read a RawVector at a time (words 16-byte aligned): in shared memory
/// each thread reading its own contiguous run of counters would conflict N ways in the banks by
/// word loads (~1 us for a 4096-bin scan on an H200); the split-k merge's list heads take two
/// loads of 16 bytes for 8 keys.
template <typename Word, int N>
__device__ __forceinline__ void load_words(const Word* words, Word (&out)[N]) {
  constexpr int kPerVector = static_cast<int>(sizeof(RawVector) / sizeof(Word));
  static_assert(sizeof(RawVector) % sizeof(Word) == 0 && N % kPerVector == 0, "whole vectors");
  const auto* vectors = reinterpret_cast<const RawVector*>(words);
#pragma unroll
  for (int v = 0; v < N / kPerVector; ++v) {
    const RawVector raw = vectors[v];
    memcpy(&out[v * kPerVector], &raw, sizeof raw);
  }
}

/// Copies 16 bytes from global to shared memory without passing through a register
/// (cp.async.cg: cached in L2 only, as the data is read once, from this copy); in flight until
/// wait_for_vector_copies(). Before sm_80, which has no cp.async, a plain copy.
__device__ __forceinline__ void copy_vector_async(RawVector* to_shared, const RawVector* from_global) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(to_shared))),
               "l"(__cvta_generic_to_global(from_global))
               : "memory");
#else
  *to_shared = load_vector(from_global);
#endif
}

/// Waits until every copy_vector_async this thread issued has landed in shared memory.
__device__ __forceinline__ void wait_for_vector_copies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace softk::kernels
