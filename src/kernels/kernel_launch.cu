// sm90_image_loaded(): the one place that asks which image the device loaded (kernel_launch.hpp).
#include "kernels/kernel_launch.hpp"

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

}  // namespace softk::kernels
