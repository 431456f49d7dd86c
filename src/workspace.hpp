// Carves typed, 256-byte aligned arrays out of one caller-provided workspace. Run it once with
// a null base to size the workspace, then with the real base: both runs take the same arrays
// in the same order, so the size query and the op can never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace softk::detail {

class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base = nullptr) : base_(static_cast<char*>(base)) {}

  template <typename T>
  T* take(std::size_t count) {
    used_ = (used_ + kAlignment - 1) / kAlignment * kAlignment;
    T* at = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += count * sizeof(T);
    return at;
  }
  std::size_t bytes() const { return used_; }

 private:
  static constexpr std::size_t kAlignment = 256;
  char* base_;
  std::size_t used_ = 0;
};

}  // namespace softk::detail
