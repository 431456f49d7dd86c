// allow_most_dynamic_shared (src/kernels/kernel_launch.hpp) on a kernel whose static shared
// memory leaves less than its launch's dynamic bytes under the 48 KB default. That limit counts
// static and dynamic bytes together, so such a launch fails with "invalid argument" unless the
// kernel has opted in, even though its dynamic bytes alone are under 48 KB. A twin kernel that
// never opts in shows the case really passes the default.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "kernels/kernel_launch.hpp"

namespace {

constexpr int kThreads = 256;
constexpr unsigned kStaticBytes = 40 * 1024;
constexpr unsigned kDynamicBytes = 16 * 1024;  // under 48 KB alone; 56 KB with the static bytes

/// Writes into both kinds of shared memory and sums one word of each, so that neither is
/// optimised away; out[0] = 2 x dynamic_words x tag.
template <int kVariant>
__global__ void touch_shared(uint32_t tag, unsigned dynamic_words, uint32_t* out) {
  __shared__ uint32_t fixed[kStaticBytes / sizeof(uint32_t)];
  extern __shared__ uint32_t dynamic[];
  for (unsigned i = threadIdx.x; i < kStaticBytes / sizeof(uint32_t); i += kThreads) fixed[i] = tag;
  for (unsigned i = threadIdx.x; i < dynamic_words; i += kThreads) dynamic[i] = tag;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t sum = 0;
    for (unsigned i = 0; i < dynamic_words; ++i) sum += fixed[i] + dynamic[i];
    out[0] = sum;
  }
}

cudaError_t launch(void (*kernel)(uint32_t, unsigned, uint32_t*), unsigned dynamic_bytes, uint32_t* out,
                   cudaStream_t stream) {
  const softk::kernels::KernelLaunch one(dim3(1), dim3(kThreads), dynamic_bytes, stream);
  return cudaLaunchKernelEx(&one.config(), kernel, uint32_t{3}, dynamic_bytes / 4u, out);
}

TEST(DynamicShared, StaticPlusDynamicPastDefaultFailsWithoutOptIn) {
  SOFTK_TEST_REQUIRE_GPU();
  const softk_test::Stream stream;
  const softk_test::DeviceBuffer out(sizeof(uint32_t));
  EXPECT_EQ(launch(touch_shared<0>, kDynamicBytes, out.as<uint32_t>(), stream.get()), cudaErrorInvalidValue);
  (void)cudaGetLastError();  // a launch's configuration error is not sticky; clear it for the tests after
}

TEST(DynamicShared, OptInAllowsStaticPlusDynamicPastDefault) {
  SOFTK_TEST_REQUIRE_GPU();
  const softk_test::Stream stream;
  const softk_test::DeviceBuffer out(sizeof(uint32_t));
  softk::kernels::allow_most_dynamic_shared(touch_shared<1>);
  ASSERT_EQ(launch(touch_shared<1>, kDynamicBytes, out.as<uint32_t>(), stream.get()), cudaSuccess);
  EXPECT_EQ(softk_test::download<uint32_t>(out.get(), 1, stream.get())[0], 2u * (kDynamicBytes / 4u) * 3u);
}

// Host threads launching one kernel with different dynamic bytes: every launch succeeds, where a
// limit set to each launch's own bytes lets one thread lower it under another's launch.
TEST(DynamicShared, ConcurrentLaunchesOfDifferentSizes) {
  SOFTK_TEST_REQUIRE_GPU();
  const softk_test::DeviceBuffer out(2 * sizeof(uint32_t));
  std::vector<cudaError_t> status(2, cudaSuccess);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      const softk_test::Stream stream;
      const unsigned bytes = t == 0 ? kDynamicBytes : 2 * kDynamicBytes;
      for (int i = 0; i < 200 && status[t] == cudaSuccess; ++i) {
        softk::kernels::allow_most_dynamic_shared(touch_shared<2>);
        status[t] = launch(touch_shared<2>, bytes, out.as<uint32_t>() + t, stream.get());
      }
      if (status[t] == cudaSuccess) status[t] = cudaStreamSynchronize(stream.get());
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(status[0], cudaSuccess) << cudaGetErrorString(status[0]);
  EXPECT_EQ(status[1], cudaSuccess) << cudaGetErrorString(status[1]);
}

}  // namespace
