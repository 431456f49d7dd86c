#include "logits_file.hpp"

#include <algorithm>
#include <cctype>
#include <limits>

#include "error.hpp"
#include "npy.hpp"
#include "safetensors.hpp"

namespace sampler {
namespace {

std::string lowercase_extension(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string extension = path.substr(dot);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

softk::DType npy_dtype(const std::string& path, const std::string& descr) {
  if (descr == "<f4") return softk::DType::f32;
  if (descr == "<f2") return softk::DType::f16;
  if (descr == ">f4" || descr == ">f2") {
    throw file_error(path, "unsupported dtype '" + descr + "' (big-endian); save it little-endian ('<f4' or '<f2')");
  }
  throw file_error(path, "unsupported dtype '" + descr + "'; need float32 '<f4' or float16 '<f2'");
}

softk::DType safetensors_dtype(const std::string& path, const SafetensorsTensor& tensor) {
  if (tensor.dtype == "F32") return softk::DType::f32;
  if (tensor.dtype == "F16") return softk::DType::f16;
  if (tensor.dtype == "BF16") return softk::DType::bf16;
  throw file_error(path,
                   "tensor '" + tensor.name + "' has unsupported dtype " + tensor.dtype + "; need F32, F16 or BF16");
}

/// Checks the logits contract on `shape` and returns the bytes its data takes (no overflow).
int64_t checked_data_bytes(const std::string& path, const std::vector<int64_t>& shape, softk::DType dtype) {
  if (shape.empty() || shape.size() > 3) {
    throw file_error(path, "has " + std::to_string(shape.size()) + " dims " + format_shape(shape) +
                               "; expected 1, 2 or 3 ([V], [B, V] or [B, T, V])");
  }
  int64_t bytes = static_cast<int64_t>(softk::dtype_size(dtype));
  for (int64_t dim : shape) {
    if (dim == 0) throw file_error(path, "is empty (shape " + format_shape(shape) + ")");
    if (bytes > std::numeric_limits<int64_t>::max() / dim)
      throw file_error(path, "shape " + format_shape(shape) + " is too large");
    bytes *= dim;
  }
  if (shape.back() >= (int64_t{1} << 31)) {
    throw file_error(path, "vocabulary size " + std::to_string(shape.back()) + " is too large (must be < 2^31)");
  }
  return bytes;
}

}  // namespace

const char* to_string(FileFormat format) {
  switch (format) {
    case FileFormat::npy:
      return "npy";
    case FileFormat::safetensors:
      return "safetensors";
    case FileFormat::raw:
      return "raw";
  }
  return "unknown";
}

LogitsFile LogitsFile::open(const InputSpec& spec) {
  InputFile file(spec.path);
  const std::string path = spec.path;  // a copy: `file` is moved into the result below
  const std::string extension = lowercase_extension(path);
  const std::string prefix = file.read_prefix(16);
  const bool npy_magic = prefix.compare(0, kNpyMagic.size(), kNpyMagic) == 0;

  FileFormat format = FileFormat::raw;
  if (extension == ".npy" || (extension != ".safetensors" && npy_magic))
    format = FileFormat::npy;
  else if (extension == ".safetensors" || looks_like_safetensors(prefix, file.size()))
    format = FileFormat::safetensors;
  if (!spec.tensor.empty() && format != FileFormat::safetensors) {
    throw file_error(path,
                     "--tensor applies only to .safetensors files, and this is " + std::string(to_string(format)));
  }

  LogitsFile logits(std::move(file), format);
  int64_t available_bytes = 0;  // what the file holds for the tensor's data
  std::string what;             // how to name the data's source in a size mismatch
  switch (format) {
    case FileFormat::npy: {
      const NpyHeader header = read_npy_header(logits.file_);
      logits.dtype_ = npy_dtype(path, header.descr);
      // A Fortran-order array of 2+ dims stores each row strided across the file; 0-d and 1-d
      // arrays are the same bytes in either order.
      if (header.fortran_order && header.shape.size() > 1) {
        throw file_error(path, "Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");
      }
      logits.shape_ = header.shape;
      logits.data_offset_ = header.data_offset;
      available_bytes = logits.file_.size() - header.data_offset;
      what = "the file holds";
      break;
    }
    case FileFormat::safetensors: {
      const SafetensorsTensor tensor = read_safetensors_tensor(logits.file_, spec.tensor);
      logits.tensor_ = tensor.name;
      logits.dtype_ = safetensors_dtype(path, tensor);
      logits.shape_ = tensor.shape;
      logits.data_offset_ = tensor.data_offset;
      available_bytes = tensor.data_bytes;
      what = "tensor '" + tensor.name + "' spans";
      break;
    }
    case FileFormat::raw: {
      if (spec.shape.empty() || !spec.dtype) {
        throw file_error(path, "not a .npy or .safetensors file; for raw binary logits give --shape and --dtype");
      }
      logits.dtype_ = *spec.dtype;
      logits.shape_ = spec.shape;
      available_bytes = logits.file_.size();
      what = "the raw file holds";
      break;
    }
  }
  if (format != FileFormat::raw) {
    if (!spec.shape.empty() && spec.shape != logits.shape_) {
      throw file_error(path,
                       "shape " + format_shape(logits.shape_) + " does not match --shape " + format_shape(spec.shape));
    }
    if (spec.dtype && *spec.dtype != logits.dtype_) {
      throw file_error(path, std::string("dtype ") + softk::to_string(logits.dtype_) + " does not match --dtype " +
                                 softk::to_string(*spec.dtype));
    }
  }

  const int64_t needed_bytes = checked_data_bytes(path, logits.shape_, logits.dtype_);
  if (available_bytes != needed_bytes) {
    throw file_error(path, what + " " + std::to_string(available_bytes) + " data bytes but shape " +
                               format_shape(logits.shape_) + " of " + softk::to_string(logits.dtype_) + " needs " +
                               std::to_string(needed_bytes) + (available_bytes < needed_bytes ? " (truncated?)" : ""));
  }
  logits.rows_ = needed_bytes / logits.row_bytes();
  return logits;
}

void LogitsFile::read_rows(int64_t first, int64_t count, void* dst) const {
  file_.read_at(data_offset_ + first * row_bytes(), dst, static_cast<std::size_t>(count * row_bytes()));
}

softk::LogitsView LogitsFile::rows_view(const void* data, int64_t count) const {
  softk::LogitsView view;
  view.data = data;
  view.dtype = dtype_;
  view.batch = count;  // chunks are flat rows: softk only needs batch * steps
  view.steps = 1;
  view.vocab = vocab();
  return view;
}

std::vector<int64_t> parse_shape(const std::string& text) {
  const auto bad = [&]() {
    return Error("--shape: expected 1 to 3 positive integers separated by commas, like 2,3,4096 (got '" + text + "')");
  };
  std::vector<int64_t> shape;
  std::size_t at = 0;
  while (true) {
    int64_t dim = 0;
    const std::size_t start = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      const int digit = text[at++] - '0';
      if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10) throw bad();
      dim = dim * 10 + digit;
    }
    if (at == start || dim == 0) throw bad();
    shape.push_back(dim);
    if (at == text.size()) break;
    if (text[at++] != ',') throw bad();
  }
  if (shape.size() > 3) throw bad();
  return shape;
}

softk::DType parse_dtype(const std::string& text) {
  for (softk::DType dtype : {softk::DType::f32, softk::DType::f16, softk::DType::bf16}) {
    if (text == softk::to_string(dtype)) return dtype;
  }
  throw Error("--dtype: expected f32, f16 or bf16 (got '" + text + "')");
}

std::vector<int64_t> row_position(const std::vector<int64_t>& shape, int64_t row) {
  switch (shape.size()) {
    case 3:
      return {row / shape[1], row % shape[1]};
    case 2:
      return {row};
    default:
      return {};
  }
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace sampler
