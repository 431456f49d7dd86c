// softk::Sampler: what a decode loop holds. One device workspace, allocated once when the
// Sampler is made and large enough for softmax, topk and sample on every shape within its
// limits; its calls are the free functions (softmax.hpp, topk.hpp, sample.hpp) on that
// workspace: stream-ordered, no allocation or host synchronisation, CUDA-graph capturable.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "softk/sample.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"
#include "softk/types.hpp"

namespace softk {

/// The shapes a Sampler serves: logits of this dtype and vocabulary, at most max_rows rows
/// (batch x steps), and a top_k of at most max_k (topk's K; sample's scalar top_k, which per-row
/// top_ks then need as their bound unless max_k is the vocabulary).
struct SamplerLimits {
  DType dtype = DType::f32;
  int64_t vocab = 0;     ///< 1 <= vocab < 2^31
  int64_t max_rows = 1;  ///< >= 1
  int32_t max_k = 1;     ///< in [1, vocab]
};

/// A workspace for its limits, on the device current when it is made (calls must run with that
/// device current). Calls share it, so calls on different streams must be ordered by the caller
/// (one stream, as a decode loop has, needs nothing), and a CUDA graph that captured calls uses
/// it: keep the Sampler alive while the graph may replay. A shape or top_k past the limits throws
/// softk::Error naming the limit, before anything is launched; a forced algorithm needing more
/// workspace than automatic's throws naming workspace_bytes (the workspace is sized for
/// automatic). A moved-from Sampler holds no workspace (workspace_bytes() is 0).
class Sampler {
 public:
  /// Throws softk::Error for limits out of range (before any CUDA call), softk::CudaError where
  /// the allocation fails. Sizing asks each op's workspace size at every K up to max_k.
  explicit Sampler(const SamplerLimits& limits);
  ~Sampler();
  Sampler(Sampler&& other) noexcept;
  Sampler& operator=(Sampler&& other) noexcept;
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  const SamplerLimits& limits() const { return limits_; }
  std::size_t workspace_bytes() const { return bytes_; }

  void softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options, cudaStream_t stream) const;
  void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options,
            cudaStream_t stream) const;
  void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status,
              cudaStream_t stream) const;

 private:
  void check_within_limits(const LogitsView& logits) const;

  SamplerLimits limits_;
  void* workspace_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace softk
