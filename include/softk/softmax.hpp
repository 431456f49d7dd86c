// softk — softmax over the last dimension of [B, T, V] logits, on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include "softk/types.hpp"

namespace softk {

/// How a softmax row is computed. `automatic` lets the dispatcher choose from measured
/// crossovers (bench/RESULTS.md); the others force one algorithm, for tests and benchmarks.
///  - register_resident: one read of the row, cached in registers (V up to 6144 fp32, 12288
///                       fp16/bf16; automatic takes it up to 6144 in any dtype, past which
///                       two_pass measured faster).
///  - shared_memory:     one read, cached in registers + dynamic shared memory (V up to ~72K
///                       fp32, ~144K fp16/bf16 on Hopper). Forced only: it lost to two_pass at
///                       every measured shape, so automatic never picks it.
///  - two_pass:          any V; the second read of a row mostly hits L2.
///  - split_k:           a row is cut into chunks across CTAs; for few rows and huge V.
/// A forced algorithm that cannot hold the row (register_resident or shared_memory past their
/// capacity) throws softk::Error naming the algorithm and V.
enum class SoftmaxAlgorithm : int32_t { automatic, register_resident, shared_memory, two_pass, split_k };

const char* to_string(SoftmaxAlgorithm algorithm);

struct SoftmaxOptions {
  /// softmax(x / temperature); must be finite and > 0 (and >= 4.3e-39, so that log2(e) /
  /// temperature fits in fp32).
  float temperature = 1.0f;
  /// Output element type: f32, or the input's dtype. Anything else throws.
  DType out_dtype = DType::f32;
  SoftmaxAlgorithm algorithm = SoftmaxAlgorithm::automatic;
  /// Optional device array of rows() int32 RowStatus values; nullptr to skip.
  int32_t* row_status = nullptr;
};

/// Bytes of workspace softmax() needs for this shape and options. Depends only on the
/// arguments (never on the device; logits.data may be null), so a decode loop can size it once
/// for its largest shape.
std::size_t softmax_workspace_size(const LogitsView& logits, const SoftmaxOptions& options = {});

/// out[r, v] = softmax(logits[r, :] / T)[v], written dense as [rows, V] in options.out_dtype.
///
/// Non-finite logits: -inf is a masked token (probability 0). If a row holds +inf, its +inf
/// entries share the mass equally (the limit of softmax) and all others get 0. A row that is all
/// -inf or holds NaN is reported through options.row_status (see RowStatus).
///
/// Stream-ordered: no allocation, no host synchronisation, capturable in a CUDA graph. (CUDA
/// itself may wait for the device to go idle on the first launch of each kernel, while it loads
/// the kernel lazily: see README, "Lazy loading".)
/// Deterministic: the same inputs and algorithm give bitwise the same output, and a forced
/// algorithm gives a row the same bits whatever batch it sits in, provided the row starts at
/// the same 16-byte phase (always so when V x element size is a multiple of 16 bytes; otherwise
/// the vector/scalar split, and so the summation order, moves with the row's address).
/// `automatic` may choose a different algorithm for a different row count; results then agree
/// to rounding (~1e-6 relative).
/// `workspace` may be null only when softmax_workspace_size() returns 0, and is otherwise 16-byte
/// aligned (cudaMalloc gives 256). `out` must not overlap the logits (only exact equality is
/// detected). logits.data and out must be aligned to their element sizes, options.row_status to
/// 4 bytes. Throws softk::Error on bad arguments, before anything is launched; throws
/// softk::CudaError if a launch fails.
void softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options, void* workspace,
             std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace softk
