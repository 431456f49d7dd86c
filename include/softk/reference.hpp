// softk — CUB-based reference kernels: plain, obviously right, slow. The GPU oracle in the
// tests and the "naive" line in the benchmarks. Same contracts as the fast ops.
#pragma once

#include <cuda_runtime_api.h>

#include "softk/sample.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk::reference {

/// Block-per-row softmax with cub::BlockReduce (max pass, sum pass, write pass); fp32 output.
/// options.out_dtype must be f32 and options.algorithm is ignored. Needs no workspace.
void softmax(const LogitsView& logits, float* out, const SoftmaxOptions& options, cudaStream_t stream);

std::size_t topk_workspace_size(const LogitsView& logits, int32_t k);

/// Sorts every row whole with cub::DeviceSegmentedRadixSort::SortPairsDescending over
/// (logit, index) and keeps the first K; the radix sort is stable, so equal logits keep
/// ascending index order. options.algorithm is ignored.
void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

/// What softk::sample takes on the device (per-row values clamped as sample.hpp says), for
/// rows * vocab < 2^31.
std::size_t sample_workspace_size(const LogitsView& logits, const SamplingParams& params);

/// softk::sample's tokens by softk::cpu::sample's steps: every row ranked whole by
/// reference::topk, then one thread a row in double, one token at a time (weights, cuts, the draw
/// in token order). Draws softk::cpu::sample's token but where u or a cut lies within rounding
/// of a boundary (its sums add the same weights, some in rank order where the CPU's add them in
/// token order).
void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
            void* workspace, std::size_t workspace_bytes, cudaStream_t stream);

}  // namespace softk::reference
