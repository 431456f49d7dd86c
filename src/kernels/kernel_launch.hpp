// Kernel launches through cudaLaunchKernelEx, so that a launch can carry attributes: a
// thread-block cluster shape, and programmatic dependent launch (PDL, sm_90+).
//
// A kernel launched programmatically may be scheduled while the kernel before it on the stream
// is still running. Every softk kernel that an op may launch so starts with
// enter_after_previous_grid() (grid_dependency.cuh), which waits until that kernel has completed
// and its writes are visible before anything touches global memory: the results are the same
// either way. What overlaps is the launch itself and the blocks' scheduling, ~1.1-1.5 us an op
// at batch 1 (bench/RESULTS.md) — in a decode step, the tail of the LM head's kernel.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "cuda_check.hpp"
#include "device_info.hpp"

namespace softk::kernels {

/// Where an op's kernels go, and whether they go as programmatic dependent launches.
struct LaunchContext {
  cudaStream_t stream;
  bool programmatic;  ///< only ever true where sm90_image_loaded()
};

/// Whether a grid of `blocks` pays as a programmatic dependent launch. Every kernel lets the next
/// one launch as it starts, so the next op's blocks wait resident in whatever block slots this
/// grid leaves free. A grid of more than half the SMs but at most `crowded_blocks` (about one
/// block an SM where more fit) ran 0.77-0.94x so (H200; bench/RESULTS.md, e3fd1da and its
/// successor), likely because those waiting blocks take slots and shared memory on the busy SMs;
/// smaller grids, and grids that fill the SMs, gained 1.02-1.25x from the hidden launch.
inline bool programmatic_launch_pays(int64_t blocks, int64_t crowded_blocks, const DeviceInfo& device) {
  return blocks <= device.sm_count / 2 || blocks > crowded_blocks;
}

/// For grids that give each row a grid row (blockIdx.y), whose y extent is limited
/// (device.max_grid_rows): launch_rows(first_row, rows) for each run of at most that many of a
/// batch's `rows`, in order, so that one op serves any row count. The runs need nothing more to
/// stay in order: each waits on the stream for the one before it, a programmatic one in its
/// enter_after_previous_grid().
template <typename LaunchRows>
void for_each_grid_row_run(int64_t rows, const DeviceInfo& device, LaunchRows&& launch_rows) {
  for (int64_t first = 0; first < rows; first += device.max_grid_rows)
    launch_rows(first, std::min<int64_t>(device.max_grid_rows, rows - first));
}

/// Whether this device is sm_90+ and runs an image compiled for sm_90+: the condition for the
/// Hopper-only steps, programmatic launch (griddepcontrol is compiled out below, so a kernel
/// would not wait) and thread-block clusters. Asked once per device.
bool sm90_image_loaded(const DeviceInfo& device);

/// Lets `kernel` take, beside its static shared memory, as much dynamic shared memory as the
/// device allows a block: once per kernel and device (thread-safe), before its first launch with
/// dynamic shared memory. Why the most and not a launch's bytes: the default limit is 48 KB for
/// static and dynamic together, so a kernel with static shared memory fails a launch under 48 KB
/// of dynamic; and a limit set to each launch's bytes races with another host thread launching the
/// same kernel with more. The limit reserves nothing: occupancy follows a launch's own bytes.
void allow_most_dynamic_shared(const void* kernel);

template <typename... Params>
void allow_most_dynamic_shared(void (*kernel)(Params...)) {
  allow_most_dynamic_shared(reinterpret_cast<const void*>(kernel));
}

/// One launch: kernel<<<grid, block, shared_bytes, stream>>> plus the attributes added.
/// The configuration points at the object's own attribute array, so a move re-points it and
/// copies are refused.
class KernelLaunch {
 public:
  KernelLaunch(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream) {
    config_.gridDim = grid;
    config_.blockDim = block;
    config_.dynamicSmemBytes = shared_bytes;
    config_.stream = stream;
    config_.attrs = attributes_;
  }
  KernelLaunch(KernelLaunch&& other) noexcept : config_(other.config_) {
    for (unsigned i = 0; i < config_.numAttrs; ++i) attributes_[i] = other.attributes_[i];
    config_.attrs = attributes_;
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
  KernelLaunch& operator=(KernelLaunch&&) = delete;

  KernelLaunch& programmatic(bool on) {
    if (on) {
      cudaLaunchAttribute& a = next_attribute();
      a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      a.val.programmaticStreamSerializationAllowed = 1;
    }
    return *this;
  }

  /// Clusters of `ctas` CTAs along x.
  KernelLaunch& cluster(unsigned ctas) {
    cudaLaunchAttribute& a = next_attribute();
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = ctas;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    return *this;
  }

  const cudaLaunchConfig_t& config() const { return config_; }

  template <typename... Params, typename... Args>
  void operator()(void (*kernel)(Params...), Args&&... args) const {
    SOFTK_CUDA_CHECK(cudaLaunchKernelEx(&config_, kernel, std::forward<Args>(args)...));
  }

 private:
  cudaLaunchAttribute& next_attribute() {
    cudaLaunchAttribute& a = attributes_[config_.numAttrs++];
    a = {};
    return a;
  }

  cudaLaunchAttribute attributes_[2]{};
  cudaLaunchConfig_t config_{};
};

}  // namespace softk::kernels
