// block_write_topk_by_range_bins (src/kernels/block_range_bin_sort.cuh), called directly by one
// block on the keys of each case's values, so that both of its answers are seen: the op-level
// tests cannot tell whether a row was sorted by it or handed to the radix select, as both are
// exact. Each case says which answer it must give; either way, a true must come with the exact
// sorted top-k and a false with nothing written. Bounds past the keys' range (lowest above top, +inf,
// -inf), one value for every key, a cut in the last bin, too few keys and too little room.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "kernels/block_range_bin_sort.cuh"

namespace {

using softk::kernels::TopkKey;
constexpr int kThreads = 512;
constexpr TopkKey kUnwritten = 0x7B7B7B7B7B7B7B7Bull;
constexpr float kInf = std::numeric_limits<float>::infinity();

/// The keys in global memory, visited across the block (the function's key source).
struct GlobalKeys {
  const TopkKey* keys;
  unsigned count;

  template <typename Visit>
  __device__ void operator()(Visit&& visit) const {
    for (unsigned i = threadIdx.x; i < count; i += kThreads) visit(keys[i]);
  }
};

__global__ void sort_by_range_bins(GlobalKeys keys, unsigned k, float lowest, float top, std::size_t spare_bytes,
                                   TopkKey* out, int* answer) {
  extern __shared__ uint4 spare[];
  const softk::kernels::RangeBins bins(lowest, top);
  const bool sorted = softk::kernels::block_write_topk_by_range_bins<kThreads>(
      k, keys, bins, spare, spare_bytes, [&](unsigned rank, TopkKey key) { out[rank] = key; });
  if (threadIdx.x == 0) *answer = sorted ? 1 : 0;
}

/// The keys of values[0, n), value i with index i: the library's own encoding, so that the
/// test follows any change to it.
__global__ void make_keys(const float* values, unsigned n, TopkKey* keys) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    keys[i] = softk::kernels::make_key(values[i], i);
}

enum class Expect { sorted, handed_back };

struct Case {
  std::string name;
  std::vector<float> values;  ///< the key of value i has index i
  unsigned k;
  float lowest, top;  ///< the bins' bounds
  Expect expect;
  unsigned room = 0;  ///< keys the spare memory holds past its header; 0: plenty (4096)
};

class RangeBinSort : public softk_test::GpuTestWithParam<Case> {};

TEST_P(RangeBinSort, SortsExactlyOrHandsBackUntouched) {
  const Case& c = GetParam();
  const auto count = static_cast<unsigned>(c.values.size());
  softk_test::DeviceBuffer d_values(std::max<std::size_t>(1, count) * sizeof(float));
  softk_test::DeviceBuffer d_keys(std::max<std::size_t>(1, count) * sizeof(TopkKey));
  softk_test::upload(d_values.get(), c.values.data(), count * sizeof(float), stream());
  make_keys<<<4, 256, 0, stream()>>>(d_values.as<float>(), count, d_keys.as<TopkKey>());
  ASSERT_EQ(cudaSuccess, cudaGetLastError());
  std::vector<TopkKey> expected = softk_test::download<TopkKey>(d_keys.get(), count, stream());
  std::sort(expected.begin(), expected.end(), std::greater<TopkKey>());
  expected.resize(std::min<std::size_t>(expected.size(), c.k));

  softk_test::DeviceBuffer d_out(c.k * sizeof(TopkKey));
  softk_test::DeviceBuffer d_answer(sizeof(int));
  const std::vector<TopkKey> unwritten(c.k, kUnwritten);
  softk_test::upload(d_out.get(), unwritten.data(), c.k * sizeof(TopkKey), stream());
  const std::size_t spare_bytes = softk::kernels::range_bin_sort_bytes<kThreads>(c.room != 0 ? c.room : 4096);
  ASSERT_EQ(cudaSuccess, cudaFuncSetAttribute(sort_by_range_bins, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(spare_bytes)));
  sort_by_range_bins<<<1, kThreads, spare_bytes, stream()>>>(
      GlobalKeys{d_keys.as<TopkKey>(), count}, c.k, c.lowest, c.top, spare_bytes,
      d_out.as<TopkKey>(), d_answer.as<int>());
  ASSERT_EQ(cudaSuccess, cudaGetLastError());
  const int answer = softk_test::download<int>(d_answer.get(), 1, stream())[0];
  const std::vector<TopkKey> out = softk_test::download<TopkKey>(d_out.get(), c.k, stream());

  if (answer == 1) {
    EXPECT_EQ(out, expected) << "sorted, but not the exact top-k in order";
  } else {
    EXPECT_EQ(out, unwritten) << "handed back, but wrote output";
  }
  EXPECT_EQ(answer, c.expect == Expect::sorted ? 1 : 0);
}

std::vector<float> normal_values(std::size_t n, double sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(sigma));
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

/// `above` distinct values in (10, 11), then `ties` copies of 5, over a background below 0.
std::vector<float> ties_under_winners(std::size_t above, std::size_t ties, std::size_t background) {
  std::vector<float> v;
  for (std::size_t i = 0; i < above; ++i)
    v.push_back(10.0f + static_cast<float>(i + 1) / static_cast<float>(above + 1));
  v.insert(v.end(), ties, 5.0f);
  for (float x : normal_values(background, 1.0, 7)) v.push_back(-1.0f - std::fabs(x));
  return v;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<float> normal = normal_values(4000, 2.0, 1);
  const float lo = *std::min_element(normal.begin(), normal.end());
  const float hi = *std::max_element(normal.begin(), normal.end());
  for (unsigned k : {1u, 50u, 256u, 1024u})
    out.push_back({"normal_K" + std::to_string(k), normal, k, lo, hi, Expect::sorted});
  // Bounds that fit the keys badly only spread them unevenly: still exact.
  out.push_back({"lowest_above_top", normal_values(200, 2.0, 2), 50, 3.0f, -3.0f, Expect::sorted});
  out.push_back({"top_plus_inf", normal_values(200, 2.0, 3), 50, -10.0f, kInf, Expect::sorted});
  std::vector<float> with_masked = normal_values(150, 2.0, 4);
  with_masked.insert(with_masked.end(), 100, -kInf);
  out.push_back({"lowest_minus_inf_masked_keys", with_masked, 200, -kInf, 8.0f, Expect::sorted});
  out.push_back({"one_value_everywhere", std::vector<float>(256, 0.75f), 100, 0.75f, 0.75f, Expect::sorted});
  out.push_back({"one_value_past_a_bin", std::vector<float>(257, 0.75f), 100, 0.75f, 0.75f, Expect::handed_back});
  // The ties' bin cut (K inside them) or whole above the cut (K past them): 256 ranked, 257 not.
  out.push_back({"cut_inside_256_ties", ties_under_winners(100, 256, 500), 200, -5.0f, 11.0f, Expect::sorted});
  out.push_back({"cut_inside_257_ties", ties_under_winners(100, 257, 500), 200, -5.0f, 11.0f, Expect::handed_back});
  out.push_back({"ties_257_above_cut", ties_under_winners(100, 257, 500), 400, -5.0f, 11.0f, Expect::handed_back});
  // Keys below the lowest bound share the last bin: a cut there ranks them inside it.
  std::vector<float> below_lowest = normal_values(40, 1.0, 5);
  for (float& x : below_lowest) x += 20.0f;
  for (float x : normal_values(200, 1.0, 6)) below_lowest.push_back(x);
  out.push_back({"cut_in_last_bin", below_lowest, 100, 15.0f, 25.0f, Expect::sorted});
  out.push_back({"fewer_keys_than_k", normal_values(10, 1.0, 8), 20, -5.0f, 5.0f, Expect::handed_back});
  // Room for the k keys but not for the rest of the cut bin (60 ties, 50 of them past k).
  out.push_back({"room_short_of_cut_bin", ties_under_winners(100, 60, 100), 110, -5.0f, 11.0f, Expect::handed_back,
                 120});
  out.push_back({"room_short_of_k", normal, 50, lo, hi, Expect::handed_back, 49});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Edges, RangeBinSort, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
