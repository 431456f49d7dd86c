#include "safetensors.hpp"

#include <limits>
#include <nlohmann/json.hpp>

#include "error.hpp"

namespace sampler {
namespace {

// The format's own limit on the header (the reference implementation refuses larger ones).
constexpr int64_t kMaxHeaderBytes = 100 << 20;

uint64_t read_u64_le(const std::string& bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return value;
}

/// A JSON integer in [0, INT64_MAX], or false (negative, fractional, too large, not a number).
bool to_size(const nlohmann::json& value, int64_t& out) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    out = value.get<int64_t>();
    return true;
  }
  return false;
}

std::string tensor_names(const nlohmann::json& header) {
  std::string names;
  int listed = 0;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") continue;
    if (listed == 8) return names + ", ...";
    names += (listed++ == 0 ? "" : ", ") + item.key();
  }
  return names;
}

}  // namespace

bool looks_like_safetensors(const std::string& prefix, int64_t file_size) {
  if (prefix.size() < 9 || file_size < 9) return false;
  const uint64_t header_bytes = read_u64_le(prefix);
  return header_bytes >= 2 && header_bytes <= static_cast<uint64_t>(file_size - 8) && prefix[8] == '{';
}

SafetensorsTensor read_safetensors_tensor(const InputFile& file, const std::string& name) {
  const std::string& path = file.path();
  if (file.size() < 8) throw file_error(path, "truncated .safetensors file (no header length)");
  const uint64_t header_bytes = read_u64_le(file.read_prefix(8));
  if (header_bytes > static_cast<uint64_t>(kMaxHeaderBytes)) {
    throw file_error(path, "not a .safetensors file (implausible header length " + std::to_string(header_bytes) + ")");
  }
  const int64_t data_start = 8 + static_cast<int64_t>(header_bytes);
  if (data_start > file.size()) {
    throw file_error(path, "truncated .safetensors header (claims " + std::to_string(header_bytes) +
                               " bytes, file holds " + std::to_string(file.size() - 8) + ")");
  }
  std::string text(header_bytes, '\0');
  file.read_at(8, text.data(), text.size());
  // No exceptions from the parser: a damaged header is an ordinary, reportable input error.
  const nlohmann::json header = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    throw file_error(path, "malformed .safetensors header (not a JSON object)");
  }

  std::string chosen = name;
  if (chosen.empty()) {
    int count = 0;
    for (const auto& item : header.items()) {
      if (item.key() == "__metadata__") continue;
      ++count;
      chosen = item.key();
    }
    if (count == 0) throw file_error(path, "holds no tensors");
    if (count > 1) {
      throw file_error(
          path, "holds " + std::to_string(count) + " tensors; choose one with --tensor (" + tensor_names(header) + ")");
    }
  }
  const auto found = header.find(chosen);
  if (found == header.end() || chosen == "__metadata__") {
    throw file_error(path, "no tensor named '" + chosen + "' (has: " + tensor_names(header) + ")");
  }
  const nlohmann::json& entry = *found;
  const auto malformed = [&](const std::string& what) {
    return file_error(path, "malformed .safetensors header: tensor '" + chosen + "' " + what);
  };
  if (!entry.is_object()) throw malformed("is not an object");

  SafetensorsTensor tensor;
  tensor.name = chosen;
  const auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) throw malformed("has no string 'dtype'");
  tensor.dtype = dtype->get<std::string>();
  const auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) throw malformed("has no 'shape' list");
  for (const auto& dim : *shape) {
    int64_t size = 0;
    if (!to_size(dim, size)) throw malformed("has a shape entry that is not a non-negative integer");
    tensor.shape.push_back(size);
  }
  const auto offsets = entry.find("data_offsets");
  int64_t begin = 0, end = 0;
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !to_size((*offsets)[0], begin) ||
      !to_size((*offsets)[1], end) || end < begin) {
    throw malformed("needs 'data_offsets' [begin, end] with 0 <= begin <= end");
  }
  if (end > file.size() - data_start) {
    throw file_error(path, "tensor '" + chosen + "' data_offsets [" + std::to_string(begin) + ", " +
                               std::to_string(end) + "] run past the end of the file, which holds " +
                               std::to_string(file.size() - data_start) + " data bytes (truncated?)");
  }
  tensor.data_offset = data_start + begin;
  tensor.data_bytes = end - begin;
  return tensor;
}

}  // namespace sampler
