// softk — shared vocabulary of the public API: dtypes, the logits view, row status, errors.
// Plain C++17: includes nothing from CUDA beyond the runtime API's types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace softk {

/// Element type of a logits tensor.
enum class DType : int32_t { f32 = 0, f16 = 1, bf16 = 2 };

/// "f32", "f16" or "bf16".
const char* to_string(DType dtype);

/// Bytes per element: 4, 2 or 2.
std::size_t dtype_size(DType dtype);

/// Bad arguments: the message names the argument and its value. Thrown before anything is
/// launched or written, so a caught Error leaves every output untouched.
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A CUDA runtime failure reported by a launch or by the runtime (not an argument problem).
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A read-only view of logits shaped [batch, steps, vocab] (steps is T, the decode positions).
/// Rows are the batch*steps leading positions; row r starts at data + r * row_stride elements.
/// Contract: 1 <= vocab < 2^31, row_stride >= vocab, batch >= 1, steps >= 1, data non-null.
/// The base pointer needs only element alignment: 16-byte vector loads are used where the row
/// start allows them, scalar loads at a misaligned head and at the tail.
struct LogitsView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t batch = 1;
  int64_t steps = 1;
  int64_t vocab = 0;
  int64_t row_stride = 0;  ///< in elements; 0 means "dense" (= vocab)

  int64_t rows() const { return batch * steps; }
  int64_t stride() const { return row_stride == 0 ? vocab : row_stride; }
};

/// Per-row outcome, written to an optional int32 array of `rows` entries.
///  - ok: at least one finite or +inf logit and no NaN.
///  - all_masked: every logit is -inf. softmax writes zeros; top-k writes index -1, probability 0.
///  - has_nan: the row holds a NaN. softmax writes NaN; top-k writes index -1, probability NaN.
/// Such rows never affect other rows.
enum class RowStatus : int32_t { ok = 0, all_masked = 1, has_nan = 2 };

const char* to_string(RowStatus status);

}  // namespace softk

namespace softk {

/// Host helper: converts `count` elements of `dtype` at `src` (host memory) to fp32 at `dst`.
/// Exact: every f16 and bf16 value is representable in fp32. Throws softk::Error on a null
/// pointer (where count > 0) or an unknown dtype.
void convert_to_f32(const void* src, DType dtype, float* dst, std::size_t count);

}  // namespace softk
