// sampler — output files that appear only when complete, so a failed run leaves nothing behind.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace sampler {

/// Bytes go to a temporary file in the destination's directory (so the final rename stays on one
/// file system and is atomic); commit() renames it to `path`. An uncommitted file is removed by
/// the destructor, so an error anywhere in a run leaves no partial output.
class AtomicOutputFile {
 public:
  /// Creates the temporary file now, so an unwritable destination fails before any work is done.
  /// Throws sampler::Error naming `path` when it cannot be created or `path` is a directory.
  explicit AtomicOutputFile(std::string path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  const std::string& path() const { return path_; }
  /// Appends `bytes` bytes. Throws sampler::Error naming the path on a write error (disk full).
  void write(const void* data, std::size_t bytes);
  /// Flushes, closes and renames the temporary file to path(). Throws sampler::Error on failure
  /// (the temporary is then removed by the destructor).
  void commit();
  /// commit() in two steps, for outputs that must appear together: close() flushes and closes
  /// (where a full disk shows), publish() renames; withdraw() removes a published file again.
  void close();
  void publish();
  void withdraw() noexcept;

 private:
  void discard() noexcept;

  std::string path_;
  std::string temp_path_;
  std::FILE* stream_ = nullptr;
  bool committed_ = false;
};

/// The element types sampler writes.
enum class NpyElement { f32, i32 };

/// A C-order .npy array of a known shape, written as a stream of elements in order, through an
/// AtomicOutputFile (same guarantees: created up front, visible only after commit()).
class NpyWriter {
 public:
  /// Throws sampler::Error if `path` cannot be created.
  NpyWriter(std::string path, NpyElement element, std::vector<int64_t> shape);

  const std::string& path() const { return file_.path(); }
  /// Appends `count` elements (float for f32, int32_t for i32) at `data`.
  void append(const void* data, int64_t count);
  /// Renames the file into place; throws sampler::Error unless exactly the shape's element count
  /// was appended.
  void commit();

  /// Commits `first` and `second` so that both appear or neither: both are closed, where a write
  /// error shows, before either is renamed, and `first` is removed again if `second`'s rename fails.
  friend void commit_together(NpyWriter& first, NpyWriter& second);

 private:
  void check_complete() const;

  AtomicOutputFile file_;
  int64_t expected_ = 1;
  int64_t written_ = 0;
};

void commit_together(NpyWriter& first, NpyWriter& second);

}  // namespace sampler
