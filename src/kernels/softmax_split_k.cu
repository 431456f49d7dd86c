// Split-k softmax, for few rows and huge V: each row is cut into chunks, one CTA per chunk.
// Launch 1 reduces every chunk to its (m, d) state in the workspace; launch 2 merges a row's
// chunk states (every CTA of the row, in the same fixed order, so they agree bit for bit) and
// writes its chunk's probabilities. The kernel boundary is the grid-wide barrier between them.
//
// Rows go through in groups small enough that the group's logits stay in L2 between the two
// launches, so the second read costs L2 bandwidth, not DRAM.
#include <algorithm>

#include "cuda_check.hpp"
#include "kernels/softmax_launch.hpp"
#include "kernels/softmax_passes.cuh"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

constexpr int kThreads = 512;
/// fp32 chunks fetch a thread's last vectors all at once (rows 1-8 of 32000-256000 1.05-1.17x,
/// 4 rows of 32K-32M 1.02-1.12x); 16-bit ones one at a time, as at once they read 1 x 32000-256000
/// and 4 x 32K-128K at 0.96-0.98x (though 4 x 4M-16M at 1.05-1.13x; H200, two rounds of one run).
template <typename T>
constexpr int kSplitTailLoads = sizeof(T) == 4 ? kStreamTailLoads : 1;
/// Below this many elements a chunk's CTA spends more on its launch and reduction than on data.
constexpr int64_t kMinChunkElements = 4096;
/// Chunk lengths are multiples of this, so every chunk after the first starts on the same
/// 16-byte phase as the row and its body vectors line up.
constexpr int64_t kChunkGranule = 16;

struct SplitPlan {
  int64_t first_row;  ///< first row of this group
  int64_t chunks;     ///< per row
  int64_t chunk_length;
};

template <typename T>
__device__ __forceinline__ RowSegment<T> chunk_of(const SoftmaxProblem& problem, const SplitPlan& plan, int64_t row) {
  const int64_t begin = int64_t{blockIdx.x} * plan.chunk_length;
  const int64_t length = min(plan.chunk_length, problem.vocab - begin);
  return RowSegment<T>(row_pointer<T>(problem.logits, row, problem.row_stride) + begin, begin, length);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) split_k_state_kernel(SoftmaxProblem problem, SplitPlan plan,
                                                                  SoftmaxState* states) {
  __shared__ SoftmaxState scratch[kThreads / 32];
  const int64_t row = plan.first_row + blockIdx.y;
  const SoftmaxState state =
      segment_state<kThreads, kSplitTailLoads<T>>(chunk_of<T>(problem, plan, row), problem.k, scratch);
  if (threadIdx.x == 0) states[int64_t{blockIdx.y} * plan.chunks + blockIdx.x] = state;
}

template <typename T, typename OutT>
__global__ void __launch_bounds__(kThreads) split_k_write_kernel(SoftmaxProblem problem, SplitPlan plan,
                                                                  const SoftmaxState* states) {
  __shared__ SoftmaxState scratch[kThreads / 32];
  const int64_t row = plan.first_row + blockIdx.y;
  const SoftmaxState* row_states = states + int64_t{blockIdx.y} * plan.chunks;
  SoftmaxState state = empty_state();
  for (int64_t c = threadIdx.x; c < plan.chunks; c += kThreads) state = merge(state, row_states[c], problem.k);
  const Normalizer normalizer(block_reduce<kThreads / 32, kSoftmaxStateMerge<T>>(state, problem.k, scratch), problem.k);
  if (blockIdx.x == 0 && threadIdx.x == 0 && problem.row_status)
    problem.row_status[row] = static_cast<int32_t>(normalizer.status);
  const RowSegment<T> chunk = chunk_of<T>(problem, plan, row);
  OutT* out = static_cast<OutT*>(problem.out) + row * problem.vocab + chunk.first_index;
  write_probabilities<kThreads, kSplitTailLoads<T>>(chunk, normalizer, out);
}

}  // namespace

std::size_t split_k_workspace_size(int64_t rows) {
  return static_cast<std::size_t>(std::min(rows, kSplitKMaxGroupRows) * kSplitKMaxChunks) * sizeof(SoftmaxState);
}

void launch_softmax_split_k(const SoftmaxProblem& problem, const DeviceInfo& device, void* workspace,
                            cudaStream_t stream) {
  const int64_t row_bytes = problem.vocab * static_cast<int64_t>(dtype_size(problem.dtype));
  const int64_t group_rows = std::clamp<int64_t>(device.l2_bytes / 2 / row_bytes, 1, kSplitKMaxGroupRows);
  auto* states = static_cast<SoftmaxState*>(workspace);

  with_input_output_types(problem.dtype, problem.out_dtype, [&](auto in, auto out) {
    using T = typename decltype(in)::type;
    using OutT = typename decltype(out)::type;
    // The chunking depends on V and the device only, never on the row count, so a row gets the
    // same bits whatever batch it sits in: enough chunks for a few CTAs per SM on one row, none
    // shorter than kMinChunkElements.
    const int64_t chunks_by_size = (problem.vocab + kMinChunkElements - 1) / kMinChunkElements;
    int64_t chunks = std::clamp<int64_t>(std::min<int64_t>(int64_t{device.sm_count} * 4, chunks_by_size), 1,
                                         kSplitKMaxChunks);
    int64_t length = (problem.vocab + chunks - 1) / chunks;
    length = (length + kChunkGranule - 1) / kChunkGranule * kChunkGranule;
    chunks = (problem.vocab + length - 1) / length;
    for (int64_t first = 0; first < problem.rows; first += group_rows) {
      const int64_t rows = std::min(group_rows, problem.rows - first);
      const SplitPlan plan{first, chunks, length};
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows));
      split_k_state_kernel<T><<<grid, kThreads, 0, stream>>>(problem, plan, states);
      SOFTK_CHECK_LAUNCH();
      split_k_write_kernel<T, OutT><<<grid, kThreads, 0, stream>>>(problem, plan, states);
      SOFTK_CHECK_LAUNCH();
    }
  });
}

}  // namespace softk::kernels
