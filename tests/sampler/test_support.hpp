// Helpers for the sampler tests: a scratch directory, file builders that can also build broken
// files, running the real sampler executable, and reading .npy outputs back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npy.hpp"

namespace sampler_test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  /// path() + "/" + name.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// The names of the entries in the directory, sorted.
  std::vector<std::string> entries() const;

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& bytes);
std::string read_file(const std::string& path);

/// Raw little-endian bytes of `values`.
template <class T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

/// A version-1 .npy file whose header dict is exactly `dict` (so tests can break it), padded
/// to 64 bytes like NumPy's, followed by `payload`.
std::string npy_with_dict(const std::string& dict, const std::string& payload);

/// A well-formed .npy file: descr such as "<f4", shape, payload (C order unless `fortran`).
std::string npy_file(const std::string& descr, const std::vector<int64_t>& shape, const std::string& payload,
                     bool fortran = false);

/// A .safetensors file: 8-byte length, `header_json`, then `payload`.
std::string safetensors_with_header(const std::string& header_json, const std::string& payload);

/// One entry of a safetensors header.
struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};
/// A well-formed .safetensors file holding `tensors`, laid out in order.
std::string safetensors_file(const std::vector<StTensor>& tensors);

/// Deterministic LLM-like logits: `rows` rows of `vocab`, a few spikes over a heavy tail, every
/// value exact in f16 and bf16 (so one set of values serves every dtype).
std::vector<float> make_logits(int64_t rows, int64_t vocab, uint32_t seed);

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
/// Runs the sampler executable with `args` (no shell), capturing stdout and stderr.
RunResult run_sampler(const std::vector<std::string>& args);

/// A .npy file read back: its header (parsed by sampler's reader) and its elements.
template <class T>
struct NpyArray {
  sampler::NpyHeader header;
  std::vector<T> values;
};
/// Reads a .npy of 4-byte elements ("<f4" or "<i4"), checking the descr matches `descr`.
template <class T>
NpyArray<T> read_npy(const std::string& path, const std::string& descr);

/// The number of lines in `text` (a last line without '\n' counts).
int count_lines(const std::string& text);

}  // namespace sampler_test
