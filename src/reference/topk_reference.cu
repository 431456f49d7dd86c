// Reference top-k: sort every row whole with cub::DeviceSegmentedRadixSort::SortPairsDescending
// over (logit, index) and keep the first K. The radix sort is stable, so equal logits keep
// ascending index order: the contract's tie rule with no cleverness at all.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <limits>

#include "cuda_check.hpp"
#include "kernels/type_dispatch.cuh"
#include "reference/row_stats_reference.cuh"
#include "softk/reference.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace softk::reference {
namespace {

struct ReferenceWorkspace {
  float* keys_in;
  float* keys_out;
  int32_t* values_in;
  int32_t* values_out;
  int32_t* offsets;
  ReferenceRowStats* stats;
  void* sort_temp;
  std::size_t sort_temp_bytes;
  std::size_t total_bytes;
};

ReferenceWorkspace carve(int64_t rows, int64_t vocab, void* base) {
  const auto items = static_cast<std::size_t>(rows * vocab);
  detail::WorkspaceCarver carver(base);
  ReferenceWorkspace w{};
  w.keys_in = carver.take<float>(items);
  w.keys_out = carver.take<float>(items);
  w.values_in = carver.take<int32_t>(items);
  w.values_out = carver.take<int32_t>(items);
  w.offsets = carver.take<int32_t>(static_cast<std::size_t>(rows + 1));
  w.stats = carver.take<ReferenceRowStats>(static_cast<std::size_t>(rows));
  SOFTK_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      nullptr, w.sort_temp_bytes, w.keys_in, w.keys_out, w.values_in, w.values_out, static_cast<int>(items),
      static_cast<int>(rows), w.offsets, w.offsets + 1));
  w.sort_temp = carver.take<char>(w.sort_temp_bytes);
  w.total_bytes = carver.bytes();
  return w;
}

template <typename T>
__global__ void __launch_bounds__(kReferenceThreads)
    reference_prepare_kernel(const void* logits, int64_t rows, int64_t vocab, int64_t stride, float inv_temperature,
                             ReferenceWorkspace w) {
  const int64_t row = blockIdx.x;
  const T* x = kernels::row_pointer<T>(logits, row, stride);
  const ReferenceRowStats stats = reference_row_stats(x, vocab, inv_temperature);
  for (int64_t v = threadIdx.x; v < vocab; v += kReferenceThreads) {
    w.keys_in[row * vocab + v] = kernels::to_float(x[v]) + 0.0f;  // -0 and +0 tie, as they compare equal
    w.values_in[row * vocab + v] = static_cast<int32_t>(v);
  }
  if (threadIdx.x == 0) {
    w.stats[row] = stats;
    w.offsets[row] = static_cast<int32_t>(row * vocab);
    if (row == rows - 1) w.offsets[rows] = static_cast<int32_t>(rows * vocab);
  }
}

__global__ void reference_gather_kernel(int64_t vocab, int32_t k, float inv_temperature, bool log_probs,
                                        ReferenceWorkspace w, float* probs, int32_t* indices, int32_t* row_status) {
  const int64_t row = blockIdx.x;
  const ReferenceRowStats stats = w.stats[row];
  if (threadIdx.x == 0 && row_status) row_status[row] = static_cast<int32_t>(stats.status);
  for (int64_t j = threadIdx.x; j < k; j += blockDim.x) {
    const float x = w.keys_out[row * vocab + j];
    const bool nan_row = stats.status == RowStatus::has_nan;
    indices[row * k + j] = (nan_row || x == -CUDART_INF_F) ? -1 : w.values_out[row * vocab + j];
    probs[row * k + j] = log_probs ? stats.log_probability(x, inv_temperature) : stats.probability(x, inv_temperature);
  }
}

void validate_reference_size(const LogitsView& logits) {
  SOFTK_REQUIRE(logits.rows() * logits.vocab < std::numeric_limits<int>::max(),
                "reference::topk sorts rows * vocab items with a 32-bit count; rows * vocab must be < 2^31",
                std::to_string(logits.rows() * logits.vocab));
}

}  // namespace

std::size_t topk_workspace_size(const LogitsView& logits, int32_t k) {
  detail::validate_logits_shape(logits);
  detail::validate_k(logits, k);
  validate_reference_size(logits);
  return carve(logits.rows(), logits.vocab, nullptr).total_bytes;
}

void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
          void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_topk_call(logits, k, probs, indices, options);
  validate_reference_size(logits);
  detail::validate_workspace(workspace, workspace_bytes, reference::topk_workspace_size(logits, k));

  const int64_t rows = logits.rows();
  const float inv_temperature = 1.0f / options.temperature;
  ReferenceWorkspace w = carve(rows, logits.vocab, workspace);
  kernels::with_input_type(logits.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    reference_prepare_kernel<T><<<static_cast<unsigned>(rows), kReferenceThreads, 0, stream>>>(
        logits.data, rows, logits.vocab, logits.stride(), inv_temperature, w);
    SOFTK_CHECK_LAUNCH();
  });
  SOFTK_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      w.sort_temp, w.sort_temp_bytes, w.keys_in, w.keys_out, w.values_in, w.values_out,
      static_cast<int>(rows * logits.vocab), static_cast<int>(rows), w.offsets, w.offsets + 1, 0,
      static_cast<int>(sizeof(float) * 8), stream));
  reference_gather_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(
      logits.vocab, k, inv_temperature, options.log_probs, w, probs, indices, options.row_status);
  SOFTK_CHECK_LAUNCH();
}

}  // namespace softk::reference
