// softk::cpu::sample (softk/sample.hpp): the draw's generator against Random123's known answers,
// the sampled distribution against the exact truncated one (a chi-square test over 10^5 draws,
// for each kind of bound and for all of them at once), the candidate set's edges (ties at a
// bound, exact top-p and min-p boundaries, +inf and -inf tokens, NaN and masked rows, greedy),
// determinism (a row's token depends on its own logits, parameters, seed and offset only), and
// argument validation. The expected distributions are worked out here from the definition,
// independently of src/cpu/sample_cpu.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/sampling_check.hpp"
#include "philox.hpp"
#include "softk/cpu.hpp"

namespace {

using softk_test::fake_pointer;
using softk_test::SamplingBounds;
using softk_test::truncated_distribution;
using softk_test::throws_error_naming;

constexpr float kInf = std::numeric_limits<float>::infinity();

/// `rows` copies of `row` as a dense f32 [rows, V] tensor.
struct Rows {
  std::vector<float> values;
  softk::LogitsView view;

  Rows(const std::vector<float>& row, int64_t rows) : values(row.size() * static_cast<std::size_t>(rows)) {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = row[i % row.size()];
    view.data = values.data();
    view.batch = rows;
    view.vocab = static_cast<int64_t>(row.size());
  }
};

std::vector<int32_t> sample_rows(const softk::LogitsView& view, const softk::SamplingParams& params,
                                 std::vector<int32_t>* status = nullptr) {
  std::vector<int32_t> tokens(static_cast<std::size_t>(view.rows()), -7);
  if (status) status->assign(tokens.size(), -7);
  softk::cpu::sample(view, params, tokens.data(), status ? status->data() : nullptr);
  return tokens;
}

/// 10^5 draws of one row, at offsets 0 .. 10^5 - 1 (one row each), against `expected`: no draw
/// outside its support, and the counts within the chi-square bound.
void expect_distribution(const std::vector<float>& row, const softk::SamplingParams& base,
                         const std::vector<double>& expected, const std::string& what) {
  constexpr int64_t kDraws = 100000;
  const Rows rows(row, kDraws);
  std::vector<uint64_t> offsets(kDraws);
  std::iota(offsets.begin(), offsets.end(), uint64_t{0});
  softk::SamplingParams params = base;
  params.offsets = offsets.data();
  EXPECT_EQ(softk_test::distribution_mismatch(sample_rows(rows.view, params), expected), "") << what;
}

/// Logits like a model's: a few dominant ones over a normal-ish tail, no two equal.
std::vector<float> llm_row(int n) {
  std::vector<float> row(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) row[i] = static_cast<float>(std::sin(i * 12.9898) * 2.5);
  row[3] = 6.0f;
  row[11] = 5.2f;
  row[17] = 4.7f;
  return row;
}

// Random123's kat_vectors for philox4x32-10: counter, key, output.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    softk::detail::Philox4x32Block counter;
    uint32_t key0, key1;
    uint32_t expected[4];
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff,
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    const auto out = softk::detail::philox4x32_10(k.counter, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.word[i], k.expected[i]) << "word " << i;
  }
}

TEST(Philox, SamplingUniformIsA24BitFractionOfWordZero) {
  const softk::detail::Philox4x32Block counter{{7, 0, 0, 0}};  // offset 7
  const auto out = softk::detail::philox4x32_10(counter, 0x9abcdef0u, 0x12345678u);
  const float u = softk::detail::sampling_uniform(0x123456789abcdef0ull, 7);
  EXPECT_EQ(u, static_cast<float>(out.word[0] >> 8) / 16777216.0f);
  // The offset's high word goes to counter word 1, the seed's to key word 1.
  EXPECT_NE(softk::detail::sampling_uniform(1, uint64_t{1} << 32), softk::detail::sampling_uniform(1, 0));
  EXPECT_NE(softk::detail::sampling_uniform(uint64_t{1} << 32, 0), softk::detail::sampling_uniform(0, 0));
  double sum = 0;
  for (uint64_t offset = 0; offset < 10000; ++offset) {
    const float v = softk::detail::sampling_uniform(42, offset);
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

// Each bound alone and all together, at temperatures below, at and above 1.
TEST(CpuSample, DistributionMatchesTheTruncatedSoftmax) {
  const std::vector<float> row = llm_row(40);
  const SamplingBounds cases[] = {
      {"plain", 1.0f, 0, 1.0f, 0.0f},         {"hot", 2.5f, 0, 1.0f, 0.0f},
      {"top_k 5", 0.7f, 5, 1.0f, 0.0f},       {"top_p 0.8", 1.0f, 0, 0.8f, 0.0f},
      {"min_p 0.05", 1.3f, 0, 1.0f, 0.05f},   {"all three", 1.3f, 12, 0.9f, 0.02f},
      {"top_k 1", 1.0f, 1, 1.0f, 0.0f},
  };
  for (const SamplingBounds& c : cases) {
    softk::SamplingParams params = c.params(static_cast<int64_t>(row.size()));
    params.seed = 20261201;
    expect_distribution(row, params, truncated_distribution(row, c.temperature, c.top_k, c.top_p, c.min_p), c.name);
  }
}

// The draw itself: u from (seed, offset), and the candidate at which the running sum of their
// probabilities, in ascending token order, first passes u. (A walk in any other order gives the
// same distribution but other tokens, which the distribution tests cannot see.)
/// Each of `draws` offsets' token is the one the draw's definition picks from `q`, the row's
/// exact distribution: u from (seed, offset), the first token in token order whose running sum
/// of q passes u.
void expect_inverse_cdf_tokens(const std::vector<float>& row, softk::SamplingParams params,
                               const std::vector<double>& q, uint64_t draws) {
  const Rows one(row, 1);
  for (uint64_t offset = 0; offset < draws; ++offset) {
    params.offset = offset;
    const double u = softk::detail::sampling_uniform(params.seed, offset);
    int32_t expected = -1;
    double running = 0;
    for (std::size_t i = 0; i < q.size() && expected < 0; ++i)
      if (q[i] > 0 && (running += q[i]) > u) expected = static_cast<int32_t>(i);
    ASSERT_EQ(sample_rows(one.view, params), std::vector<int32_t>{expected}) << "offset " << offset << ", u " << u;
  }
}

TEST(CpuSample, TheDrawIsTheInverseCdfInTokenOrder) {
  const std::vector<float> row = llm_row(50);
  softk::SamplingParams params;
  params.temperature = 1.2f;
  params.top_k = 30;
  params.top_p = 0.97f;
  params.seed = 99;
  expect_inverse_cdf_tokens(row, params, truncated_distribution(row, 1.2f, 30, 0.97f, 0.0f), 2000);
}

// A flat row's nucleus holds most of its 5000 tokens: past the first tokens the sampler sorts
// (1024), so it sorts further, and the candidates are still exactly the definition's.
TEST(CpuSample, ANucleusPastTheFirstSortedTokens) {
  std::vector<float> row(5000);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(std::sin(i * 0.37) * 0.05);
  softk::SamplingParams params;
  params.top_p = 0.9f;
  params.seed = 5;
  const std::vector<double> q = truncated_distribution(row, 1.0f, 0, 0.9f, 0.0f);
  ASSERT_GT(std::count_if(q.begin(), q.end(), [](double x) { return x > 0; }), 1024);
  expect_inverse_cdf_tokens(row, params, q, 500);
}

// Equal logits at a bound: the contract's order (ties to the smaller index) decides which stay.
TEST(CpuSample, TiesAtABoundKeepTheSmallerIndices) {
  const std::vector<float> row = {1.0f, 5.0f, 5.0f, 5.0f, 5.0f, 0.5f};
  softk::SamplingParams params;
  params.top_k = 2;
  std::vector<double> expected(row.size(), 0.0);
  expected[1] = expected[2] = 0.5;
  expect_distribution(row, params, expected, "top_k 2 among four equal");
}

// Four equal logits weigh exactly 1 each, so top_p and min_p can sit exactly on a boundary:
// a bound keeps the token that reaches it ("at least"), and ties keep the smaller indices.
TEST(CpuSample, ExactBoundariesKeepTheTokenThatReachesThem) {
  const std::vector<float> row = {7.0f, 7.0f, 7.0f, 7.0f};
  struct Case {
    float top_p, min_p;
    std::vector<double> expected;
  };
  const Case cases[] = {
      {0.25f, 0.0f, {1.0, 0, 0, 0}},
      {0.5f, 0.0f, {0.5, 0.5, 0, 0}},
      {0.51f, 0.0f, {1.0 / 3, 1.0 / 3, 1.0 / 3, 0}},
      {1.0f, 1.0f, {0.25, 0.25, 0.25, 0.25}},  // every weight is 1.0 x the largest
  };
  for (const Case& c : cases) {
    softk::SamplingParams params;
    params.top_p = c.top_p;
    params.min_p = c.min_p;
    expect_distribution(row, params, c.expected,
                        "top_p " + std::to_string(c.top_p) + " min_p " + std::to_string(c.min_p));
  }
}

TEST(CpuSample, NonFiniteTokensAndRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Row 0: -inf tokens never drawn; row 1: two +inf tokens share it all; row 2: NaN; row 3: all -inf.
  const std::vector<float> values = {-kInf, 2.0f, -kInf, 1.0f,  //
                                     1.0f,  kInf, 3.0f,  kInf,  //
                                     1.0f,  nan,  3.0f,  2.0f,  //
                                     -kInf, -kInf, -kInf, -kInf};
  softk::LogitsView view;
  view.data = values.data();
  view.batch = 4;
  view.vocab = 4;
  std::vector<int64_t> hits(8, 0);
  for (uint64_t offset = 0; offset < 2000; ++offset) {
    softk::SamplingParams params;
    params.offset = offset;
    std::vector<int32_t> status;
    const std::vector<int32_t> tokens = sample_rows(view, params, &status);
    ASSERT_TRUE(tokens[0] == 1 || tokens[0] == 3) << tokens[0];
    ASSERT_TRUE(tokens[1] == 1 || tokens[1] == 3) << tokens[1];
    ++hits[tokens[0]];
    ++hits[4 + tokens[1]];
    EXPECT_EQ(tokens[2], -1);
    EXPECT_EQ(tokens[3], -1);
    EXPECT_EQ(status, (std::vector<int32_t>{0, 0, 2, 1}));
  }
  EXPECT_GT(hits[3], 400);  // p = 1 / (1 + e) = 0.27
  EXPECT_NEAR(hits[5] / 2000.0, 0.5, 0.05);
}

TEST(CpuSample, TemperatureZeroIsGreedyWithTiesToTheSmallerIndex) {
  const std::vector<float> row = {1.0f, 7.0f, 3.0f, 7.0f};
  const Rows rows(row, 1);
  softk::SamplingParams params;
  params.temperature = 0.0f;
  params.top_p = 0.1f;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    params.seed = seed;
    EXPECT_EQ(sample_rows(rows.view, params), std::vector<int32_t>{1});
  }
}

// A row's token depends on its logits, parameters, seed and offset only: the same rows give the
// same tokens alone, in a batch in any order, and with their parameters as per-row arrays.
TEST(CpuSample, ARowsTokenIgnoresTheRowsAroundIt) {
  const std::vector<std::vector<float>> rows = {llm_row(64), std::vector<float>(64, 0.25f), llm_row(64)};
  const float temperatures[] = {0.8f, 1.0f, 1.7f};
  const int32_t top_ks[] = {0, 9, 20};
  const float top_ps[] = {0.95f, 1.0f, 0.7f};
  const float min_ps[] = {0.0f, 0.0f, 0.01f};
  const uint64_t seeds[] = {1, 2, 3};
  const uint64_t offsets[] = {10, 20, 30};
  std::vector<int32_t> alone;
  for (int r = 0; r < 3; ++r) {
    softk::SamplingParams p;
    p.temperature = temperatures[r];
    p.top_k = top_ks[r];
    p.top_p = top_ps[r];
    p.min_p = min_ps[r];
    p.seed = seeds[r];
    p.offset = offsets[r];
    const Rows one(rows[r], 1);
    alone.push_back(sample_rows(one.view, p)[0]);
  }
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, std::vector<int>{2, 0, 1}}) {
    std::vector<float> values;
    std::vector<float> t, tp, mp;
    std::vector<int32_t> tk;
    std::vector<uint64_t> s, o;
    for (int r : order) {
      values.insert(values.end(), rows[r].begin(), rows[r].end());
      t.push_back(temperatures[r]);
      tk.push_back(top_ks[r]);
      tp.push_back(top_ps[r]);
      mp.push_back(min_ps[r]);
      s.push_back(seeds[r]);
      o.push_back(offsets[r]);
    }
    softk::LogitsView view;
    view.data = values.data();
    view.batch = 3;
    view.vocab = 64;
    softk::SamplingParams p;
    p.temperatures = t.data();
    p.top_ks = tk.data();
    p.top_ps = tp.data();
    p.min_ps = mp.data();
    p.seeds = s.data();
    p.offsets = o.data();
    const std::vector<int32_t> batch = sample_rows(view, p);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(batch[j], alone[order[j]]) << "row " << order[j] << " at position " << j;
  }
}

// With per-row top_ks, a non-zero scalar top_k bounds them: a row's 0, or a value past it, takes
// the bound, exactly as if the row had asked for the bound.
TEST(CpuSample, TheScalarTopKBoundsThePerRowOnes) {
  const std::vector<float> row = llm_row(64);
  const Rows rows(row, 4);
  const int32_t per_row[] = {0, 30, 5, 64};
  const int32_t as_bounded[] = {10, 10, 5, 10};
  const uint64_t offsets[] = {3, 3, 3, 3};
  for (uint64_t seed = 0; seed < 200; ++seed) {
    softk::SamplingParams params;
    params.top_k = 10;
    params.seed = seed;
    params.offsets = offsets;
    params.top_ks = per_row;
    const std::vector<int32_t> bounded = sample_rows(rows.view, params);
    params.top_ks = as_bounded;
    ASSERT_EQ(bounded, sample_rows(rows.view, params)) << "seed " << seed;
  }
}

// Half-precision rows sample as the fp32 rows of their values; a row stride skips the padding.
TEST(CpuSample, HalfInputsAndRowStrideSampleAsTheirFp32Values) {
  const std::vector<uint16_t> bf16 = {0x3f80, 0x4000, 0x4040, 0x7fc0,   // 1, 2, 3 and a NaN pad
                                      0x4040, 0x3f80, 0x4000, 0x7fc0};
  const std::vector<float> f32 = {1.0f, 2.0f, 3.0f, 3.0f, 1.0f, 2.0f};
  softk::LogitsView half;
  half.data = bf16.data();
  half.dtype = softk::DType::bf16;
  half.batch = 2;
  half.vocab = 3;
  half.row_stride = 4;
  softk::LogitsView full;
  full.data = f32.data();
  full.batch = 2;
  full.vocab = 3;
  for (uint64_t offset = 0; offset < 200; ++offset) {
    softk::SamplingParams p;
    p.offset = offset;
    std::vector<int32_t> status;
    EXPECT_EQ(sample_rows(half, p, &status), sample_rows(full, p));
    EXPECT_EQ(status, (std::vector<int32_t>{0, 0}));
  }
}

TEST(CpuSampleValidation, BadArgumentsAreNamedAndNothingIsWritten) {
  const std::vector<float> values(6 * 4, 1.0f);
  softk::LogitsView view;
  view.data = values.data();
  view.batch = 2;
  view.steps = 3;
  view.vocab = 4;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float bad_top_ps[] = {0.5f, 1.0f, 1.5f, 0.5f, 0.5f, 0.5f};
  const int32_t bad_top_ks[] = {0, 1, 2, 3, 4, 5};
  const float bad_temperatures[] = {1.0f, 1.0f, 1.0f, 1.0f, -2.0f, 1.0f};
  struct Case {
    const char* name;
    std::function<void(softk::SamplingParams&)> mutate;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"temperature -1", [](auto& p) { p.temperature = -1.0f; }, {"params.temperature", "-1"}},
      {"temperature nan", [&](auto& p) { p.temperature = nan; }, {"params.temperature", "nan"}},
      {"temperature inf", [](auto& p) { p.temperature = kInf; }, {"params.temperature", "inf"}},
      {"temperature subnormal", [](auto& p) { p.temperature = 1e-40f; }, {"params.temperature"}},
      {"top_k -1", [](auto& p) { p.top_k = -1; }, {"params.top_k", "-1"}},
      {"top_k past vocab", [](auto& p) { p.top_k = 5; }, {"params.top_k", "5", "vocab=4"}},
      {"top_p 0", [](auto& p) { p.top_p = 0.0f; }, {"params.top_p", "0"}},
      {"top_p 1.5", [](auto& p) { p.top_p = 1.5f; }, {"params.top_p", "1.5"}},
      {"top_p nan", [&](auto& p) { p.top_p = nan; }, {"params.top_p", "nan"}},
      {"min_p -0.1", [](auto& p) { p.min_p = -0.1f; }, {"params.min_p", "-0.1"}},
      {"min_p 2", [](auto& p) { p.min_p = 2.0f; }, {"params.min_p", "2"}},
      {"top_ps[2]", [&](auto& p) { p.top_ps = bad_top_ps; }, {"params.top_ps[2]", "1.5"}},
      {"top_ks[5]", [&](auto& p) { p.top_ks = bad_top_ks; }, {"params.top_ks[5]", "5"}},
      {"temperatures[4]", [&](auto& p) { p.temperatures = bad_temperatures; }, {"params.temperatures[4]", "-2"}},
  };
  for (const Case& c : cases) {
    softk::SamplingParams params;
    c.mutate(params);
    std::vector<int32_t> tokens(6, -7), status(6, -7);
    EXPECT_TRUE(throws_error_naming([&] { softk::cpu::sample(view, params, tokens.data(), status.data()); },
                                    c.needles))
        << c.name;
    EXPECT_EQ(tokens, std::vector<int32_t>(6, -7)) << c.name << ": a refused call wrote tokens";
    EXPECT_EQ(status, std::vector<int32_t>(6, -7)) << c.name << ": a refused call wrote row status";
  }
  EXPECT_TRUE(throws_error_naming([&] { softk::cpu::sample(view, {}, nullptr); }, {"tokens", "null"}));
  for (const auto& c : softk_test::bad_logits_cases()) {
    softk::LogitsView v = softk_test::valid_fake_logits();
    c.mutate(v);
    EXPECT_TRUE(throws_error_naming([&] { softk::cpu::sample(v, {}, static_cast<int32_t*>(fake_pointer(2))); },
                                    c.needles))
        << c.name;
  }
}

}  // namespace
