#include "device_info.hpp"

#include <array>
#include <mutex>

#include "cuda_check.hpp"

namespace softk {

const DeviceInfo& current_device_info() {
  constexpr int kMaxDevices = 64;
  static std::array<DeviceInfo, kMaxDevices> cache{};
  static std::array<std::once_flag, kMaxDevices> filled;
  int device = 0;
  SOFTK_CUDA_CHECK(cudaGetDevice(&device));
  if (device < 0 || device >= kMaxDevices) throw CudaError("softk: device ordinal out of range: " + std::to_string(device));
  std::call_once(filled[device], [device] {
    DeviceInfo& info = cache[device];
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.max_shared_memory_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.l2_bytes, cudaDevAttrL2CacheSize, device));
    SOFTK_CUDA_CHECK(cudaDeviceGetAttribute(&info.compute_major, cudaDevAttrComputeCapabilityMajor, device));
  });
  return cache[device];
}

}  // namespace softk
