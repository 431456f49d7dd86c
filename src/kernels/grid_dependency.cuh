// The device side of programmatic dependent launch (PTX griddepcontrol, sm_90+; see
// kernel_launch.hpp for the host side and why). Below sm_90 both are no-ops, and such an image is
// never launched programmatically (sm90_image_loaded).
#pragma once

namespace softk::kernels {

/// Lets the next kernel on the stream be scheduled now, if it was launched programmatically: it
/// still waits in its own wait_for_previous_grid() until this grid has completed.
__device__ __forceinline__ void let_next_grid_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the previous kernel on the stream has completed and its writes are visible (at
/// once when this grid was not launched programmatically). Nothing before it may touch global
/// memory: the previous kernel may still be writing these logits, or reading this workspace or
/// these outputs.
__device__ __forceinline__ void wait_for_previous_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// The start of every kernel an op may launch programmatically.
__device__ __forceinline__ void enter_after_previous_grid() {
  let_next_grid_launch();
  wait_for_previous_grid();
}

}  // namespace softk::kernels
