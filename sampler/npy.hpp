// sampler — the .npy format (NumPy's array file): header parsing and header writing.
// Format: "\x93NUMPY", version (1/2/3), header length, then a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4096), } padded with spaces and '\n'.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "input_file.hpp"

// sampler moves little-endian file data ('<f4', '<f2', '<i4', safetensors) to and from memory
// as is; a big-endian host would need byte swaps everywhere.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sampler assumes a little-endian host");

namespace sampler {

/// The six bytes every .npy file starts with.
inline constexpr std::string_view kNpyMagic{"\x93NUMPY", 6};

struct NpyHeader {
  std::string descr;  ///< the array-protocol type string, e.g. "<f4"
  bool fortran_order = false;
  std::vector<int64_t> shape;  ///< may be empty (a 0-d array)
  int64_t data_offset = 0;     ///< bytes from the start of the file to the first element
};

/// Parses the header of the .npy file `file` (versions 1.0, 2.0 and 3.0). Checks the structure
/// only (magic, version, length, the dict's keys and value types); whether the dtype, order and
/// data size suit the caller is the caller's call. Throws sampler::Error naming the file.
NpyHeader read_npy_header(const InputFile& file);

/// The bytes of a version-1.0 header for a C-order array of `descr` shaped `shape`, padded so the
/// data that follows starts 64-byte aligned (as NumPy writes it). Needs a header under 64 KiB,
/// which any shape of at most 32 dims is.
std::string make_npy_header(const std::string& descr, const std::vector<int64_t>& shape);

}  // namespace sampler
