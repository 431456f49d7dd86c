// softk — CUB-based reference kernels: plain, obviously right, slow. The GPU oracle in the
// tests and the "naive" line in the benchmarks. Same contracts as the fast ops.
#pragma once

#include <cuda_runtime_api.h>

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

}  // namespace softk::reference
