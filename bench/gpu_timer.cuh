// softk_bench timing harness: device facts, the measured copy ceiling, grow-only device
// buffers, L2 rotation and a burst timer. Header-only; included by one .cu.
//
// How one number is taken (see bench/README.md):
//  - A *burst* is N back-to-back launches of the op, each on the next L2-rotation slot, bracketed
//    by two CUDA events. Before the start event the stream is held by a one-thread spin kernel
//    that waits for a host flag; the host enqueues the whole burst and then releases the flag.
//    So the GPU sees a full queue and the events measure GPU time only: host launch overhead
//    (softk's argument checks, cudaLaunchKernel, CUB's dispatch) is not in the number, which is
//    what a decode loop replaying a CUDA graph sees. This is nvbench's "blocking kernel".
//  - per-op time = burst time / N. N is chosen per benchmark so that a burst lasts ~0.5 ms, so
//    event resolution (~0.5 us) and the launch of the first kernel are negligible.
//  - If an op synchronises the host (a contract violation) the spin kernel times out after
//    kHoldTimeoutNs; the harness notices, stops holding, and labels the result.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace softk_bench {

/// A CUDA failure inside the harness (not an argument error of softk).
class BenchCudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda(cudaError_t status, const char* what, const char* file, int line) {
  throw BenchCudaError(std::string(what) + " failed: " + cudaGetErrorString(status) + " (" + file + ":" +
                       std::to_string(line) + ")");
}

#define BENCH_CHECK(call)                                                                   \
  do {                                                                                      \
    const cudaError_t bench_status_ = (call);                                               \
    if (bench_status_ != cudaSuccess) ::softk_bench::throw_cuda(bench_status_, #call, __FILE__, __LINE__); \
  } while (0)

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

inline double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::string gib_string(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ll << 30));
  return buf;
}

// ---------------------------------------------------------------------------------------------
// The stream hold ("blocking kernel").

constexpr unsigned long long kHoldTimeoutNs = 1000ull * 1000ull * 1000ull;  // 1 s

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins until the host sets *release (mapped pinned memory) or the timeout passes. One thread.
__global__ void hold_stream_kernel(const volatile int32_t* release, volatile int32_t* timed_out,
                                   unsigned long long timeout_ns) {
  const unsigned long long start = global_timer_ns();
  while (*release == 0) {
    if (global_timer_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
#if __CUDA_ARCH__ >= 700
    __nanosleep(256);  // poll the host flag over the bus a few million times a second, not more
#endif
  }
}

/// Times bursts of launches on one stream with CUDA events, optionally behind the stream hold.
class BurstTimer {
 public:
  explicit BurstTimer(cudaStream_t stream) : stream_(stream) {
    BENCH_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_flags_), 2 * sizeof(int32_t), cudaHostAllocMapped));
    host_flags_[0] = 0;
    host_flags_[1] = 0;
    BENCH_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_flags_), host_flags_, 0));
    BENCH_CHECK(cudaEventCreate(&start_));
    BENCH_CHECK(cudaEventCreate(&stop_));
  }
  ~BurstTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaFreeHost(host_flags_);
  }
  BurstTimer(const BurstTimer&) = delete;
  BurstTimer& operator=(const BurstTimer&) = delete;

  /// Opens a burst: (hold kernel) + start event. Enqueue the burst's launches after this.
  void begin(bool hold) {
    held_ = hold;
    was_held_ = hold;
    if (hold) {
      release_flag()[0] = 0;
      timed_out_flag()[0] = 0;
      hold_stream_kernel<<<1, 1, 0, stream_>>>(dev_flags_, dev_flags_ + 1, kHoldTimeoutNs);
      BENCH_CHECK(cudaGetLastError());
    }
    BENCH_CHECK(cudaEventRecord(start_, stream_));
  }

  /// Closes the burst: stop event, release the hold, wait, and return the elapsed seconds.
  double end() {
    if (held_) {
      // Record the stop event before releasing, so it sits behind the whole burst; release
      // even if the record fails, so the hold never outlives this call.
      const cudaError_t rec = cudaEventRecord(stop_, stream_);
      release();
      if (rec != cudaSuccess) throw_cuda(rec, "cudaEventRecord(stop_, stream_)", __FILE__, __LINE__);
    } else {
      BENCH_CHECK(cudaEventRecord(stop_, stream_));
    }
    BENCH_CHECK(cudaEventSynchronize(stop_));
    BENCH_CHECK(cudaGetLastError());
    last_timed_out_ = was_held_ && timed_out_flag()[0] != 0;
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1e-3;
  }

  /// Lets a held stream go. end() does it; call it when a burst is abandoned (an op threw after
  /// begin()), or the stream stays blocked until the hold times out. Harmless when not held.
  void release() {
    if (held_) release_flag()[0] = 1;
    held_ = false;
  }

  /// True if the last burst's hold gave up waiting: the enqueue blocked on the GPU (the op
  /// synchronised the host), so that burst's time includes host time.
  bool timed_out() const { return last_timed_out_; }

 private:
  volatile int32_t* release_flag() { return host_flags_; }
  volatile int32_t* timed_out_flag() { return host_flags_ + 1; }

  cudaStream_t stream_;
  int32_t* host_flags_ = nullptr;  // [0] release, [1] timed out; mapped pinned memory
  int32_t* dev_flags_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool held_ = false;      // a hold kernel may be waiting for release
  bool was_held_ = false;  // the current/last burst was held
  bool last_timed_out_ = false;
};

// ---------------------------------------------------------------------------------------------
// Device facts and the copy ceiling.

struct DeviceFacts {
  int device = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int64_t l2_bytes = 0;
  int64_t global_mem = 0;
  int runtime_version = 0;
  int driver_version = 0;
  double copy_gbps = 0.0;     ///< measured D2D memcpy bandwidth, (read + write bytes) / time
  int64_t copy_bytes = 0;     ///< size of the copy that measured it
  double copy_spread = 0.0;   ///< (max - min) / median over the trials, a noise indicator
};

inline DeviceFacts query_device(int device) {
  DeviceFacts f;
  f.device = device;
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, device));
  f.name = prop.name;
  int v = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, device));
  BENCH_CHECK(cudaDeviceGetAttribute(&f.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  BENCH_CHECK(cudaDeviceGetAttribute(&f.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  BENCH_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, device));
  f.l2_bytes = v;
  f.global_mem = int64_t(prop.totalGlobalMem);
  BENCH_CHECK(cudaRuntimeGetVersion(&f.runtime_version));
  BENCH_CHECK(cudaDriverGetVersion(&f.driver_version));
  return f;
}

/// Device-to-device cudaMemcpyAsync bandwidth, counting bytes read + bytes written, median of
/// `trials` single copies of up to 1 GiB (a quarter of free memory at most). Large enough that
/// L2 plays no part and launch cost is noise.
inline void measure_copy_bandwidth(DeviceFacts& f, cudaStream_t stream, int trials = 15) {
  std::size_t free_b = 0, total_b = 0;
  BENCH_CHECK(cudaMemGetInfo(&free_b, &total_b));
  int64_t bytes = std::min<int64_t>(int64_t(1) << 30, int64_t(free_b / 4));
  bytes = bytes / (1 << 20) * (1 << 20);
  if (bytes < (64 << 20)) throw BenchCudaError("not enough free device memory to measure copy bandwidth");
  void* src = nullptr;
  void* dst = nullptr;
  BENCH_CHECK(cudaMalloc(&src, std::size_t(bytes)));
  BENCH_CHECK(cudaMalloc(&dst, std::size_t(bytes)));
  cudaEvent_t a, b;
  BENCH_CHECK(cudaEventCreate(&a));
  BENCH_CHECK(cudaEventCreate(&b));
  BENCH_CHECK(cudaMemsetAsync(src, 0x3c, std::size_t(bytes), stream));  // never time zeros
  std::vector<double> gbps;
  for (int t = 0; t < trials + 2; ++t) {
    BENCH_CHECK(cudaEventRecord(a, stream));
    BENCH_CHECK(cudaMemcpyAsync(dst, src, std::size_t(bytes), cudaMemcpyDeviceToDevice, stream));
    BENCH_CHECK(cudaEventRecord(b, stream));
    BENCH_CHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (t >= 2) gbps.push_back(2.0 * double(bytes) / (double(ms) * 1e-3) / 1e9);  // 2 warm-ups
  }
  BENCH_CHECK(cudaEventDestroy(a));
  BENCH_CHECK(cudaEventDestroy(b));
  BENCH_CHECK(cudaFree(src));
  BENCH_CHECK(cudaFree(dst));
  f.copy_gbps = median_of(gbps);
  f.copy_bytes = bytes;
  const auto [lo, hi] = std::minmax_element(gbps.begin(), gbps.end());
  f.copy_spread = (*hi - *lo) / f.copy_gbps;
}

// ---------------------------------------------------------------------------------------------
// Buffers and L2 rotation.

/// A grow-only device allocation, reused across benchmarks so that cudaMalloc/cudaFree stay
/// out of the loop. `tag` names what it holds, so consecutive benchmarks on the same shape
/// reuse generated inputs instead of regenerating them.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t capacity() const { return cap_; }
  bool fits(std::size_t bytes) const { return bytes <= cap_; }

  void release() {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    cap_ = 0;
    tag.clear();
    filled = 0;
  }
  void reserve(std::size_t bytes) {
    if (bytes <= cap_) return;
    release();
    BENCH_CHECK(cudaMalloc(&ptr_, bytes));
    cap_ = bytes;
  }

  std::string tag;     ///< what the contents are (empty: nothing meaningful)
  int64_t filled = 0;  ///< how many rotation slots of `tag` are filled

 private:
  void* ptr_ = nullptr;
  std::size_t cap_ = 0;
};

/// Grows every buffer in `requests` to its size. A buffer that must grow is freed first; if free
/// memory is still short, the `idle` buffers and those requested at 0 bytes are freed, then, as
/// a last resort, the requested buffers that already fit (they may be far larger than needed).
/// Throws if the device cannot hold it all, naming how much was needed (the benchmark is then
/// skipped, not aborted).
inline void reserve_all(const std::vector<std::pair<DeviceBuffer*, std::size_t>>& requests,
                        const std::vector<DeviceBuffer*>& idle) {
  constexpr std::size_t kHeadroom = std::size_t(512) << 20;  // CUB, the runtime, the context
  auto missing_bytes = [&] {
    std::size_t m = 0;
    for (const auto& [buf, bytes] : requests)
      if (!buf->fits(bytes)) m += bytes;
    return m;
  };
  auto free_bytes = [] {
    std::size_t free_b = 0, total_b = 0;
    BENCH_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return free_b;
  };
  for (const auto& [buf, bytes] : requests)
    if (!buf->fits(bytes)) buf->release();
  if (missing_bytes() == 0) return;
  if (missing_bytes() + kHeadroom > free_bytes()) {
    for (DeviceBuffer* b : idle) b->release();
    for (const auto& [buf, bytes] : requests)
      if (bytes == 0) buf->release();
  }
  if (missing_bytes() + kHeadroom > free_bytes()) {
    for (const auto& [buf, bytes] : requests) buf->release();
  }
  const std::size_t missing = missing_bytes();
  const std::size_t free_b = free_bytes();
  if (missing + kHeadroom > free_b)
    throw BenchCudaError("needs " + gib_string(double(missing)) + " of device memory, " +
                         gib_string(double(free_b)) + " free");
  for (const auto& [buf, bytes] : requests) buf->reserve(bytes);
}

/// How many rotation slots (copies of one op's input + output) make the data touched between
/// two visits of a slot exceed 2x the L2 size, so that no input is read from L2 that a real
/// decode step would read from DRAM. Capped at `cap_bytes` in total (one slot minimum: a single
/// input larger than 2x L2 cannot be cached anyway).
inline int64_t rotation_slots(int64_t slot_bytes, int64_t l2_bytes, int64_t cap_bytes) {
  const int64_t want = 2 * l2_bytes / std::max<int64_t>(slot_bytes, 1) + 1;
  const int64_t cap = std::max<int64_t>(cap_bytes / std::max<int64_t>(slot_bytes, 1), 1);
  return std::max<int64_t>(1, std::min(want, cap));
}

}  // namespace softk_bench
