// Properties of the current device that the dispatcher and launchers need, read once per
// device and cached (cudaDeviceGetAttribute is not a stream operation, so this is safe inside
// graph capture and costs nothing per op after the first).
#pragma once

namespace softk {

struct DeviceInfo {
  int sm_count;
  int max_shared_memory_per_block;  ///< opt-in limit, bytes
  int l2_bytes;
  int compute_major;  ///< 9 and up: programmatic dependent launch
};

/// The current device's properties. Throws softk::CudaError when no device is usable.
const DeviceInfo& current_device_info();

}  // namespace softk
