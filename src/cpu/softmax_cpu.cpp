// CPU softmax: the double-precision oracle for the GPU tests and the no-GPU fallback.
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/half_convert.hpp"
#include "cpu/row_stats.hpp"
#include "softk/cpu.hpp"
#include "validate.hpp"

namespace softk {

void convert_to_f32(const void* src, DType dtype, float* dst, std::size_t count) {
  if (count == 0) return;
  detail::validate_not_null(src, "src");
  detail::validate_not_null(dst, "dst");
  const auto* halves = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case DType::f32: std::memcpy(dst, src, count * sizeof(float)); return;
    case DType::f16: for (std::size_t i = 0; i < count; ++i) dst[i] = detail::f16_to_f32(halves[i]); return;
    case DType::bf16: for (std::size_t i = 0; i < count; ++i) dst[i] = detail::bf16_to_f32(halves[i]); return;
  }
  throw Error("softk: convert_to_f32: unsupported dtype (got " + std::to_string(static_cast<int>(dtype)) + ")");
}

namespace cpu {

void softmax(const LogitsView& logits, void* out, const SoftmaxOptions& options) {
  detail::validate_logits(logits);
  detail::validate_not_null(out, "out");
  detail::validate_temperature(options.temperature);
  detail::validate_out_dtype(logits, options.out_dtype);
  detail::validate_softmax_outputs(out, options);

  const int64_t vocab = logits.vocab;
  std::vector<float> row(static_cast<std::size_t>(vocab));
  for (int64_t r = 0; r < logits.rows(); ++r) {
    const auto stats = detail::load_row_and_stats(logits, r, options.temperature, row);
    if (options.row_status) options.row_status[r] = static_cast<int32_t>(stats.status);
    for (int64_t v = 0; v < vocab; ++v) {
      const float p = static_cast<float>(stats.probability(row[static_cast<std::size_t>(v)]));
      const int64_t at = r * vocab + v;
      switch (options.out_dtype) {
        case DType::f32: static_cast<float*>(out)[at] = p; break;
        case DType::f16: static_cast<uint16_t*>(out)[at] = detail::f32_to_f16(p); break;
        case DType::bf16: static_cast<uint16_t*>(out)[at] = detail::f32_to_bf16(p); break;
      }
    }
  }
}

}  // namespace cpu
}  // namespace softk
