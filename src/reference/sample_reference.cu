// Reference sampling: softk::reference::topk ranks every row whole (K = V, a stable radix sort),
// then one thread a row takes softk::cpu::sample's steps in double, one token at a time: the
// weights exp((x - max) / T), the top_k kept, the first ranks reaching top_p of their weight and
// those at least min_p of the first's, marked; then the running sum over the marked tokens in
// token order first passing u x their total. Slow (every row sorted, every step serial), simple.
#include <cmath>
#include <cstdint>

#include "cuda_check.hpp"
#include "kernels/sample_draw.cuh"
#include "philox.hpp"
#include "softk/reference.hpp"
#include "validate.hpp"
#include "workspace.hpp"

namespace softk::reference {
namespace {

struct SampleReferenceWorkspace {
  float* probabilities;   ///< [rows, V], written by the ranking, unread
  int32_t* ranked;        ///< [rows, V]
  int32_t* status;        ///< [rows], where the caller gives no row_status
  unsigned char* marked;  ///< [rows, V]: the row's candidates
  void* topk;
  std::size_t topk_bytes;
  std::size_t bytes;
};

SampleReferenceWorkspace carve(const LogitsView& logits, void* base) {
  detail::WorkspaceCarver carver(base);
  const auto items = static_cast<std::size_t>(logits.rows() * logits.vocab);
  SampleReferenceWorkspace w{};
  w.probabilities = carver.take<float>(items);
  w.ranked = carver.take<int32_t>(items);
  w.status = carver.take<int32_t>(static_cast<std::size_t>(logits.rows()));
  w.marked = carver.take<unsigned char>(items);
  w.topk_bytes = reference::topk_workspace_size(logits, static_cast<int32_t>(logits.vocab));
  w.topk = carver.take<unsigned char>(w.topk_bytes);
  w.bytes = carver.bytes();
  return w;
}

struct DrawProblem {
  const void* logits;
  int64_t rows, vocab, row_stride;
  const int32_t* ranked;
  const int32_t* status;
  unsigned char* marked;
  SamplingParams params;
  int32_t* tokens;
};

template <typename T>
__global__ void reference_draw_kernel(DrawProblem problem) {
  const int64_t row = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (row >= problem.rows) return;
  if (problem.status[row] != static_cast<int32_t>(RowStatus::ok)) {
    problem.tokens[row] = -1;
    return;
  }
  const int64_t vocab = problem.vocab;
  const T* x = kernels::row_pointer<T>(problem.logits, row, problem.row_stride);
  const int32_t* order = problem.ranked + row * vocab;
  unsigned char* marked = problem.marked + row * vocab;
  const int32_t bound = problem.params.top_k > 0 ? problem.params.top_k : static_cast<int32_t>(vocab);
  const kernels::sampling::RowSampling p = kernels::sampling::row_sampling(problem.params, row, bound);
  if (p.k_exp == 0.0f) {  // greedy: the first token in the contract's order
    problem.tokens[row] = order[0];
    return;
  }
  const double largest = kernels::to_float(x[order[0]]);
  const double inv_temperature = 1.0 / static_cast<double>(p.temperature);
  const auto weight = [&](int64_t token) {
    const double v = kernels::to_float(x[token]);
    if (isinf(largest)) return v == largest ? 1.0 : 0.0;
    return exp((v - largest) * inv_temperature);
  };
  // The ranks kept by top_k, then the shortest prefix that top_p and min_p allow.
  double kept = 0.0;
  for (int64_t j = 0; j < p.top_k; ++j) kept += order[j] < 0 ? 0.0 : weight(order[j]);
  const double nucleus = static_cast<double>(p.top_p) * kept;
  const double floor = static_cast<double>(p.min_p);  // the first rank weighs 1
  int64_t count = 0;
  double running = 0.0;
  while (count < p.top_k && running < nucleus) {
    const int32_t token = order[count++];
    running += token < 0 ? 0.0 : weight(token);
  }
  int64_t by_min = 1;
  while (by_min < p.top_k && order[by_min] >= 0 && weight(order[by_min]) >= floor) ++by_min;
  if (floor <= 0.0) by_min = p.top_k;  // min_p 0 bounds nothing (a -inf rank weighs 0 >= 0)
  count = min(count, by_min);
  for (int64_t i = 0; i < vocab; ++i) marked[i] = 0;
  for (int64_t j = 0; j < count; ++j)
    if (order[j] >= 0) marked[order[j]] = 1;
  // The draw over the marked tokens in token order.
  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    if (marked[i]) total += weight(i);
  const double target = detail::sampling_uniform(p.seed, p.offset) * total;
  double sum = 0.0;
  int64_t last_weighted = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!marked[i]) continue;
    const double w = weight(i);
    if (w <= 0.0) continue;
    sum += w;
    last_weighted = i;
    if (sum > target) break;
  }
  problem.tokens[row] = static_cast<int32_t>(last_weighted);
}

}  // namespace

std::size_t sample_workspace_size(const LogitsView& logits, const SamplingParams& params) {
  detail::validate_logits_shape(logits);
  detail::validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/false);
  return carve(logits, nullptr).bytes;
}

void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
            void* workspace, std::size_t workspace_bytes, cudaStream_t stream) {
  detail::validate_sample_call(logits, params, tokens, row_status);
  const SampleReferenceWorkspace w = carve(logits, workspace);  // its offsets do not depend on the base
  detail::validate_workspace(workspace, workspace_bytes, w.bytes);

  int32_t* status = row_status != nullptr ? row_status : w.status;
  TopkOptions ranking;
  ranking.row_status = status;
  reference::topk(logits, static_cast<int32_t>(logits.vocab), w.probabilities, w.ranked, ranking, w.topk,
                  w.topk_bytes, stream);
  const DrawProblem problem{logits.data, logits.rows(), logits.vocab, logits.stride(), w.ranked,
                            status,      w.marked,      params,       tokens};
  constexpr int kThreads = 64;
  const auto blocks = static_cast<unsigned>((logits.rows() + kThreads - 1) / kThreads);
  kernels::with_input_type(logits.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    reference_draw_kernel<T><<<blocks, kThreads, 0, stream>>>(problem);
    SOFTK_CHECK_LAUNCH();
  });
}

}  // namespace softk::reference
