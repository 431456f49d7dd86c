// sampler — the .safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data; offsets are relative to the first byte after the header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "input_file.hpp"

namespace sampler {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  ///< as the file spells it: "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  ///< absolute byte offset of the first element in the file
  int64_t data_bytes = 0;   ///< end - begin of data_offsets
};

/// True when `prefix` (the file's first bytes) and `file_size` look like a safetensors file:
/// a header length that fits in the file, followed by '{'.
bool looks_like_safetensors(const std::string& prefix, int64_t file_size);

/// Reads the header of the .safetensors `file` and returns the tensor called `name`, or the only
/// tensor when `name` is empty. Checks that the header is well-formed JSON of the expected
/// structure and that the tensor's byte range lies inside the file; whether its dtype and size
/// suit the caller is the caller's call. Throws sampler::Error naming the file, listing the
/// tensors when the choice is missing or ambiguous.
SafetensorsTensor read_safetensors_tensor(const InputFile& file, const std::string& name);

}  // namespace sampler
