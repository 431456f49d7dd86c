// softk::Sampler (softk/sampler.hpp): the limits checked, one workspace sized for them by the
// ops' own size queries, then every call forwarded to the free function on it.
#include "softk/sampler.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "cuda_check.hpp"
#include "validate.hpp"

namespace softk {
namespace {

/// The largest batch of the limits, as a view for the size queries (which read no data).
LogitsView largest_batch(const SamplerLimits& limits) {
  LogitsView view;
  view.dtype = limits.dtype;
  view.batch = limits.max_rows;
  view.vocab = limits.vocab;
  return view;
}

void validate_limits(const SamplerLimits& limits) {
  detail::validate_input_dtype(limits.dtype, "limits.dtype");
  SOFTK_REQUIRE(limits.vocab >= 1 && limits.vocab < (int64_t{1} << 31), "limits.vocab must be in [1, 2^31)",
                std::to_string(limits.vocab));
  SOFTK_REQUIRE(limits.max_rows >= 1, "limits.max_rows must be >= 1", std::to_string(limits.max_rows));
  SOFTK_REQUIRE(limits.max_k >= 1 && limits.max_k <= limits.vocab, "limits.max_k must be in [1, limits.vocab]",
                std::to_string(limits.max_k));
}

/// Bytes for every call within the limits: softmax into either output dtype, and topk and sample
/// at each K up to max_k (the sizes need not grow with K, as the algorithm a K takes may change),
/// sample also with no top_k, and, where max_k is the vocabulary, with per-row top_ks ranking
/// the whole row. A size serves every smaller batch (each op's size query says so).
std::size_t workspace_for(const SamplerLimits& limits) {
  const LogitsView view = largest_batch(limits);
  std::size_t bytes = 0;
  for (DType out : {DType::f32, limits.dtype}) {
    SoftmaxOptions options;
    options.out_dtype = out;
    bytes = std::max(bytes, softmax_workspace_size(view, options));
  }
  SamplingParams no_top_k;
  bytes = std::max(bytes, sample_workspace_size(view, no_top_k));
  for (int32_t k = 1; k <= limits.max_k; ++k) {
    SamplingParams top_k;
    top_k.top_k = k;
    bytes = std::max({bytes, topk_workspace_size(view, k), sample_workspace_size(view, top_k)});
  }
  if (limits.max_k == limits.vocab) {
    static const int32_t kSizeQueryTopKs = 0;  // the size query reads no array
    SamplingParams per_row;
    per_row.top_ks = &kSizeQueryTopKs;
    bytes = std::max(bytes, sample_workspace_size(view, per_row));
  }
  return bytes;
}

}  // namespace

Sampler::Sampler(const SamplerLimits& limits) : limits_(limits) {
  validate_limits(limits);
  bytes_ = workspace_for(limits);
  if (bytes_ > 0) SOFTK_CUDA_CHECK(cudaMalloc(&workspace_, bytes_));
}

Sampler::~Sampler() {
  if (workspace_ != nullptr) (void)cudaFree(workspace_);  // a destructor must not throw
}

Sampler::Sampler(Sampler&& other) noexcept
    : limits_(other.limits_),
      workspace_(std::exchange(other.workspace_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Sampler& Sampler::operator=(Sampler&& other) noexcept {
  if (this != &other) {
    if (workspace_ != nullptr) (void)cudaFree(workspace_);
    limits_ = other.limits_;
    workspace_ = std::exchange(other.workspace_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Sampler::check_within_limits(const LogitsView& logits) const {
  detail::validate_logits_shape(logits);  // first: rows() of a bad shape may overflow
  SOFTK_REQUIRE(logits.dtype == limits_.dtype,
                std::string("logits.dtype must be the Sampler's limits.dtype, ") + to_string(limits_.dtype),
                to_string(logits.dtype));
  SOFTK_REQUIRE(logits.vocab == limits_.vocab,
                "logits.vocab must be the Sampler's limits.vocab, " + std::to_string(limits_.vocab),
                std::to_string(logits.vocab));
  SOFTK_REQUIRE(logits.rows() <= limits_.max_rows,
                "logits.rows() must be at most the Sampler's limits.max_rows, " + std::to_string(limits_.max_rows),
                std::to_string(logits.rows()));
}

void Sampler::softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options, cudaStream_t stream) const {
  check_within_limits(logits);
  softk::softmax(logits, out, options, workspace_, bytes_, stream);
}

void Sampler::topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
                   cudaStream_t stream) const {
  check_within_limits(logits);
  SOFTK_REQUIRE(k <= limits_.max_k, "k must be at most the Sampler's limits.max_k, " + std::to_string(limits_.max_k),
                std::to_string(k));
  softk::topk(logits, k, probs, indices, options, workspace_, bytes_, stream);
}

void Sampler::sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
                     cudaStream_t stream) const {
  check_within_limits(logits);
  // A scalar top_k of V bounds nothing (the nucleus kernel, no ranking); per-row top_ks under no
  // scalar bound rank the whole row, which only a Sampler sized for K = V holds.
  SOFTK_REQUIRE(params.top_k <= limits_.max_k || (params.top_k == limits_.vocab && params.top_ks == nullptr),
                "params.top_k must be at most the Sampler's limits.max_k, " + std::to_string(limits_.max_k),
                std::to_string(params.top_k));
  SOFTK_REQUIRE(params.top_ks == nullptr || params.top_k > 0 || limits_.max_k == limits_.vocab,
                "params.top_ks needs a scalar params.top_k bound of at most the Sampler's limits.max_k, " +
                    std::to_string(limits_.max_k),
                "params.top_k " + std::to_string(params.top_k));
  softk::sample(logits, params, tokens, row_status, workspace_, bytes_, stream);
}

}  // namespace softk
