// The dispatcher: picks an algorithm and launch shape from (rows, V, dtype, device). Its
// crossovers are measured, not guessed: see bench/RESULTS.md for the runs behind each constant.
#pragma once

#include <cstdint>

#include "device_info.hpp"
#include "softk/softmax.hpp"

namespace softk::detail {

SoftmaxAlgorithm choose_softmax_algorithm(int64_t rows, int64_t vocab, DType dtype, const DeviceInfo& device);

}  // namespace softk::detail
