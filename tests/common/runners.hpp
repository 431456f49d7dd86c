// Runs one softk GPU op (or the CUB reference) on device-resident logits the way a careful
// caller would, and brings back everything a test needs to judge it:
//  - outputs and row_status are poisoned before the op and guarded after it (see gpu.hpp);
//  - the workspace is exactly the queried size (null when 0), so an overrun is a sanitizer hit;
//  - a softk::Error is caught and returned as a refusal, with a check that nothing was written;
//  - the stream is synchronised and any asynchronous fault is thrown as a test failure.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "softk/reference.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace softk_test {

/// Logits on the device, laid out byte-for-byte like the HostLogits they came from (garbage
/// prefix and padding included), in an allocation of exactly that size.
struct DeviceLogits {
  DeviceBuffer buffer;
  softk::LogitsView view;
};

inline DeviceLogits to_device(const HostLogits& h, cudaStream_t stream) {
  DeviceLogits d;
  d.buffer = DeviceBuffer(h.bytes.size());
  upload(d.buffer.get(), h.bytes.data(), h.bytes.size(), stream);
  d.view = h.view_at(d.buffer.get());
  return d;
}

// ---------------------------------------------------------------------------------------------
// Which implementation runs: every forced algorithm, the dispatcher, and the CUB reference.

enum class SoftmaxImpl { automatic, register_resident, shared_memory, two_pass, split_k, reference };
enum class TopkImpl { automatic, fused, radix_select, split_k, reference };

inline const char* impl_name(SoftmaxImpl i) {
  switch (i) {
    case SoftmaxImpl::automatic: return "auto";
    case SoftmaxImpl::register_resident: return "register";
    case SoftmaxImpl::shared_memory: return "smem";
    case SoftmaxImpl::two_pass: return "two_pass";
    case SoftmaxImpl::split_k: return "split_k";
    case SoftmaxImpl::reference: return "reference";
  }
  return "unknown";
}
inline const char* impl_name(TopkImpl i) {
  switch (i) {
    case TopkImpl::automatic: return "auto";
    case TopkImpl::fused: return "fused";
    case TopkImpl::radix_select: return "radix_select";
    case TopkImpl::split_k: return "split_k";
    case TopkImpl::reference: return "reference";
  }
  return "unknown";
}

inline void PrintTo(SoftmaxImpl i, std::ostream* os) { *os << impl_name(i); }
inline void PrintTo(TopkImpl i, std::ostream* os) { *os << impl_name(i); }

inline softk::SoftmaxAlgorithm algorithm_of(SoftmaxImpl i) {
  switch (i) {
    case SoftmaxImpl::register_resident: return softk::SoftmaxAlgorithm::register_resident;
    case SoftmaxImpl::shared_memory: return softk::SoftmaxAlgorithm::shared_memory;
    case SoftmaxImpl::two_pass: return softk::SoftmaxAlgorithm::two_pass;
    case SoftmaxImpl::split_k: return softk::SoftmaxAlgorithm::split_k;
    default: return softk::SoftmaxAlgorithm::automatic;
  }
}
inline softk::TopkAlgorithm algorithm_of(TopkImpl i) {
  switch (i) {
    case TopkImpl::fused: return softk::TopkAlgorithm::fused;
    case TopkImpl::radix_select: return softk::TopkAlgorithm::radix_select;
    case TopkImpl::split_k: return softk::TopkAlgorithm::split_k;
    default: return softk::TopkAlgorithm::automatic;
  }
}

const SoftmaxImpl kAllSoftmaxImpls[] = {SoftmaxImpl::automatic, SoftmaxImpl::register_resident, SoftmaxImpl::shared_memory,
                                        SoftmaxImpl::two_pass,  SoftmaxImpl::split_k,           SoftmaxImpl::reference};
const TopkImpl kAllTopkImpls[] = {TopkImpl::automatic, TopkImpl::fused, TopkImpl::radix_select, TopkImpl::split_k,
                                  TopkImpl::reference};

/// The forced paths limited to K <= kMaxFastTopK (topk.hpp): fused and split_k. Forced beyond
/// that they must refuse (softk::Error naming K and the algorithm); nothing else may refuse a
/// valid K.
inline bool is_fast_topk_path(TopkImpl i) { return i == TopkImpl::fused || i == TopkImpl::split_k; }
inline bool must_refuse(TopkImpl impl, int32_t k) { return is_fast_topk_path(impl) && k > softk::kMaxFastTopK; }

/// Names the algorithm in a capacity refusal: its to_string spelling ("fused", "split_k"), as a
/// whole token.
inline bool names_topk_algorithm(const std::string& msg, TopkImpl i) {
  return contains_token(msg, softk::to_string(algorithm_of(i)));
}

/// Names the algorithm in a capacity refusal: its enum spelling or its to_string spelling.
inline bool names_softmax_algorithm(const std::string& msg, SoftmaxImpl i) {
  const std::string m = lower(msg);
  switch (i) {
    case SoftmaxImpl::register_resident: return m.find("register") != std::string::npos;
    case SoftmaxImpl::shared_memory:
      return m.find("shared_memory") != std::string::npos || m.find("smem") != std::string::npos ||
             m.find("shared memory") != std::string::npos;
    default: return m.find(impl_name(i)) != std::string::npos;
  }
}

/// Workspace contents are the op's business: a fresh cudaMalloc is often zero, which would hide
/// an op that relies on zeroed counters or states without resetting them itself (the graph
/// tests replay on the same workspace). So every workspace starts as poison.
inline void poison_workspace(const DeviceBuffer& ws, cudaStream_t stream) {
  if (ws.bytes() > 0) SOFTK_TEST_CUDA(cudaMemsetAsync(ws.get(), kPoisonByte, ws.bytes(), stream));
}

// ---------------------------------------------------------------------------------------------
// softmax

struct SoftmaxRun {
  bool refused = false;              ///< the op threw softk::Error
  std::string error;                 ///< its message
  bool untouched_after_refusal = true;
  std::vector<unsigned char> raw;    ///< [rows, V] in out_dtype, as written
  std::vector<float> probs;          ///< raw decoded to fp32
  std::vector<int32_t> status;       ///< [rows] when requested
  std::string guard_violation;       ///< non-empty when something was written past an output
};

struct SoftmaxCall {
  SoftmaxImpl impl = SoftmaxImpl::automatic;
  float temperature = 1.0f;
  softk::DType out_dtype = softk::DType::f32;
  bool with_status = true;
};

/// Outputs of one softmax call, owned so that a test can also launch into them itself (graphs).
struct SoftmaxBuffers {
  GuardedOutput out, status;
  DeviceBuffer workspace;
};

inline softk::SoftmaxOptions options_of(const SoftmaxCall& c, int32_t* status) {
  softk::SoftmaxOptions o;
  o.temperature = c.temperature;
  o.out_dtype = c.out_dtype;
  o.algorithm = algorithm_of(c.impl);
  o.row_status = status;
  return o;
}

/// Allocates (poisoned) outputs and the exact workspace for `c`; throws softk::Error when the
/// size query itself refuses.
inline SoftmaxBuffers make_softmax_buffers(const softk::LogitsView& v, const SoftmaxCall& c, cudaStream_t stream) {
  SoftmaxBuffers b;
  const std::size_t n = static_cast<std::size_t>(v.rows() * v.vocab);
  b.out = GuardedOutput(n * element_size(c.out_dtype), stream);
  if (c.with_status) b.status = GuardedOutput(static_cast<std::size_t>(v.rows()) * sizeof(int32_t), stream);
  if (c.impl != SoftmaxImpl::reference) {
    const std::size_t ws = softk::softmax_workspace_size(v, options_of(c, nullptr));
    b.workspace = DeviceBuffer(ws);
    poison_workspace(b.workspace, stream);
  }
  return b;
}

/// Launches the op into `b` (no synchronisation: usable under stream capture).
inline void launch_softmax(const softk::LogitsView& v, const SoftmaxCall& c, SoftmaxBuffers& b, cudaStream_t stream) {
  const softk::SoftmaxOptions o = options_of(c, c.with_status ? b.status.as<int32_t>() : nullptr);
  if (c.impl == SoftmaxImpl::reference) softk::reference::softmax(v, b.out.as<float>(), o, stream);
  else softk::softmax(v, b.out.get(), o, b.workspace.get(), b.workspace.bytes(), stream);
}

/// Downloads and decodes the outputs; checks both guards.
inline SoftmaxRun collect_softmax(const softk::LogitsView& v, const SoftmaxCall& c, const SoftmaxBuffers& b, cudaStream_t stream) {
  SoftmaxRun r;
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
  const std::size_t n = static_cast<std::size_t>(v.rows() * v.vocab);
  r.raw = download<unsigned char>(b.out.get(), n * element_size(c.out_dtype), stream);
  r.probs = decode(c.out_dtype, r.raw.data(), n);
  if (c.with_status) r.status = download<int32_t>(b.status.get(), static_cast<std::size_t>(v.rows()), stream);
  r.guard_violation = b.out.guard_violation(stream);
  if (r.guard_violation.empty() && c.with_status) r.guard_violation = b.status.guard_violation(stream);
  return r;
}

inline SoftmaxRun run_softmax(const softk::LogitsView& v, const SoftmaxCall& c, cudaStream_t stream) {
  SoftmaxRun r;
  SoftmaxBuffers b;
  try {
    b = make_softmax_buffers(v, c, stream);
    launch_softmax(v, c, b, stream);
  } catch (const softk::Error& e) {
    r.refused = true;
    r.error = e.what();
    // "Thrown before anything is launched or written": the poison must be intact. Checked only
    // for outputs up to 64 MB to keep the big refusals cheap.
    if (b.out.get() && b.out.payload_bytes() <= (std::size_t{64} << 20)) r.untouched_after_refusal = b.out.untouched(stream);
    return r;
  }
  return collect_softmax(v, c, b, stream);
}

// ---------------------------------------------------------------------------------------------
// top-k

struct TopkCall {
  TopkImpl impl = TopkImpl::automatic;
  int32_t k = 1;
  float temperature = 1.0f;
  bool log_probs = false;
  bool with_status = true;
};

struct TopkBuffers {
  GuardedOutput probs, indices, status;
  DeviceBuffer workspace;
};

struct TopkRun {
  bool refused = false;
  std::string error;
  bool untouched_after_refusal = true;
  std::vector<float> probs;       ///< [rows, K]
  std::vector<int32_t> indices;   ///< [rows, K]
  std::vector<int32_t> status;    ///< [rows] when requested
  std::string guard_violation;
};

inline softk::TopkOptions options_of(const TopkCall& c, int32_t* status) {
  softk::TopkOptions o;
  o.temperature = c.temperature;
  o.log_probs = c.log_probs;
  o.algorithm = algorithm_of(c.impl);
  o.row_status = status;
  return o;
}

inline TopkBuffers make_topk_buffers(const softk::LogitsView& v, const TopkCall& c, cudaStream_t stream) {
  TopkBuffers b;
  const std::size_t n = static_cast<std::size_t>(v.rows()) * static_cast<std::size_t>(c.k);
  b.probs = GuardedOutput(n * sizeof(float), stream);
  b.indices = GuardedOutput(n * sizeof(int32_t), stream);
  if (c.with_status) b.status = GuardedOutput(static_cast<std::size_t>(v.rows()) * sizeof(int32_t), stream);
  const std::size_t ws = c.impl == TopkImpl::reference ? softk::reference::topk_workspace_size(v, c.k)
                                                       : softk::topk_workspace_size(v, c.k, options_of(c, nullptr));
  b.workspace = DeviceBuffer(ws);
  poison_workspace(b.workspace, stream);
  return b;
}

inline void launch_topk(const softk::LogitsView& v, const TopkCall& c, TopkBuffers& b, cudaStream_t stream) {
  const softk::TopkOptions o = options_of(c, c.with_status ? b.status.as<int32_t>() : nullptr);
  if (c.impl == TopkImpl::reference)
    softk::reference::topk(v, c.k, b.probs.as<float>(), b.indices.as<int32_t>(), o, b.workspace.get(), b.workspace.bytes(), stream);
  else
    softk::topk(v, c.k, b.probs.as<float>(), b.indices.as<int32_t>(), o, b.workspace.get(), b.workspace.bytes(), stream);
}

inline TopkRun collect_topk(const softk::LogitsView& v, const TopkCall& c, const TopkBuffers& b, cudaStream_t stream) {
  TopkRun r;
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
  const std::size_t n = static_cast<std::size_t>(v.rows()) * static_cast<std::size_t>(c.k);
  r.probs = download<float>(b.probs.get(), n, stream);
  r.indices = download<int32_t>(b.indices.get(), n, stream);
  if (c.with_status) r.status = download<int32_t>(b.status.get(), static_cast<std::size_t>(v.rows()), stream);
  r.guard_violation = b.probs.guard_violation(stream);
  if (r.guard_violation.empty()) r.guard_violation = b.indices.guard_violation(stream);
  if (r.guard_violation.empty() && c.with_status) r.guard_violation = b.status.guard_violation(stream);
  return r;
}

inline TopkRun run_topk(const softk::LogitsView& v, const TopkCall& c, cudaStream_t stream) {
  TopkRun r;
  TopkBuffers b;
  try {
    b = make_topk_buffers(v, c, stream);
    launch_topk(v, c, b, stream);
  } catch (const softk::Error& e) {
    r.refused = true;
    r.error = e.what();
    if (b.probs.get() && b.probs.payload_bytes() <= (std::size_t{64} << 20))
      r.untouched_after_refusal = b.probs.untouched(stream) && b.indices.untouched(stream);
    return r;
  }
  return collect_topk(v, c, b, stream);
}

// ---------------------------------------------------------------------------------------------
// A one-entry cache: the parameterised suites order their cases so that consecutive tests share
// the input (and its oracle answer) and differ only in the implementation; the cache then saves
// regenerating, re-uploading and re-running the double-precision oracle, which dominate the
// runtime of the large shapes. With --gtest_shuffle it only misses more often.

template <class T>
class LastCase {
 public:
  template <class Make>
  T& get(const std::string& key, Make&& make) {
    if (!value_ || key != key_) {
      value_.reset();  // free the previous (possibly GB-sized) entry before building the next
      value_ = std::make_unique<T>(make());
      key_ = key;
    }
    return *value_;
  }
  void clear() { value_.reset(); key_.clear(); }

 private:
  std::string key_;
  std::unique_ptr<T> value_;
};

/// Input bytes (logical elements only) above which a shape is skipped: rows x V x 4 bytes of f32
/// beyond ~2 GB would make the suite slow without adding coverage.
constexpr int64_t kMaxInputBytes = int64_t{2} << 30;

}  // namespace softk_test
