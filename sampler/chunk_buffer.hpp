// The host buffers of one chunk of rows, sized by --chunk-rows (or the chunk budget): running out
// of memory for one is a problem with the chunk's size, reported as such, with the sizes, instead
// of a bare out-of-memory from wherever it happened.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "error.hpp"

namespace sampler {

/// `elements` zeroed (value-initialised) elements for a chunk of `chunk_rows` rows; `what` names the
/// buffer in the message. Throws sampler::Error naming --chunk-rows when the host has no room.
template <class T>
std::vector<T> chunk_buffer(int64_t elements, int64_t chunk_rows, const char* what) {
  try {
    return std::vector<T>(static_cast<std::size_t>(elements));
  } catch (const std::bad_alloc&) {
    throw Error("out of memory for a chunk of " + std::to_string(chunk_rows) + " rows (" + what + ": " +
                std::to_string(elements * static_cast<int64_t>(sizeof(T))) + " bytes); a smaller --chunk-rows needs less");
  }
}

}  // namespace sampler
