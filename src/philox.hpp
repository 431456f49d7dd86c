// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC11), and the uniform that sampling draws from it (softk/sample.hpp). Counter-based: a draw
// is a pure function of (key, counter), so a row's draw needs no state and no knowledge of the
// other rows. Plain C++ that nvcc compiles for the device too, so every backend draws the same u.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SOFTK_HOST_DEVICE __host__ __device__
#else
#define SOFTK_HOST_DEVICE
#endif

namespace softk::detail {

struct Philox4x32Block {
  uint32_t word[4];
};

/// Ten rounds of the Philox4x32 bijection of `counter` under the key (key0, key1).
SOFTK_HOST_DEVICE inline Philox4x32Block philox4x32_10(Philox4x32Block counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // the key's bump between rounds
  uint32_t* c = counter.word;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    const uint64_t product0 = uint64_t{kMultiplier0} * c[0];
    const uint64_t product1 = uint64_t{kMultiplier1} * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(product1 >> 32) ^ c[1] ^ key0, static_cast<uint32_t>(product1),
                              static_cast<uint32_t>(product0 >> 32) ^ c[3] ^ key1, static_cast<uint32_t>(product0)};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
  }
  return counter;
}

/// Sampling's u in [0, 1) for (seed, offset): 24 bits, so that it is exact in fp32 as in double.
SOFTK_HOST_DEVICE inline float sampling_uniform(uint64_t seed, uint64_t offset) {
  const Philox4x32Block counter{{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), 0u, 0u}};
  const Philox4x32Block out = philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<float>(out.word[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace softk::detail
