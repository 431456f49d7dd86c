// Every CUDA runtime call and every launch in softk goes through SOFTK_CUDA_CHECK, so a failure
// surfaces as softk::CudaError naming the call, the file and the line.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "softk/types.hpp"

namespace softk::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* what, const char* file, int line) {
  throw CudaError(std::string("softk: ") + what + " failed: " + cudaGetErrorString(status) + " (" + file + ":" +
                  std::to_string(line) + ")");
}

}  // namespace softk::detail

#define SOFTK_CUDA_CHECK(call)                                                            \
  do {                                                                                    \
    const cudaError_t softk_status_ = (call);                                             \
    if (softk_status_ != cudaSuccess)                                                     \
      ::softk::detail::throw_cuda_error(softk_status_, #call, __FILE__, __LINE__);        \
  } while (0)

/// After a <<<>>> launch: launch-configuration errors are reported by cudaGetLastError.
#define SOFTK_CHECK_LAUNCH() SOFTK_CUDA_CHECK(cudaGetLastError())
