#include "input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "error.hpp"

namespace sampler {

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw file_error(path_, std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0) {
    const int error = errno;
    ::close(fd_);
    throw file_error(path_, std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd_);
    throw file_error(path_, "not a regular file");
  }
  size_ = static_cast<int64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

void InputFile::read_at(int64_t offset, void* dst, std::size_t bytes) const {
  auto* out = static_cast<char*>(dst);
  // pread may return fewer bytes than asked (signals, huge requests): loop until done.
  // Requests are capped at 1 GiB because Linux caps one read at about 2 GiB anyway.
  constexpr std::size_t kMaxRead = std::size_t{1} << 30;
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, out, std::min(bytes, kMaxRead), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw file_error(path_, std::string("read failed: ") + std::strerror(errno));
    }
    if (got == 0) throw file_error(path_, "unexpected end of file at byte " + std::to_string(offset) + " (truncated?)");
    out += got;
    offset += got;
    bytes -= static_cast<std::size_t>(got);
  }
}

std::string InputFile::read_prefix(std::size_t max_bytes) const {
  std::string prefix(static_cast<std::size_t>(std::min<int64_t>(size_, static_cast<int64_t>(max_bytes))), '\0');
  read_at(0, prefix.data(), prefix.size());
  return prefix;
}

}  // namespace sampler
