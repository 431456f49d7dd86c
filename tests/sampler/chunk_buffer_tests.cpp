// A chunk's host buffers: out of memory is reported as the chunk's size, naming --chunk-rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "chunk_buffer.hpp"

namespace {

TEST(ChunkBuffer, HoldsItsElements) {
  const std::vector<int32_t> buffer = sampler::chunk_buffer<int32_t>(10, 2, "row status");
  EXPECT_EQ(buffer.size(), 10u);
}

TEST(ChunkBuffer, OutOfMemoryNamesTheChunkAndChunkRows) {
  // 2^50 floats: 4 PiB, past any host's address space, so the allocation fails everywhere.
  try {
    (void)sampler::chunk_buffer<float>(int64_t{1} << 50, 123456789, "probabilities");
    FAIL() << "allocated 4 PiB";
  } catch (const sampler::Error& e) {
    const std::string message = e.what();
    for (const char* needle : {"123456789 rows", "probabilities: 4503599627370496 bytes", "--chunk-rows"})
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  }
}

}  // namespace
