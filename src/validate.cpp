#include "validate.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <sstream>

namespace softk::detail {

namespace {
std::string str(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

void fail(const std::string& what, const std::string& value) { throw Error("softk: " + what + " (got " + value + ")"); }

void validate_logits(const LogitsView& logits) {
  SOFTK_REQUIRE(logits.data != nullptr, "logits.data must not be null", "nullptr");
  validate_logits_shape(logits);
  validate_aligned(logits.data, "logits.data", dtype_size(logits.dtype));
}

void validate_aligned(const void* pointer, const char* name, std::size_t alignment) {
  const std::size_t offset = reinterpret_cast<uintptr_t>(pointer) % alignment;
  SOFTK_REQUIRE(offset == 0, std::string(name) + " must be " + std::to_string(alignment) + "-byte aligned",
                "address % " + std::to_string(alignment) + " = " + std::to_string(offset));
}

void validate_input_dtype(DType dtype, const char* name) {
  const auto d = static_cast<int32_t>(dtype);
  SOFTK_REQUIRE(d >= 0 && d <= 2, std::string(name) + " must be f32, f16 or bf16", std::to_string(d));
}

void validate_logits_shape(const LogitsView& logits) {
  validate_input_dtype(logits.dtype, "logits.dtype");
  SOFTK_REQUIRE(logits.batch >= 1, "logits.batch must be >= 1", str(logits.batch));
  SOFTK_REQUIRE(logits.steps >= 1, "logits.steps must be >= 1", str(logits.steps));
  SOFTK_REQUIRE(logits.vocab >= 1, "logits.vocab must be >= 1", str(logits.vocab));
  SOFTK_REQUIRE(logits.vocab < (int64_t{1} << 31), "logits.vocab must be < 2^31", str(logits.vocab));
  SOFTK_REQUIRE(logits.row_stride == 0 || logits.row_stride >= logits.vocab,
                "logits.row_stride must be 0 (dense) or >= vocab (" + str(logits.vocab) + ")", str(logits.row_stride));
  SOFTK_REQUIRE(logits.batch <= INT32_MAX / logits.steps, "logits.batch * logits.steps must be < 2^31",
                str(logits.batch) + " * " + str(logits.steps));
  // So that every byte offset of the view, rows x stride x element size, fits int64_t.
  const int64_t stride = logits.row_stride == 0 ? logits.vocab : logits.row_stride;
  SOFTK_REQUIRE(stride <= (int64_t{1} << 60) / logits.rows(), "logits rows x row_stride must be < 2^60 elements",
                str(logits.rows()) + " x " + str(stride));
}

namespace {
/// The kernels scale logits by log2(e) / temperature in fp32; a subnormal temperature would make
/// that infinite and every row NaN.
bool scale_fits_fp32(float temperature) { return std::isfinite(static_cast<float>(M_LOG2E / temperature)); }
}  // namespace

void validate_temperature(float temperature) {
  SOFTK_REQUIRE(std::isfinite(temperature) && temperature > 0.0f, "temperature must be finite and > 0",
                str(temperature));
  SOFTK_REQUIRE(scale_fits_fp32(temperature), "temperature must be >= 4.3e-39 (log2(e) / temperature must fit in fp32)",
                str(temperature));
}

void validate_k(const LogitsView& logits, int32_t k) {
  SOFTK_REQUIRE(k >= 1 && k <= logits.vocab, "k must be in [1, vocab=" + str(logits.vocab) + "]", str(int64_t{k}));
}

void validate_out_dtype(const LogitsView& logits, DType out_dtype) {
  const auto value = static_cast<int32_t>(out_dtype);
  const bool known = value >= 0 && value <= 2;
  SOFTK_REQUIRE(out_dtype == DType::f32 || out_dtype == logits.dtype,
                std::string("out_dtype must be f32 or the input dtype (") + to_string(logits.dtype) + ")",
                known ? std::string(to_string(out_dtype)) : std::to_string(value));
}

void validate_not_null(const void* pointer, const char* name) {
  SOFTK_REQUIRE(pointer != nullptr, std::string(name) + " must not be null", "nullptr");
}

void validate_workspace(const void* workspace, std::size_t bytes, std::size_t needed) {
  SOFTK_REQUIRE(bytes >= needed, "workspace_bytes must be >= " + std::to_string(needed), std::to_string(bytes));
  if (needed == 0) return;
  SOFTK_REQUIRE(workspace != nullptr, "workspace must not be null", "nullptr");
  validate_aligned(workspace, "workspace", kWorkspaceAlignment);
}

namespace {
/// options.row_status, where given, 4-byte aligned.
void validate_row_status(const int32_t* row_status) {
  if (row_status != nullptr) validate_aligned(row_status, "options.row_status", sizeof(int32_t));
}
}  // namespace

void validate_softmax_outputs(const void* out, const SoftmaxOptions& options) {
  validate_aligned(out, "out", dtype_size(options.out_dtype));
  validate_row_status(options.row_status);
}

void validate_topk_call(const LogitsView& logits, int32_t k, const float* probs, const int32_t* indices,
                        const TopkOptions& options) {
  validate_logits(logits);
  validate_k(logits, k);
  validate_not_null(probs, "probs");
  validate_aligned(probs, "probs", sizeof(float));
  validate_not_null(indices, "indices");
  validate_aligned(indices, "indices", sizeof(int32_t));
  validate_row_status(options.row_status);
  validate_temperature(options.temperature);
}

namespace {
/// "params.<name>", or "params.<name>s[<row>]" for a per-row value (row >= 0).
std::string param_name(const char* name, int64_t row) {
  return row < 0 ? std::string("params.") + name : std::string("params.") + name + "s[" + str(row) + "]";
}

void validate_sampling_temperature(float temperature, int64_t row) {
  SOFTK_REQUIRE(std::isfinite(temperature) && temperature >= 0.0f,
                param_name("temperature", row) + " must be finite and >= 0 (0: greedy)", str(temperature));
  SOFTK_REQUIRE(temperature == 0.0f || scale_fits_fp32(temperature),
                param_name("temperature", row) + " must be 0 or >= 4.3e-39 (log2(e) / temperature must fit in fp32)",
                str(temperature));
}
void validate_top_k(int32_t top_k, int64_t vocab, int64_t row) {
  SOFTK_REQUIRE(top_k >= 0 && top_k <= vocab,
                param_name("top_k", row) + " must be 0 (no bound) or in [1, vocab=" + str(vocab) + "]",
                str(int64_t{top_k}));
}
void validate_top_p(float top_p, int64_t row) {
  SOFTK_REQUIRE(top_p > 0.0f && top_p <= 1.0f, param_name("top_p", row) + " must be in (0, 1]", str(top_p));
}
void validate_min_p(float min_p, int64_t row) {
  SOFTK_REQUIRE(min_p >= 0.0f && min_p <= 1.0f, param_name("min_p", row) + " must be in [0, 1]", str(min_p));
}
}  // namespace

void validate_sampling_params(const SamplingParams& params, int64_t rows, int64_t vocab, bool per_row_on_host) {
  validate_sampling_temperature(params.temperature, -1);
  validate_top_k(params.top_k, vocab, -1);
  validate_top_p(params.top_p, -1);
  validate_min_p(params.min_p, -1);
  if (!per_row_on_host) return;
  for (int64_t r = 0; r < rows; ++r) {
    if (params.temperatures) validate_sampling_temperature(params.temperatures[r], r);
    if (params.top_ks) validate_top_k(params.top_ks[r], vocab, r);
    if (params.top_ps) validate_top_p(params.top_ps[r], r);
    if (params.min_ps) validate_min_p(params.min_ps[r], r);
  }
}

void validate_sample_call(const LogitsView& logits, const SamplingParams& params, const int32_t* tokens,
                          const int32_t* row_status) {
  validate_logits(logits);
  validate_not_null(tokens, "tokens");
  validate_aligned(tokens, "tokens", sizeof(int32_t));
  if (row_status != nullptr) validate_aligned(row_status, "row_status", sizeof(int32_t));
  validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/false);
}

}  // namespace softk::detail
