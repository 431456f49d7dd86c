// sampler — one logits tensor in a file (.npy, .safetensors or raw binary), validated up front
// and read a chunk of rows at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "input_file.hpp"
#include "softk/types.hpp"

namespace sampler {

enum class FileFormat { npy, safetensors, raw };

/// "npy", "safetensors" or "raw".
const char* to_string(FileFormat format);

/// What the user said about the input: the path and the optional --tensor, --shape, --dtype.
struct InputSpec {
  std::string path;
  std::string tensor;                 ///< safetensors only: which tensor; empty = the only one
  std::vector<int64_t> shape;         ///< --shape; empty = not given
  std::optional<softk::DType> dtype;  ///< --dtype
};

class LogitsFile {
 public:
  /// Opens and validates `spec.path`. The format comes from the extension (.npy, .safetensors),
  /// else from the magic bytes, else the file is raw binary, which needs --shape and --dtype.
  /// For .npy and .safetensors a given --shape / --dtype must match the file's.
  /// Accepts .npy '<f4' / '<f2' in C order, safetensors F32 / F16 / BF16, 1 to 3 dims read as
  /// [V], [B, V] or [B, T, V], no empty dim, V < 2^31, and exactly the data the shape needs.
  /// Everything is checked here, before the caller writes anything: a later read_rows() fails
  /// only if the file changes underneath. Throws sampler::Error naming the file and the problem.
  static LogitsFile open(const InputSpec& spec);

  const std::string& path() const { return file_.path(); }
  FileFormat format() const { return format_; }
  /// The safetensors tensor read; empty for other formats.
  const std::string& tensor() const { return tensor_; }
  softk::DType dtype() const { return dtype_; }
  /// 1 to 3 dims; the last is the vocabulary.
  const std::vector<int64_t>& shape() const { return shape_; }
  /// The shape without its vocabulary dim: [], [B] or [B, T].
  std::vector<int64_t> leading_dims() const { return {shape_.begin(), shape_.end() - 1}; }
  int64_t vocab() const { return shape_.back(); }
  /// The number of rows of V logits: the product of the leading dims.
  int64_t rows() const { return rows_; }
  int64_t row_bytes() const { return vocab() * static_cast<int64_t>(softk::dtype_size(dtype_)); }

  /// Reads rows [first, first + count) into `dst`, which holds count * row_bytes() bytes.
  /// Throws sampler::Error if the file no longer holds them.
  void read_rows(int64_t first, int64_t count, void* dst) const;

  /// A softk view of `count` dense rows of this file's dtype and vocabulary at `data`.
  softk::LogitsView rows_view(const void* data, int64_t count) const;

 private:
  LogitsFile(InputFile file, FileFormat format) : file_(std::move(file)), format_(format) {}

  InputFile file_;
  FileFormat format_;
  std::string tensor_;
  softk::DType dtype_ = softk::DType::f32;
  std::vector<int64_t> shape_;
  int64_t rows_ = 0;
  int64_t data_offset_ = 0;
};

/// Parses --shape: 1 to 3 positive integers separated by commas ("4096", "4,4096", "2,3,4096").
/// Throws sampler::Error naming the option.
std::vector<int64_t> parse_shape(const std::string& text);

/// Parses --dtype: "f32", "f16" or "bf16". Throws sampler::Error naming the option.
softk::DType parse_dtype(const std::string& text);

/// What the leading dims of a [B, T, V] tensor are called, in order.
inline constexpr const char* kLeadingDimNames[] = {"batch", "step"};

/// Where flat row `row` sits in the leading dims of `shape`: {b, t}, {b} or {} for a [V] tensor.
std::vector<int64_t> row_position(const std::vector<int64_t>& shape, int64_t row);

/// "[2, 3, 4096]".
std::string format_shape(const std::vector<int64_t>& shape);

}  // namespace sampler
