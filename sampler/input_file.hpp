// sampler — positioned reads from one input file with 64-bit offsets, so files larger than
// memory (or than 4 GiB) are read a chunk at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sampler {

class InputFile {
 public:
  /// Opens `path` read-only. Throws sampler::Error naming the path when it is missing,
  /// unreadable or not a regular file.
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  /// Size in bytes when the file was opened.
  int64_t size() const { return size_; }

  /// Reads exactly `bytes` bytes at `offset` into `dst`. Throws sampler::Error naming the path
  /// when the file ends first (it was truncated or shrank) or on an I/O error.
  void read_at(int64_t offset, void* dst, std::size_t bytes) const;

  /// Up to `max_bytes` bytes from the start of the file (fewer when the file is shorter): enough
  /// to sniff a format's magic.
  std::string read_prefix(std::size_t max_bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace sampler
