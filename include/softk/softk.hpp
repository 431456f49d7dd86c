// softk — softmax, exact top-k and sampling for the last step of LLM decoding.
// The whole public API; plain C++17 plus cuda_runtime_api.h, no nvcc needed to include it.
#pragma once

#include "softk/cpu.hpp"
#include "softk/reference.hpp"
#include "softk/sample.hpp"
#include "softk/sampler.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"
#include "softk/types.hpp"
