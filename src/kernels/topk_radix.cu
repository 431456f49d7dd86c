// Exact top-k for any K (the path past the fused kernel's K <= 1024): a block per row computes
// the softmax state, radix-selects the K-th key over the row and gathers the K winners into the
// workspace; cub::DeviceSegmentedSort orders each row's winners; a decode kernel writes them.
#include <cub/device/device_segmented_sort.cuh>

#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "workspace.hpp"

namespace softk::kernels {
namespace {

constexpr int kThreads = 512;
/// The decode kernel's block: a row's K writes.
constexpr int kDecodeThreads = 256;

struct RadixWorkspace {
  SoftmaxState* states;  ///< [rows]
  TopkKey* gathered;     ///< [rows, k], unordered
  TopkKey* sorted;       ///< [rows, k], descending
  int64_t* offsets;      ///< [rows + 1]: row r's winners are [offsets[r], offsets[r + 1])
  void* sort_temp;
  std::size_t sort_temp_bytes;
  std::size_t total_bytes;  ///< the whole workspace
};

std::size_t sort_temp_bytes(int64_t rows, int32_t k) {
  std::size_t bytes = 0;
  const int64_t* offsets = nullptr;
  SOFTK_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeysDescending(nullptr, bytes, static_cast<const TopkKey*>(nullptr),
                                                                static_cast<TopkKey*>(nullptr), rows * k, rows,
                                                                offsets, offsets + 1));
  return bytes;
}

RadixWorkspace carve(int64_t rows, int32_t k, void* base) {
  detail::WorkspaceCarver carver(base);
  RadixWorkspace w{};
  w.states = carver.take<SoftmaxState>(static_cast<std::size_t>(rows));
  w.gathered = carver.take<TopkKey>(static_cast<std::size_t>(rows * k));
  w.sorted = carver.take<TopkKey>(static_cast<std::size_t>(rows * k));
  w.offsets = carver.take<int64_t>(static_cast<std::size_t>(rows + 1));
  w.sort_temp_bytes = sort_temp_bytes(rows, k);
  w.sort_temp = carver.take<char>(w.sort_temp_bytes);
  w.total_bytes = carver.bytes();
  return w;
}

template <typename T>
__global__ void __launch_bounds__(kThreads, 2) topk_radix_gather_kernel(TopkProblem problem, RadixWorkspace w) {
  __shared__ SoftmaxState scratch[kThreads / 32];
  __shared__ RadixSelectStorage select;
  __shared__ unsigned count;

  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const SoftmaxState state = segment_state<kThreads>(segment, problem.k_exp, scratch);
  if (threadIdx.x == 0) {
    w.states[row] = state;
    w.offsets[row] = row * problem.k;
    if (row == problem.rows - 1) w.offsets[problem.rows] = problem.rows * problem.k;
  }
  TopkKey* gathered = w.gathered + row * problem.k;
  if (status_of(state) == RowStatus::has_nan) {  // block-uniform; decode writes the NaN row
    for (unsigned j = threadIdx.x; j < k; j += kThreads) gathered[j] = kEmptyKey;
    return;
  }
  team_topk_unsorted<BlockTeam<kThreads>, kSignificantBits<T>>(k, RowKeys<kThreads, T>{segment}, select, gathered,
                                                               count);
}

__global__ void __launch_bounds__(kDecodeThreads) topk_radix_decode_kernel(TopkProblem problem, RadixWorkspace w) {
  const int64_t row = blockIdx.x;
  const RowOutput<kDecodeThreads> write(problem, row, w.states[row]);
  if (write.wrote_nan_row()) return;
  const TopkKey* sorted = w.sorted + row * problem.k;
  for (unsigned j = threadIdx.x; j < static_cast<unsigned>(problem.k); j += kDecodeThreads) write(j, sorted[j]);
}

}  // namespace

std::size_t topk_radix_workspace_size(int64_t rows, int32_t k) { return carve(rows, k, nullptr).total_bytes; }

void launch_topk_radix(const TopkProblem& problem, void* workspace, cudaStream_t stream) {
  const RadixWorkspace w = carve(problem.rows, problem.k, workspace);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    topk_radix_gather_kernel<T><<<static_cast<unsigned>(problem.rows), kThreads, 0, stream>>>(problem, w);
    SOFTK_CHECK_LAUNCH();
  });
  std::size_t temp_bytes = w.sort_temp_bytes;
  SOFTK_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeysDescending(w.sort_temp, temp_bytes, w.gathered, w.sorted,
                                                                problem.rows * problem.k, problem.rows, w.offsets,
                                                                w.offsets + 1, stream));
  topk_radix_decode_kernel<<<static_cast<unsigned>(problem.rows), kDecodeThreads, 0, stream>>>(problem, w);
  SOFTK_CHECK_LAUNCH();
}

}  // namespace softk::kernels
