// sm90_image_loaded(): the one place that asks which image the device loaded; and
// allow_most_dynamic_shared() (kernel_launch.hpp).
#include "kernels/kernel_launch.hpp"

#include <mutex>
#include <set>
#include <utility>

namespace softk::kernels {
namespace {

/// Compiled like every softk kernel: its PTX version is the loaded image's.
__global__ void image_probe_kernel() {}

}  // namespace

bool sm90_image_loaded(const DeviceInfo& device) {
  if (device.compute_major < 9) return false;
  return cached_per_device<bool>([](int) {
    cudaFuncAttributes image{};
    SOFTK_CUDA_CHECK(cudaFuncGetAttributes(&image, image_probe_kernel));
    return image.ptxVersion >= 90;
  });
}

void allow_most_dynamic_shared(const void* kernel) {
  static std::mutex mutex;
  static std::set<std::pair<int, const void*>> allowed;  // (device, kernel)
  const int device = detail::current_device_ordinal();
  const std::lock_guard<std::mutex> lock(mutex);
  if (allowed.count({device, kernel}) != 0) return;
  cudaFuncAttributes attributes{};
  SOFTK_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int most = current_device_info().max_shared_memory_per_block - static_cast<int>(attributes.sharedSizeBytes);
  SOFTK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
  allowed.insert({device, kernel});
}

}  // namespace softk::kernels
