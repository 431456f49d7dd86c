// Reference softmax: a block per row, three cub::BlockReduce-backed passes, scalar loads.
#include "cuda_check.hpp"
#include "kernels/type_dispatch.cuh"
#include "reference/row_stats_reference.cuh"
#include "softk/reference.hpp"
#include "validate.hpp"

namespace softk::reference {
namespace {

template <typename T>
__global__ void __launch_bounds__(kReferenceThreads)
    reference_softmax_kernel(const void* logits, int64_t vocab, int64_t stride, float inv_temperature, float* out,
                             int32_t* row_status) {
  const int64_t row = blockIdx.x;
  const T* x = kernels::row_pointer<T>(logits, row, stride);
  const ReferenceRowStats stats = reference_row_stats(x, vocab, inv_temperature);
  if (threadIdx.x == 0 && row_status) row_status[row] = static_cast<int32_t>(stats.status);
  for (int64_t v = threadIdx.x; v < vocab; v += kReferenceThreads)
    out[row * vocab + v] = stats.probability(kernels::to_float(x[v]), inv_temperature);
}

}  // namespace

void softmax(const LogitsView& logits, float* out, const SoftmaxOptions& options, cudaStream_t stream) {
  detail::validate_logits(logits);
  detail::validate_not_null(out, "out");
  detail::validate_temperature(options.temperature);
  SOFTK_REQUIRE(options.out_dtype == DType::f32, "reference::softmax writes f32 only (options.out_dtype)",
                to_string(options.out_dtype));
  detail::validate_softmax_outputs(out, options);
  kernels::with_input_type(logits.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    reference_softmax_kernel<T><<<static_cast<unsigned>(logits.rows()), kReferenceThreads, 0, stream>>>(
        logits.data, logits.vocab, logits.stride(), 1.0f / options.temperature, out, options.row_status);
    SOFTK_CHECK_LAUNCH();
  });
}

}  // namespace softk::reference
