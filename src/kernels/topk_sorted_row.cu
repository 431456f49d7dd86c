// Fused softmax + top-k of a short row at a large K (V <= 1024, K > 64): a block sorts the whole
// row. The block-per-row core (topk_fused.cu) bounds, lists and selects, and those phases cost
// the same on a row of 1000 tokens as on one of 100000: at K = 256 they were the whole time
// (8192 x 1000 f32: 352 us on an H100, 1.4x torch.softmax + topk; 8192 x 16000 took only 1.5x
// that). Here the block keys every token of its row into shared memory while it folds (m, d),
// sorts the keys with the bitonic network (4 to 15 barriers for 128 to 1024 keys), and writes
// the first K. Keys are unique, so the order is the one there is: exact on every input.
#include "cuda_check.hpp"
#include "kernels/block_topk.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/kernel_launch.hpp"
#include "kernels/online_softmax.cuh"
#include "kernels/softmax_passes.cuh"
#include "kernels/topk_key.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

// A small block: at 1000 tokens a thread keys four, and a barrier of eight warps is cheap.
constexpr int kSortedRowThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kSortedRowThreads) topk_sorted_row_kernel(TopkProblem problem, unsigned padded) {
  extern __shared__ TopkKey row_keys[];  // `padded` keys: bitonic_sort_length(V)
  __shared__ SoftmaxState scratch[kSortedRowThreads / 32];
  enter_after_previous_grid();

  const int64_t row = blockIdx.x;
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  SoftmaxState state = empty_state();
  for_each_element<kStreamUnroll>(segment, static_cast<int>(threadIdx.x), kSortedRowThreads, [&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    visit_elements(group, 0, [&](float x, int64_t index) { row_keys[index] = make_key(x, index); });
  });
  for (auto i = static_cast<unsigned>(problem.vocab) + threadIdx.x; i < padded; i += kSortedRowThreads)
    row_keys[i] = kEmptyKey;  // sorts last
  // block_reduce's barriers also publish the keys to the sort.
  const RowOutput<kSortedRowThreads> write(problem, row,
                                           block_reduce<kSortedRowThreads / 32>(state, problem.k_exp, scratch));
  if (write.wrote_nan_row()) return;  // block-uniform
  block_bitonic_sort_descending<kSortedRowThreads>(row_keys, padded);
  for (unsigned j = threadIdx.x; j < static_cast<unsigned>(problem.k); j += kSortedRowThreads) write(j, row_keys[j]);
}

}  // namespace

bool topk_sorted_row_fits(int64_t vocab, int32_t k) { return k > kWarpRowMaxK && vocab <= kSortedRowMaxVocab; }

// A programmatic dependent launch where it pays (programmatic_launch_pays; five of these blocks fit
// an SM, so a grid of up to four an SM counts as crowded). Measured, programmatic against not
// (rows of 1000 at K = 256, H200, one run, f32 / bf16): 8 and 64 rows 1.09-1.12x, 256 rows 0.61 /
// 0.84x (the next op's blocks pile onto the SMs that freed first), 512 rows 0.91 / 1.06x, 1024
// rows 1.05 / 1.04x, 2048 1.02x, 8192 1.00x.
void launch_topk_sorted_rows(const TopkProblem& problem, const DeviceInfo& device, const LaunchContext& launch) {
  const unsigned padded = bitonic_sort_length(static_cast<unsigned>(problem.vocab));  // V <= kSortedRowMaxVocab
  const bool programmatic =
      launch.programmatic && programmatic_launch_pays(problem.rows, int64_t{4} * device.sm_count, device);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    KernelLaunch(dim3(static_cast<unsigned>(problem.rows)), kSortedRowThreads, padded * sizeof(TopkKey),
                 launch.stream)
        .programmatic(programmatic)(topk_sorted_row_kernel<T>, problem, padded);
  });
}

}  // namespace softk::kernels
