// The dispatcher: picks an algorithm and launch shape from (rows, V, dtype, device). Its
// crossovers are measured, not guessed: see bench/RESULTS.md for the runs behind each constant.
#pragma once

#include <cstdint>

#include "device_info.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk::detail {

SoftmaxAlgorithm choose_softmax_algorithm(int64_t rows, int64_t vocab, DType dtype, const DeviceInfo& device);

TopkAlgorithm choose_topk_algorithm(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device);

/// Whether `automatic` runs a batch of short rows (topk_warp_row_fits) a warp per row rather than
/// a block per row; a forced `fused` takes the warp wherever the row fits.
bool warp_rows_pay(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device);

/// The most rows for which choose_topk_algorithm may pick split-k in two launches (with a
/// workspace) for this (V, dtype, K); 0 if never. Past it, split-k is picked only where the batch
/// takes clusters (kernels::topk_cluster_batch), which need none. A workspace sized for
/// `automatic` covers split-k at this many rows, so that sizing once for the largest batch also
/// serves every smaller one.
int64_t max_split_k_topk_rows(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device);

}  // namespace softk::detail
