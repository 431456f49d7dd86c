// softk_bench input generation, on the GPU: counter-based (stateless) so any slot of any size
// is generated in one pass at bandwidth, and the same (seed, slot, row, column) always gives the
// same value. Never zeros: a zero-filled input hides unwritten outputs and can run faster than
// real data.
//
// Distributions (the "dist" axis of every benchmark name):
//  - normal: x ~ N(0, 1). Flat rows: many near-ties at the top, the hard case for top-k buffers.
//  - llm:    x ~ N(0, 2^2) tail plus kSpikes dominant logits per row at hashed positions,
//            16 - 1.5 j + U(0, 1) for j = 0..7. For V = 128K the tail's mass is ~e^13.8, so the
//            top token gets ~0.5-0.9 of the probability, as in real decode steps.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_timer.cuh"
#include "kernels/element.cuh"
#include "softk/types.hpp"

namespace softk_bench {

enum class Dist : int32_t { llm = 0, normal = 1 };

inline const char* to_string(Dist d) { return d == Dist::llm ? "llm" : "normal"; }

constexpr int kSpikes = 8;

__device__ __forceinline__ uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Uniform in (0, 1): 24 random bits, offset by half a step so log() never sees 0.
__device__ __forceinline__ float uniform01(uint64_t bits) { return (float(bits >> 40) + 0.5f) * (1.0f / 16777216.0f); }

__device__ __forceinline__ float normal_from(uint64_t key) {
  const uint64_t h = mix64(key);
  const float u1 = uniform01(h);
  const float u2 = uniform01(mix64(h ^ 0x5851f42d4c957f2dull));
  return sqrtf(-2.0f * __logf(u1)) * __cosf(6.2831853f * u2);  // Box-Muller, one of the pair
}

using softk::kernels::from_float;

/// Fills `slots` copies of a dense [rows, vocab] tensor; slot s starts at base + s * slot_stride
/// elements. 64-bit indices throughout (a slot can hold 2^30 elements).
template <typename T>
__global__ void fill_tail_kernel(T* base, int64_t slots, int64_t rows, int64_t vocab, int64_t slot_stride,
                                 float scale, uint64_t seed) {
  const int64_t per_slot = rows * vocab;
  const int64_t total = slots * per_slot;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i / per_slot;
    const int64_t within = i - s * per_slot;
    base[s * slot_stride + within] = from_float<T>(scale * normal_from(seed ^ mix64(uint64_t(i))));
  }
}

/// Writes kSpikes dominant logits into every row of every slot (one thread per spike).
template <typename T>
__global__ void add_spikes_kernel(T* base, int64_t slots, int64_t rows, int64_t vocab, int64_t slot_stride,
                                  uint64_t seed) {
  const int64_t total = slots * rows * kSpikes;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % kSpikes;
    const int64_t sr = i / kSpikes;  // slot * rows + row
    const int64_t s = sr / rows;
    const int64_t r = sr - s * rows;
    const uint64_t h = mix64(seed ^ mix64(uint64_t(i) + 0x1234567ull));
    const int64_t col = int64_t(h % uint64_t(vocab));
    base[s * slot_stride + r * vocab + col] = from_float<T>(16.0f - 1.5f * float(j) + uniform01(mix64(h)));
  }
}

template <typename T>
void fill_typed(void* base, Dist dist, int64_t slots, int64_t rows, int64_t vocab, int64_t slot_stride,
                uint64_t seed, cudaStream_t stream) {
  T* p = static_cast<T*>(base);
  constexpr int kThreads = 256;
  const int64_t total = slots * rows * vocab;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, 65536));
  fill_tail_kernel<T><<<blocks, kThreads, 0, stream>>>(p, slots, rows, vocab, slot_stride,
                                                       dist == Dist::llm ? 2.0f : 1.0f, seed);
  BENCH_CHECK(cudaGetLastError());
  if (dist == Dist::llm) {
    const int64_t spikes = slots * rows * kSpikes;
    const int sblocks = int(std::min<int64_t>((spikes + kThreads - 1) / kThreads, 65536));
    add_spikes_kernel<T><<<sblocks, kThreads, 0, stream>>>(p, slots, rows, vocab, slot_stride, seed);
    BENCH_CHECK(cudaGetLastError());
  }
}

/// Generates logits into `slots` rotation copies (each dense [rows, vocab] of `dtype`, slot s at
/// byte offset s * slot_stride_bytes) and waits for them.
inline void fill_logits(void* base, softk::DType dtype, Dist dist, int64_t slots, int64_t rows, int64_t vocab,
                        int64_t slot_stride_bytes, uint64_t seed, cudaStream_t stream) {
  switch (dtype) {
    case softk::DType::f32:
      fill_typed<float>(base, dist, slots, rows, vocab, slot_stride_bytes / 4, seed, stream);
      break;
    case softk::DType::f16:
      fill_typed<__half>(base, dist, slots, rows, vocab, slot_stride_bytes / 2, seed, stream);
      break;
    case softk::DType::bf16:
      fill_typed<__nv_bfloat16>(base, dist, slots, rows, vocab, slot_stride_bytes / 2, seed, stream);
      break;
  }
  BENCH_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace softk_bench
