// Runtime dtype -> compile-time element types, done once per launch. The instantiation list is
// deliberately short: input f32/f16/bf16, output f32 or the input's own type.
#pragma once

#include <string>

#include "kernels/element.cuh"
#include "softk/types.hpp"

namespace softk::kernels {

template <typename T>
struct TypeTag {
  using type = T;
};

/// Calls f(TypeTag<In>{}) for the input dtype.
template <typename F>
void with_input_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: f(TypeTag<float>{}); return;
    case DType::f16: f(TypeTag<__half>{}); return;
    case DType::bf16: f(TypeTag<__nv_bfloat16>{}); return;
  }
  throw Error("softk: unsupported dtype (got " + std::to_string(static_cast<int>(dtype)) + ")");
}

/// Calls f(TypeTag<In>{}, TypeTag<Out>{}) where Out is float or In (validated by the op layer).
template <typename F>
void with_input_output_types(DType dtype, DType out_dtype, F&& f) {
  with_input_type(dtype, [&](auto in) {
    using In = typename decltype(in)::type;
    if (out_dtype == DType::f32) {
      f(in, TypeTag<float>{});
    } else {
      f(in, TypeTag<In>{});
    }
  });
}

/// Row r's first element. 64-bit: r * stride overflows 32 bits long before memory runs out.
template <typename T>
__host__ __device__ __forceinline__ const T* row_pointer(const void* base, int64_t r, int64_t stride) {
  return static_cast<const T*>(base) + r * stride;
}

}  // namespace softk::kernels
