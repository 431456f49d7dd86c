// Two-pass streaming softmax, for any V: a block per row reduces the row to (m, d), then reads
// it again to write the probabilities. The second read mostly hits L2: with one block of
// kThreads per SM slot, the rows in flight take (resident blocks x row bytes) of L2.
#include "cuda_check.hpp"
#include "kernels/softmax_launch.hpp"
#include "kernels/softmax_passes.cuh"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

constexpr int kThreads = 512;

template <typename T, typename OutT>
__global__ void __launch_bounds__(kThreads) softmax_two_pass_kernel(SoftmaxProblem problem) {
  __shared__ SoftmaxState scratch[kThreads / 32];
  const int64_t row = blockIdx.x;
  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const Normalizer normalizer(segment_state<kThreads>(segment, problem.k, scratch), problem.k);
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);
  write_probabilities<kThreads>(segment, normalizer, static_cast<OutT*>(problem.out) + row * problem.vocab);
}

}  // namespace

void launch_softmax_two_pass(const SoftmaxProblem& problem, cudaStream_t stream) {
  with_input_output_types(problem.dtype, problem.out_dtype, [&](auto in, auto out) {
    using T = typename decltype(in)::type;
    using OutT = typename decltype(out)::type;
    softmax_two_pass_kernel<T, OutT><<<static_cast<unsigned>(problem.rows), kThreads, 0, stream>>>(problem);
    SOFTK_CHECK_LAUNCH();
  });
}

}  // namespace softk::kernels
