// sampler — where the ops run: softk's GPU ops on a CUDA device, or its CPU backend.
#pragma once

#include <cstdint>
#include <memory>

#include "softk/sample.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace sampler {

/// automatic: cuda when cudaGetDeviceCount reports a device, else cpu.
enum class BackendKind { automatic, cuda, cpu };

/// Runs softk ops on chunks of rows that live in host memory, writing host outputs. A backend
/// keeps whatever device buffers it needs across calls, so a run allocates once.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cuda" or "cpu".
  virtual const char* name() const = 0;
  /// softk::softmax of `chunk` into `probs` ([rows, V] f32) and `row_status` ([rows] RowStatus).
  /// options.row_status is set by the backend. Throws softk::Error, softk::CudaError or
  /// sampler::Error.
  virtual void softmax(const softk::LogitsView& chunk, float* probs, int32_t* row_status,
                       softk::SoftmaxOptions options) = 0;
  /// softk::topk of `chunk` into `values` and `indices` ([rows, k]) and `row_status` ([rows]).
  virtual void topk(const softk::LogitsView& chunk, int32_t k, float* values, int32_t* indices, int32_t* row_status,
                    softk::TopkOptions options) = 0;
  /// One token a row of `chunk` into `tokens` ([rows]) and `row_status` ([rows]); params' arrays
  /// (where non-null) are host memory, [rows] each.
  virtual void sample(const softk::LogitsView& chunk, const softk::SamplingParams& params, int32_t* tokens,
                      int32_t* row_status) = 0;
};

/// The backend for `kind`. Throws sampler::Error when cuda is asked for and no device is usable.
std::unique_ptr<Backend> make_backend(BackendKind kind);

}  // namespace sampler
