// Properties of the current device that the dispatcher and launchers need, read once per
// device and cached (cudaDeviceGetAttribute is not a stream operation, so this is safe inside
// graph capture and costs nothing per op after the first).
#pragma once

#include <array>
#include <mutex>

namespace softk {

struct DeviceInfo {
  int sm_count;
  int max_shared_memory_per_block;  ///< opt-in limit, bytes
  int l2_bytes;
  int compute_major;  ///< 9 and up: the Hopper-only steps may apply (see sm90_image_loaded)
  /// A grid's y extent at most (65535 on every GPU so far, where x goes to 2^31 - 1): the grids
  /// that give each row a grid row go in runs of this many (for_each_grid_row_run).
  int max_grid_rows;
};

/// The current device's properties. Throws softk::CudaError when no device is usable.
const DeviceInfo& current_device_info();

namespace detail {
constexpr int kMaxDevices = 64;
/// The current device's ordinal. Throws softk::CudaError when no device is usable or the
/// ordinal is past kMaxDevices.
int current_device_ordinal();
}  // namespace detail

/// compute(ordinal) run once per device (thread-safe) and its result cached: for facts fixed
/// per device, such as attributes or which kernel image the device loaded.
template <typename T, typename Compute>
const T& cached_per_device(Compute compute) {
  static std::array<T, detail::kMaxDevices> cache{};
  static std::array<std::once_flag, detail::kMaxDevices> filled;
  const int device = detail::current_device_ordinal();
  std::call_once(filled[device], [&] { cache[device] = compute(device); });
  return cache[device];
}

}  // namespace softk
