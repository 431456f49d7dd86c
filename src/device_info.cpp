#include "device_info.hpp"

#include "cuda_check.hpp"

namespace softk {

namespace detail {

int current_device_ordinal() {
  int device = 0;
  SOFTK_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) throw CudaError("softk: device ordinal out of range: " + std::to_string(device));
  return device;
}

}  // namespace detail

const DeviceInfo& current_device_info() {
  return cached_per_device<DeviceInfo>([](int device) {
    DeviceInfo info{};
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.max_shared_memory_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.l2_bytes, cudaDevAttrL2CacheSize, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.compute_major, cudaDevAttrComputeCapabilityMajor, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.max_grid_rows, cudaDevAttrMaxGridDimY, device));
    return info;
  });
}

}  // namespace softk
