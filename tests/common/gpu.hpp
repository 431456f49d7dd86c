// Test-side CUDA helpers: device detection with a clean GTEST_SKIP, checked RAII device buffers,
// poisoned and guarded outputs, and a per-test stream fixture.
//
// Everything here throws std::runtime_error on a CUDA failure (helpers cannot ASSERT from
// constructors); gtest reports an escaped exception as a test failure with its message.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace softk_test {

inline void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("test harness: ") + what + " failed: " + cudaGetErrorName(status) + ": " +
                             cudaGetErrorString(status));
}
#define SOFTK_TEST_CUDA(call) ::softk_test::check_cuda((call), #call)

/// True when a CUDA device can be used. The answer is computed once: cudaGetDeviceCount is the
/// first runtime call, and on a machine without a driver it fails (cudaErrorNoDevice or
/// cudaErrorInsufficientDriver) rather than returning 0, so both are "no device".
inline bool cuda_device_available(std::string* why = nullptr) {
  static const std::pair<bool, std::string> answer = [] {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
      return std::make_pair(false, std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(status) + " (" +
                                       cudaGetErrorString(status) + ")");
    }
    if (count == 0) return std::make_pair(false, std::string("cudaGetDeviceCount returned 0"));
    return std::make_pair(true, std::string());
  }();
  if (why) *why = answer.second;
  return answer.first;
}

/// Skips the current test (from a TEST body or a fixture's SetUp) when there is no device.
#define SOFTK_TEST_REQUIRE_GPU()                                           \
  do {                                                                     \
    std::string softk_test_why_;                                           \
    if (!::softk_test::cuda_device_available(&softk_test_why_))            \
      GTEST_SKIP() << "no CUDA device: " << softk_test_why_;               \
  } while (0)

/// Owns cudaMalloc'ed memory. Exactly `bytes` are allocated (no rounding up), so an op that
/// reads or writes past the end is caught by compute-sanitizer memcheck.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) SOFTK_TEST_CUDA(cudaMalloc(&ptr_, bytes_));
  }
  ~DeviceBuffer() {
    if (ptr_) (void)cudaFree(ptr_);  // never throw from a destructor; a failed free shows in later checks
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (ptr_) (void)cudaFree(ptr_);
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Owns a non-blocking stream: ops must order themselves on the stream they are given and not
/// lean on the legacy default stream's implicit synchronisation.
class Stream {
 public:
  Stream() { SOFTK_TEST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void sync() const { SOFTK_TEST_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

inline void upload(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  SOFTK_TEST_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
}

template <class T>
std::vector<T> download(const void* src, std::size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  if (count == 0) return host;
  SOFTK_TEST_CUDA(cudaMemcpyAsync(host.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
  return host;
}

/// The byte every output is filled with before an op runs. 0x7B is chosen over 0xFF because
/// 0xFF..FF reads as NaN (f32/f16/bf16) and -1 (int32) — both *valid* outputs (NaN rows,
/// masked top-k slots) — so it would hide an unwritten element. 0x7B reads as 1.3e36 (f32,
/// bf16), 61280 (f16), 2071690107 (int32 index / row status): never a probability, a log-prob,
/// an index < V in these tests, or a RowStatus.
constexpr unsigned char kPoisonByte = 0x7B;
/// Bytes after each output that must still hold the poison afterwards: an out-of-bounds write
/// is caught even without compute-sanitizer.
constexpr std::size_t kGuardBytes = 256;

/// A device output of `payload` bytes followed by kGuardBytes of guard, all poisoned.
class GuardedOutput {
 public:
  GuardedOutput() = default;
  GuardedOutput(std::size_t payload_bytes, cudaStream_t stream)
      : payload_(payload_bytes), buffer_(payload_bytes + kGuardBytes) {
    poison(stream);
  }
  void poison(cudaStream_t stream) {
    SOFTK_TEST_CUDA(cudaMemsetAsync(buffer_.get(), kPoisonByte, buffer_.bytes(), stream));
  }
  void* get() const { return buffer_.get(); }
  template <class T>
  T* as() const { return buffer_.as<T>(); }
  std::size_t payload_bytes() const { return payload_; }

  /// Empty string when the guard is intact, else a description of the first clobbered byte.
  std::string guard_violation(cudaStream_t stream) const {
    std::vector<unsigned char> guard(kGuardBytes);
    SOFTK_TEST_CUDA(cudaMemcpyAsync(guard.data(), static_cast<const unsigned char*>(buffer_.get()) + payload_, kGuardBytes,
                                    cudaMemcpyDeviceToHost, stream));
    SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
    for (std::size_t i = 0; i < kGuardBytes; ++i)
      if (guard[i] != kPoisonByte)
        return "byte " + std::to_string(i) + " past the end of a " + std::to_string(payload_) +
               "-byte output was overwritten (now " + std::to_string(guard[i]) + ", poison " +
               std::to_string(kPoisonByte) + ")";
    return {};
  }
  /// True when every payload byte still holds the poison (nothing was written).
  bool untouched(cudaStream_t stream) const {
    std::vector<unsigned char> all(buffer_.bytes());
    SOFTK_TEST_CUDA(cudaMemcpyAsync(all.data(), buffer_.get(), all.size(), cudaMemcpyDeviceToHost, stream));
    SOFTK_TEST_CUDA(cudaStreamSynchronize(stream));
    for (unsigned char b : all)
      if (b != kPoisonByte) return false;
    return true;
  }

 private:
  std::size_t payload_ = 0;
  DeviceBuffer buffer_;
};

/// Base for GPU tests: skips without a device, gives each test its own stream, and fails the
/// test if the stream carries an error at the end (an asynchronous fault inside an op).
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SOFTK_TEST_REQUIRE_GPU();
    stream_ = std::make_unique<Stream>();
  }
  void TearDown() override {
    if (stream_) {
      EXPECT_EQ(cudaSuccess, cudaStreamSynchronize(stream_->get())) << "asynchronous CUDA error after the test";
      EXPECT_EQ(cudaSuccess, cudaGetLastError()) << "CUDA error left pending after the test";
    }
  }
  cudaStream_t stream() const { return stream_->get(); }
  std::unique_ptr<Stream> stream_;
};

template <class Param>
class GpuTestWithParam : public GpuTest, public ::testing::WithParamInterface<Param> {};

}  // namespace softk_test
