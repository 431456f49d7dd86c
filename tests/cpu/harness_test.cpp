// Tests of the test harness itself (tests/common): every GPU test leans on these comparisons,
// property checks and generators, so each is shown to *fail* on a planted defect and to hold
// on a correct answer. Without this a lenient helper would turn every GPU test into a tautology.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"

namespace {

using namespace softk_test;
using softk::DType;

TEST(Harness, ToleranceCatchesRealErrorsAndAcceptsRoundingNoise) {
  const Tolerance f32 = prob_tolerance(DType::f32);
  EXPECT_TRUE(within(0.25 * (1 + 5e-5), 0.25, f32));
  EXPECT_FALSE(within(0.25 * (1 + 2e-4), 0.25, f32));
  // A dropped element at V = 256000 shifts every probability by ~4e-6 absolute; the abs part of
  // the fp32 tolerance must not swallow that.
  EXPECT_FALSE(within(3.9e-6 + 1e-6, 3.9e-6, f32));
  EXPECT_TRUE(within(0.0, 1e-38, f32));  // underflow / flush-to-zero is allowed
  EXPECT_FALSE(within(0.0, 1e-30, f32));
  EXPECT_FALSE(within(NAN, 0.5, f32));
  EXPECT_FALSE(within(0.5, NAN, f32));
  EXPECT_TRUE(within(NAN, NAN, f32));
  EXPECT_FALSE(within(-INFINITY, -80.0, log_prob_tolerance()));
  EXPECT_TRUE(within(-INFINITY, -INFINITY, log_prob_tolerance()));
  EXPECT_FALSE(within(INFINITY, -INFINITY, log_prob_tolerance()));
  // f16 output: one f16 ulp off at 0.75 (ulp 2^-11) is more than half an ulp + fp32 noise.
  const Tolerance f16 = prob_tolerance(DType::f16);
  EXPECT_TRUE(within(0.75 + std::ldexp(1.0, -12), 0.75, f16));
  EXPECT_FALSE(within(0.75 + std::ldexp(1.0, -10), 0.75, f16));
}

TEST(Harness, AllCloseAndAllEqualReportMismatches) {
  std::vector<float> a = {0.1f, 0.2f, 0.3f, 0.4f}, b = a;
  EXPECT_TRUE(all_close(a, b, 2, 2, prob_tolerance(DType::f32), "same"));
  b[3] = 0.41f;
  const auto r = all_close(a, b, 2, 2, prob_tolerance(DType::f32), "planted");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("row 1, col 1"), std::string::npos) << r.message();
  std::vector<int32_t> i = {1, 2, 3}, j = {1, 2, 4};
  EXPECT_FALSE(all_equal(i, j, 1, 3, "planted"));
  EXPECT_TRUE(all_equal(i, i, 1, 3, "same"));
  std::vector<int32_t> status = {0, 1};
  EXPECT_TRUE(rows_sum_to_one({0.5f, 0.5f, 0.0f, 0.0f}, 2, 2, status, prob_tolerance(DType::f32), "ok"));
  EXPECT_FALSE(rows_sum_to_one({0.5f, 0.49f, 0.0f, 0.0f}, 2, 2, status, prob_tolerance(DType::f32), "short"));
  EXPECT_FALSE(rows_sum_to_one({0.5f, 0.5f, 0.1f, 0.0f}, 2, 2, status, prob_tolerance(DType::f32), "masked row not 0"));
}

TEST(Harness, PoisonIsNeverAValidOutput) {
  unsigned char bytes[4];
  std::memset(bytes, kPoisonByte, 4);
  float f;
  int32_t i;
  std::memcpy(&f, bytes, 4);
  std::memcpy(&i, bytes, 4);
  EXPECT_TRUE(std::isfinite(f) && f > 1.0f) << "poison must not read as a probability, log-prob or NaN";
  EXPECT_GT(load_as(DType::f16, bytes, 0), 1.0f);
  EXPECT_TRUE(std::isfinite(load_as(DType::f16, bytes, 0)));
  EXPECT_GT(load_as(DType::bf16, bytes, 0), 1.0f);
  EXPECT_GT(i, 1 << 30) << "poison must not read as -1 or a small index";
}

// The property checker on hand-made answers for logits {5, 7, 7, 1, -inf, 7}.
TEST(Harness, TopkPropertiesCatchEveryKindOfWrongAnswer) {
  HostLogits h;
  h.vocab = 6;
  h.values = {5, 7, 7, 1, -kInf, 7};
  const auto check = [&](std::vector<int32_t> idx, std::vector<float> p) {
    return topk_properties(h, static_cast<int32_t>(idx.size()), p, idx);
  };
  EXPECT_TRUE(check({1, 2, 5}, {0.3f, 0.3f, 0.3f}));
  EXPECT_TRUE(check({1, 2, 5, 0, 3, -1}, {0.3f, 0.3f, 0.3f, 0.05f, 0.01f, 0.0f}));
  EXPECT_FALSE(check({2, 1, 5}, {0.3f, 0.3f, 0.3f})) << "tie not broken by the lower index";
  EXPECT_FALSE(check({1, 2, 0}, {0.3f, 0.3f, 0.05f})) << "index 5 (logit 7) is missing";
  EXPECT_FALSE(check({1, 1, 2}, {0.3f, 0.3f, 0.3f})) << "duplicate index";
  EXPECT_FALSE(check({1, 2, 5, 0, -1, 3}, {0.3f, 0.3f, 0.3f, 0.05f, 0.0f, 0.01f})) << "-1 before a valid token";
  EXPECT_FALSE(check({1, 2, 5, 0, 3, 4}, {0.3f, 0.3f, 0.3f, 0.05f, 0.01f, 0.0f})) << "masked token selected";
  EXPECT_FALSE(check({1, 2, 6}, {0.3f, 0.3f, 0.3f})) << "index out of range";
  EXPECT_FALSE(check({1, 2, 5}, {0.3f, 0.3f, 0.31f})) << "probabilities increase";
  h.values[3] = kNaN;
  EXPECT_TRUE(check({-1, -1}, {NAN, NAN}));
  EXPECT_FALSE(check({1, -1}, {NAN, NAN})) << "NaN row must be all -1";
  EXPECT_FALSE(check({-1, -1}, {0.0f, NAN})) << "NaN row must be all NaN";
}

TEST(Harness, AdversarialStridePutsExactlyTheWinnersOnOneStride) {
  for (int64_t S : {128, 1024}) {
    DistParams p;
    p.stride = S;
    p.count = 50;
    const HostLogits h = make_logits(DType::f32, 4, 1, 50 * S + 17, Dist::adversarial_stride, p);
    for (int64_t r = 0; r < 4; ++r) {
      std::vector<int32_t> order(static_cast<std::size_t>(h.vocab));
      for (int32_t i = 0; i < h.vocab; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + 50, order.end(),
                        [&](int32_t a, int32_t b) { return h.at(r, a) > h.at(r, b); });
      const int64_t lane = order[0] % S;
      for (int j = 0; j < 50; ++j) EXPECT_EQ(order[j] % S, lane) << "row " << r << " winner " << j;
    }
    // The rows use different lanes, including the last one of the stride.
    EXPECT_EQ(static_cast<int64_t>(std::max_element(h.row(1), h.row(1) + h.vocab) - h.row(1)) % S, S - 1);
  }
}

TEST(Harness, AdversarialStrideLanesSitSideBySide) {
  DistParams p;
  p.stride = 1000;
  p.channel = 3;
  p.count = 12;
  p.lanes = 4;
  p.lane_gap = 8;
  const HostLogits h = make_logits(DType::f32, 1, 1, 3000, Dist::adversarial_stride, p);
  std::vector<int64_t> winners;
  for (int64_t i = 0; i < h.vocab; ++i)
    if (h.at(0, i) >= 10.0f) winners.push_back(i);
  // Winner j at (j / 4) x 1000 + 3 + (j % 4) x 8.
  EXPECT_EQ(winners, (std::vector<int64_t>{3, 11, 19, 27, 1003, 1011, 1019, 1027, 2003, 2011, 2019, 2027}));
}

TEST(Harness, LayoutsPlaceGarbageWhereNoOpMayRead) {
  const HostLogits h = make_logits(DType::f16, 2, 1, 5, Dist::normal, {}, {8, 1});
  ASSERT_EQ(h.bytes.size(), (1 + 2 * 8) * 2u);
  const auto* u = reinterpret_cast<const uint16_t*>(h.bytes.data());
  // Element 0 (before the misaligned base) and elements 5..7 of each row are garbage: NaN, max
  // or +inf, never a plausible logit.
  for (int64_t i : {0, 1 + 5, 1 + 6, 1 + 7, 1 + 8 + 5, 1 + 8 + 7}) {
    const float g = load_as(DType::f16, u, i);
    EXPECT_TRUE(std::isnan(g) || g >= 65504.0f) << "element " << i;
  }
  for (int64_t v = 0; v < 5; ++v) EXPECT_EQ(load_as(DType::f16, u, 1 + 8 + v), h.at(1, v));
  const softk::LogitsView view = h.host_view();
  EXPECT_EQ(static_cast<const unsigned char*>(view.data) - h.bytes.data(), 2);
  EXPECT_EQ(view.row_stride, 8);
}

TEST(Harness, DistributionsHaveTheirAdvertisedShape) {
  const HostLogits masked = make_logits(DType::bf16, 6, 1, 100, Dist::masked_rows);
  for (int64_t r = 0; r < 6; ++r) {
    const bool all_masked = std::all_of(masked.row(r), masked.row(r) + 100, [](float x) { return x == -kInf; });
    EXPECT_EQ(all_masked, r % 3 == 1) << "row " << r;
  }
  const HostLogits constant = make_logits(DType::f16, 1, 1, 77, Dist::constant);
  EXPECT_TRUE(std::all_of(constant.values.begin(), constant.values.end(), [](float x) { return x == 0.75f; }));
  DistParams few;
  few.count = 3;
  const HostLogits f = make_logits(DType::f32, 2, 1, 1000, Dist::few_unmasked, few);
  EXPECT_EQ(std::count_if(f.row(1), f.row(1) + 1000, [](float x) { return x != -kInf; }), 3);
  const HostLogits n = make_logits(DType::f32, 5, 1, 64, Dist::nan_row);
  EXPECT_TRUE(std::isnan(n.at(4, 63)));
  EXPECT_TRUE(std::any_of(n.row(2), n.row(2) + 64, [](float x) { return std::isnan(x); }));
  EXPECT_FALSE(std::any_of(n.row(1), n.row(1) + 64, [](float x) { return std::isnan(x); }));
  // Generation is per-row seeded: a row does not depend on the batch it is generated in.
  const HostLogits one = make_logits(DType::f32, 1, 1, 300, Dist::llm_like, {}, {}, 9);
  const HostLogits many = make_logits(DType::f32, 40, 1, 300, Dist::llm_like, {}, {}, 9);
  EXPECT_EQ(std::memcmp(one.row(0), many.row(0), 300 * 4), 0);
}

// The tolerances must be achievable by an honest fp32 kernel, or the GPU tests would fail correct
// code. The model below computes like the GPU kernels do: fp32 throughout, y = (x - m) * k with
// k = log2(e)/T rounded to fp32, exp2f, a tree-shaped fp32 sum (a block reduction), and an
// fp32 divide; f16/bf16 outputs are that fp32 value rounded once. It must pass the exact
// comparisons the GPU tests make, on every distribution and a large V.
// A thread sums its ~32 elements sequentially, then the block combines partial sums as a tree.
float pairwise_sum(const float* a, std::size_t n) {
  if (n <= 32) {
    float s = 0.0f;
    for (std::size_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  const std::size_t half = n / 2;
  return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}

std::vector<float> model_fp32_softmax(const HostLogits& h, float T) {
  const int64_t rows = h.rows(), V = h.vocab;
  std::vector<float> out(static_cast<std::size_t>(rows * V));
  const float k = static_cast<float>(1.4426950408889634 / T);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = h.row(r);
    float m = -INFINITY;
    bool nan = false;
    for (int64_t v = 0; v < V; ++v) {
      nan |= std::isnan(x[v]);
      m = std::max(m, x[v]);
    }
    float* o = out.data() + r * V;
    if (nan || m == -INFINITY) {
      std::fill(o, o + V, nan ? NAN : 0.0f);
      continue;
    }
    std::vector<float> e(static_cast<std::size_t>(V));
    for (int64_t v = 0; v < V; ++v) e[v] = std::isinf(m) ? (x[v] == m ? 1.0f : 0.0f) : std::exp2f((x[v] - m) * k);
    const float d = pairwise_sum(e.data(), e.size());
    for (int64_t v = 0; v < V; ++v) o[v] = e[v] / d;
  }
  return out;
}

TEST(Harness, Fp32ModelKernelMeetsTheTolerances) {
  const Dist dists[] = {Dist::normal,   Dist::heavy_tailed, Dist::llm_like, Dist::ascending,   Dist::descending,
                        Dist::constant, Dist::spikes,       Dist::pm_inf,   Dist::nan_row,     Dist::masked_rows,
                        Dist::few_unmasked, Dist::signed_zeros, Dist::adversarial_stride};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Dist d : dists)
      for (int64_t V : {7, 4097, 151936})
        for (float T : {1.0f, 0.25f, 30.0f}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " " + dist_name(d) + " V=" + std::to_string(V) + " T=" + std::to_string(T));
          const HostLogits h = make_logits(dt, 3, 1, V, d, {}, {}, 11);
          const SoftmaxOracle o = oracle_softmax(h, T);
          const std::vector<float> model = model_fp32_softmax(h, T);
          ASSERT_TRUE(all_close(model, o.probs, 3, V, prob_tolerance(DType::f32), "fp32 model"));
          ASSERT_TRUE(rows_sum_to_one(model, 3, V, o.status, prob_tolerance(DType::f32), "fp32 model sums"));
          if (dt == DType::f32) continue;
          std::vector<float> rounded(model.size());
          for (std::size_t i = 0; i < model.size(); ++i) rounded[i] = quantize(dt, model[i]);
          ASSERT_TRUE(all_close(rounded, o.probs, 3, V, prob_tolerance(dt), "fp32 model rounded to the input dtype"));
          ASSERT_TRUE(rows_sum_to_one(rounded, 3, V, o.status, prob_tolerance(dt), "rounded model sums"));
        }
}

// The property checker must accept the oracle's (correct) answers on every distribution the
// GPU tests use, including +inf rows, signed zeros, few unmasked tokens and K = V.
TEST(Harness, TopkPropertiesAcceptTheOracleOnEveryGpuTestInput) {
  const Dist dists[] = {Dist::normal,   Dist::heavy_tailed, Dist::llm_like, Dist::ascending,   Dist::descending,
                        Dist::constant, Dist::spikes,       Dist::pm_inf,   Dist::nan_row,     Dist::masked_rows,
                        Dist::few_unmasked, Dist::signed_zeros, Dist::adversarial_stride};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Dist d : dists)
      for (int64_t V : {1, 33, 4097})
        for (int32_t k : {1, 16, 1024, 4097}) {
          if (k > V) continue;
          DistParams p;
          p.count = std::max(1, k / 2);
          const HostLogits h = make_logits(dt, 7, 1, V, d, p, {V + 1, 1}, 3);
          const TopkOracle o = oracle_topk(h, k, 1.0f, false);
          ASSERT_TRUE(topk_properties(h, k, o.probs, o.indices))
              << dtype_name(dt) << " " << dist_name(d) << " V=" << V << " K=" << k;
        }
}

TEST(Harness, ContainsTokenMatchesWholeWordsOnly) {
  EXPECT_TRUE(contains_token("softk: logits.data must not be null (got nullptr)", "data"));
  EXPECT_TRUE(contains_token("k must be in [1, vocab=1000] (got 0)", "0"));
  EXPECT_FALSE(contains_token("k must be in [1, vocab=1000] (got 10)", "0"));
  EXPECT_FALSE(contains_token("(got 1.0)", "0"));
  EXPECT_FALSE(contains_token("(got -10)", "-1"));
  EXPECT_FALSE(contains_token("(got bf16)", "f16"));
  EXPECT_TRUE(contains_token("(got -inf)", "inf"));
  EXPECT_TRUE(contains_token("holds V <= 32768 (got V=50257)", "50257"));
}

}  // namespace
