#include "output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "error.hpp"
#include "npy.hpp"

namespace sampler {
namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

AtomicOutputFile::AtomicOutputFile(std::string path) : path_(std::move(path)) {
  struct stat info {};
  if (::stat(path_.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    throw file_error(path_, "cannot write output: it is a directory");
  }
  const auto slash = path_.find_last_of('/');
  const std::string directory = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  // Hidden, and marked as a temporary, so an interrupted run's leftover is recognisable.
  temp_path_ = directory + "." + name + ".tmp-XXXXXX";
  const int fd = ::mkstemp(temp_path_.data());
  if (fd < 0) throw file_error(path_, "cannot write output: " + errno_text());
  // mkstemp creates the file 0600; give the result the permissions an ordinary open() would.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  stream_ = ::fdopen(fd, "wb");
  if (stream_ == nullptr) {
    const std::string error = errno_text();
    ::close(fd);
    ::unlink(temp_path_.c_str());
    throw file_error(path_, "cannot write output: " + error);
  }
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) discard();
}

void AtomicOutputFile::discard() noexcept {
  if (stream_ != nullptr) std::fclose(stream_);
  stream_ = nullptr;
  ::unlink(temp_path_.c_str());
}

void AtomicOutputFile::write(const void* data, std::size_t bytes) {
  if (std::fwrite(data, 1, bytes, stream_) != bytes) throw file_error(path_, "write failed: " + errno_text());
}

void AtomicOutputFile::commit() {
  close();
  publish();
}

void AtomicOutputFile::close() {
  // fclose flushes and reports errors of the final buffered write (a full disk shows up here).
  const bool closed = std::fclose(stream_) == 0;
  stream_ = nullptr;
  if (!closed) throw file_error(path_, "write failed: " + errno_text());
}

void AtomicOutputFile::publish() {
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) throw file_error(path_, "cannot write output: " + errno_text());
  committed_ = true;
}

void AtomicOutputFile::withdraw() noexcept {
  if (committed_) ::unlink(path_.c_str());
}

NpyWriter::NpyWriter(std::string path, NpyElement element, std::vector<int64_t> shape) : file_(std::move(path)) {
  for (int64_t dim : shape) expected_ *= dim;
  const std::string header = make_npy_header(element == NpyElement::f32 ? "<f4" : "<i4", shape);
  file_.write(header.data(), header.size());
}

void NpyWriter::append(const void* data, int64_t count) {
  // Both element types are 4 bytes; the host is little-endian (see npy.hpp), as '<' promises.
  file_.write(data, static_cast<std::size_t>(count) * 4);
  written_ += count;
}

void NpyWriter::check_complete() const {
  if (written_ != expected_) {
    throw file_error(
        path(), "internal error: wrote " + std::to_string(written_) + " of " + std::to_string(expected_) + " elements");
  }
}

void NpyWriter::commit() {
  check_complete();
  file_.commit();
}

void commit_together(NpyWriter& first, NpyWriter& second) {
  first.check_complete();
  second.check_complete();
  first.file_.close();
  second.file_.close();
  first.file_.publish();
  try {
    second.file_.publish();
  } catch (...) {
    first.file_.withdraw();
    throw;
  }
}

}  // namespace sampler
