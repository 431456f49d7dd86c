// The CPU oracle (softk::cpu::softmax / topk) against brute force written here from the contract
// alone: long-double softmax read straight from the raw bytes with independent decoders, and
// top-k by repeated selection (not a sort), over small shapes, every distribution including
// all the non-finite ones, every dtype, temperatures, strides and a misaligned base.
// Every GPU test trusts this oracle, so it gets the strictest tolerance (one fp32 ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"
#include "softk/cpu.hpp"

namespace {

using softk::DType;
using softk::RowStatus;
using namespace softk_test;

// ------------------------------------------------------------------------------------------
// Brute force, from the contract

// Independent decoders (field arithmetic, not the converters under test).
long double decode_raw(DType dtype, const unsigned char* p) {
  uint16_t h;
  switch (dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f16: {
      std::memcpy(&h, p, 2);
      const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
      const long double mag = e == 0x1f ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp((long double)m, -24) : std::ldexp((long double)(1024 + m), e - 25);
      return (h & 0x8000) ? -mag : mag;
    }
    case DType::bf16: {
      std::memcpy(&h, p, 2);
      const int e = (h >> 7) & 0xff, m = h & 0x7f;
      const long double mag = e == 0xff ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp((long double)m, -133) : std::ldexp((long double)(128 + m), e - 134);
      return (h & 0x8000) ? -mag : mag;
    }
  }
  return NAN;
}

struct BruteRow {
  std::vector<long double> x;
  RowStatus status = RowStatus::ok;
  std::vector<long double> p, logp;
};

BruteRow brute_row(const HostLogits& h, int64_t r, long double T) {
  BruteRow b;
  const unsigned char* base = static_cast<const unsigned char*>(h.host_view().data) + r * h.stride() * h.esize();
  for (int64_t v = 0; v < h.vocab; ++v) b.x.push_back(decode_raw(h.dtype, base + v * h.esize()));
  const auto n = b.x.size();
  b.p.assign(n, 0.0L);
  b.logp.assign(n, -INFINITY);
  bool nan = false;
  long double mx = -INFINITY;
  for (auto v : b.x) {
    if (std::isnan(v)) nan = true;
    else if (v > mx) mx = v;
  }
  if (nan) {
    b.status = RowStatus::has_nan;
    b.p.assign(n, NAN);
    b.logp.assign(n, NAN);
    return b;
  }
  if (mx == -INFINITY) {
    b.status = RowStatus::all_masked;
    return b;  // p = 0, log p = -inf
  }
  if (mx == INFINITY) {  // the +inf entries share the mass (the limit of softmax)
    long double count = 0;
    for (auto v : b.x) count += v == INFINITY;
    for (std::size_t i = 0; i < n; ++i)
      if (b.x[i] == INFINITY) {
        b.p[i] = 1.0L / count;
        b.logp[i] = -std::log(count);
      }
    return b;
  }
  long double sum = 0;
  for (auto v : b.x) sum += std::exp((v - mx) / T);
  for (std::size_t i = 0; i < n; ++i) {
    b.p[i] = std::exp((b.x[i] - mx) / T) / sum;
    b.logp[i] = (b.x[i] - mx) / T - std::log(sum);
  }
  return b;
}

// Top-k by K rounds of selection under "larger logit, then smaller index"; -inf is never taken.
void brute_topk(const BruteRow& b, int32_t k, bool log_probs, float* probs, int32_t* indices) {
  std::vector<bool> taken(b.x.size(), false);
  for (int32_t j = 0; j < k; ++j) {
    if (b.status == RowStatus::has_nan) {
      indices[j] = -1;
      probs[j] = NAN;
      continue;
    }
    int64_t best = -1;
    for (std::size_t i = 0; i < b.x.size(); ++i) {
      if (taken[i] || b.x[i] == -INFINITY) continue;
      if (best < 0 || b.x[i] > b.x[best]) best = static_cast<int64_t>(i);  // strict >: the lower index keeps a tie
    }
    if (best < 0) {
      indices[j] = -1;
      probs[j] = log_probs ? -INFINITY : 0.0f;
      continue;
    }
    taken[best] = true;
    indices[j] = static_cast<int32_t>(best);
    probs[j] = static_cast<float>(log_probs ? b.logp[best] : b.p[best]);
  }
}

// One fp32 ulp: both sides are double-or-better computations rounded once to fp32, so they may
// differ only when the exact value sits at a rounding boundary. abs: one fp32 denormal ulp.
constexpr Tolerance kOracleProbTol{1.5e-45, 1.2e-7};
constexpr Tolerance kOracleLogTol{1e-9, 1.2e-7};

// ------------------------------------------------------------------------------------------
// The sweep

const Dist kAllDists[] = {Dist::normal,     Dist::heavy_tailed,      Dist::llm_like, Dist::ascending,   Dist::descending,
                          Dist::constant,   Dist::spikes,            Dist::pm_inf,   Dist::nan_row,     Dist::masked_rows,
                          Dist::few_unmasked, Dist::adversarial_stride, Dist::signed_zeros};
const DType kAllDtypes[] = {DType::f32, DType::f16, DType::bf16};

struct SweepCase {
  DType dtype;
  Dist dist;
  int64_t V, rows;
  Layout layout;
  float T;
};

template <class F>
void for_each_small_case(F&& f) {
  const int64_t vocabs[] = {1, 2, 3, 7, 16, 33, 100, 257};
  const int64_t row_counts[] = {1, 3, 5};
  const float temps[] = {1.0f, 0.5f, 2.75f};
  for (DType dt : kAllDtypes)
    for (Dist d : kAllDists)
      for (int64_t V : vocabs)
        for (int64_t rows : row_counts)
          for (int layout_kind = 0; layout_kind < 3; ++layout_kind) {
            Layout layout;
            if (layout_kind == 1) layout.row_stride = V + 3;
            if (layout_kind == 2) {
              layout.row_stride = V + 1;
              layout.offset = 1;
            }
            const float T = temps[(V + rows + layout_kind) % 3];
            f(SweepCase{dt, d, V, rows, layout, T});
          }
}

std::string describe(const SweepCase& c) {
  return std::string(dtype_name(c.dtype)) + " " + dist_name(c.dist) + " V=" + std::to_string(c.V) +
         " rows=" + std::to_string(c.rows) + " stride=" + std::to_string(c.layout.row_stride) +
         " offset=" + std::to_string(c.layout.offset) + " T=" + std::to_string(c.T);
}

HostLogits make_case(const SweepCase& c) {
  DistParams p;
  p.stride = 8;
  p.count = std::max<int64_t>(1, c.V / 4);
  const auto [batch, steps] = split_rows(c.rows);
  return make_logits(c.dtype, batch, steps, c.V, c.dist, p, c.layout, 99 + static_cast<uint64_t>(c.V));
}

TEST(CpuOracle, SoftmaxMatchesBruteForceOnSmallShapes) {
  int64_t cases = 0;
  for_each_small_case([&](const SweepCase& c) {
    if (HasFailure()) return;  // one broken case is enough to read; don't flood
    SCOPED_TRACE(describe(c));
    const HostLogits h = make_case(c);
    const int64_t rows = h.rows(), V = h.vocab;
    std::vector<float> out(static_cast<std::size_t>(rows * V), 7.0f);
    std::vector<int32_t> status(static_cast<std::size_t>(rows), 99);
    softk::SoftmaxOptions opt;
    opt.temperature = c.T;
    opt.row_status = status.data();
    softk::cpu::softmax(h.host_view(), out.data(), opt);
    std::vector<float> want(out.size());
    std::vector<int32_t> want_status(status.size());
    for (int64_t r = 0; r < rows; ++r) {
      const BruteRow b = brute_row(h, r, c.T);
      want_status[r] = static_cast<int32_t>(b.status);
      for (int64_t v = 0; v < V; ++v) want[r * V + v] = static_cast<float>(b.p[v]);
    }
    EXPECT_TRUE(all_close(out, want, rows, V, kOracleProbTol, "cpu::softmax vs brute force"));
    EXPECT_TRUE(all_equal(status, want_status, rows, 1, "row_status"));
    ++cases;
  });
  EXPECT_GT(cases, 2000);
}

TEST(CpuOracle, SoftmaxHalfOutputsAreTheRoundedProbability) {
  // out_dtype = input dtype: each output must be the f16/bf16 value nearest to the exact
  // probability (half an ulp; plus one fp32 ulp since the oracle rounds through fp32 first).
  for (DType dt : {DType::f16, DType::bf16})
    for (Dist d : kAllDists)
      for (int64_t V : {1, 7, 33, 257, 4097}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + dist_name(d) + " V=" + std::to_string(V));
        const HostLogits h = make_logits(dt, 2, 2, V, d, {8, -1, std::max<int64_t>(1, V / 3), false}, {V + 2, 1}, 5);
        std::vector<uint16_t> out(static_cast<std::size_t>(h.rows() * V));
        softk::SoftmaxOptions opt;
        opt.out_dtype = dt;
        opt.temperature = 0.8f;
        softk::cpu::softmax(h.host_view(), out.data(), opt);
        const std::vector<float> got = decode(dt, out.data(), out.size());
        std::vector<float> want(out.size());
        for (int64_t r = 0; r < h.rows(); ++r) {
          const BruteRow b = brute_row(h, r, 0.8L);
          for (int64_t v = 0; v < V; ++v) want[r * V + v] = static_cast<float>(b.p[v]);
        }
        const Tolerance tol = dt == DType::f16 ? Tolerance{2.9802322387695312e-08 * 1.001, 4.8828125e-4 * 1.001}
                                               : Tolerance{1e-40, 3.90625e-3 * 1.001};
        ASSERT_TRUE(all_close(got, want, h.rows(), V, tol, "cpu::softmax half output"));
      }
}

TEST(CpuOracle, TopkMatchesBruteForceOnSmallShapes) {
  int64_t cases = 0;
  for_each_small_case([&](const SweepCase& c) {
    if (HasFailure()) return;
    const HostLogits h = make_case(c);
    const int64_t rows = h.rows(), V = h.vocab;
    std::vector<int32_t> ks = {1, static_cast<int32_t>(V)};
    if (V > 2) ks.push_back(2);
    if (V > 4) ks.push_back(static_cast<int32_t>(V / 2));
    for (int32_t k : ks)
      for (bool log_probs : {false, true}) {
        SCOPED_TRACE(describe(c) + " K=" + std::to_string(k) + (log_probs ? " log_probs" : ""));
        std::vector<float> probs(static_cast<std::size_t>(rows * k), 7.0f);
        std::vector<int32_t> idx(static_cast<std::size_t>(rows * k), 12345);
        std::vector<int32_t> status(static_cast<std::size_t>(rows), 99);
        softk::TopkOptions opt;
        opt.temperature = c.T;
        opt.log_probs = log_probs;
        opt.row_status = status.data();
        softk::cpu::topk(h.host_view(), k, probs.data(), idx.data(), opt);
        std::vector<float> want_p(probs.size());
        std::vector<int32_t> want_i(idx.size()), want_status(status.size());
        for (int64_t r = 0; r < rows; ++r) {
          const BruteRow b = brute_row(h, r, c.T);
          want_status[r] = static_cast<int32_t>(b.status);
          brute_topk(b, k, log_probs, want_p.data() + r * k, want_i.data() + r * k);
        }
        ASSERT_TRUE(all_equal(idx, want_i, rows, k, "cpu::topk indices vs brute force"));
        ASSERT_TRUE(all_close(probs, want_p, rows, k, log_probs ? kOracleLogTol : kOracleProbTol, "cpu::topk values"));
        ASSERT_TRUE(all_equal(status, want_status, rows, 1, "row_status"));
        ASSERT_TRUE(topk_properties(h, k, probs, idx));
      }
    ++cases;
  });
  EXPECT_GT(cases, 2000);
}

// ------------------------------------------------------------------------------------------
// Hand-computed answers: the contract's rules written out, independent of any brute force.

softk::LogitsView f32_view(const std::vector<float>& x, int64_t rows, int64_t V) {
  softk::LogitsView v;
  v.data = x.data();
  v.dtype = DType::f32;
  v.batch = rows;
  v.vocab = V;
  return v;
}

TEST(CpuOracle, SoftmaxHandComputedRows) {
  const float ln3 = std::log(3.0f);
  // row 0: {0, ln 3} -> {1/4, 3/4}; row 1: +inf twice shares the mass; row 2: all -inf;
  // row 3: NaN; row 4: extreme finite logits (x - max overflows fp32 but not the math).
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> x = {0.0f, ln3, -kInf, -kInf,   //
                                1.0f, kInf, -kInf, kInf,   //
                                -kInf, -kInf, -kInf, -kInf,  //
                                1.0f, kNaN, 2.0f, 3.0f,    //
                                big, -big, big, 0.0f};
  std::vector<float> out(20, 7.0f);
  std::vector<int32_t> status(5, 99);
  softk::SoftmaxOptions opt;
  opt.row_status = status.data();
  softk::cpu::softmax(f32_view(x, 5, 4), out.data(), opt);
  const std::vector<float> want = {0.25f, 0.75f, 0.0f, 0.0f, 0.0f, 0.5f, 0.0f, 0.5f, 0.0f, 0.0f,
                                   0.0f,  0.0f,  kNaN, kNaN, kNaN, kNaN, 0.5f, 0.0f, 0.5f, 0.0f};
  EXPECT_TRUE(all_close(out, want, 5, 4, kOracleProbTol, "hand-computed softmax"));
  EXPECT_EQ(status, (std::vector<int32_t>{0, 0, 1, 2, 0}));

  // Temperature: {0, 1} at T = 0.5 is softmax({0, 2}).
  const std::vector<float> y = {0.0f, 1.0f};
  std::vector<float> o(2);
  opt.temperature = 0.5f;
  opt.row_status = nullptr;  // optional: must be skipped, not written
  softk::cpu::softmax(f32_view(y, 1, 2), o.data(), opt);
  const double e2 = std::exp(2.0);
  EXPECT_TRUE(all_close(o, {static_cast<float>(1 / (1 + e2)), static_cast<float>(e2 / (1 + e2))}, 1, 2, kOracleProbTol, "T=0.5"));
}

TEST(CpuOracle, TopkHandComputedRows) {
  // row 0 ties: five equal logits -> indices 0, 1, 2, each 1/5.
  // row 1 fewer unmasked than K: {-inf, 1, -inf, 2, -inf} -> 3, 1, then -1 with probability 0.
  // row 2 NaN: -1 and NaN in every slot.
  // row 3 signed zeros are equal logits: -0.0 at index 0 ranks before +0.0 at index 1.
  // row 4 +inf: the +inf tokens first (1/2 each), then the best finite token at probability 0.
  const std::vector<float> x = {0.75f, 0.75f, 0.75f, 0.75f, 0.75f,  //
                                -kInf, 1.0f,  -kInf, 2.0f,  -kInf,  //
                                1.0f,  2.0f,  kNaN,  0.0f,  5.0f,   //
                                -0.0f, 0.0f,  -1.0f, -0.0f, -2.0f,  //
                                kInf,  3.0f,  kInf,  -kInf, 4.0f};
  std::vector<float> p(15);
  std::vector<int32_t> idx(15);
  std::vector<int32_t> status(5);
  softk::TopkOptions opt;
  opt.row_status = status.data();
  softk::cpu::topk(f32_view(x, 5, 5), 3, p.data(), idx.data(), opt);
  const double e = std::exp(1.0);
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 1, 2, 3, 1, -1, -1, -1, -1, 0, 1, 3, 0, 2, 4}));
  // Row 3: logits {-0, +0, -1, -0, -2}; softmax denominator 3 + e^-1 + e^-2.
  const double d3 = 3 + std::exp(-1.0) + std::exp(-2.0);
  const std::vector<float> want = {0.2f, 0.2f, 0.2f,
                                   static_cast<float>(e / (1 + e)), static_cast<float>(1 / (1 + e)), 0.0f,
                                   kNaN, kNaN, kNaN,
                                   static_cast<float>(1 / d3), static_cast<float>(1 / d3), static_cast<float>(1 / d3),
                                   0.5f, 0.5f, 0.0f};
  EXPECT_TRUE(all_close(p, want, 5, 3, kOracleProbTol, "hand-computed top-k"));
  EXPECT_EQ(status, (std::vector<int32_t>{0, 0, 2, 0, 0}));

  // log-probs: the empty slot is -inf, NaN stays NaN; temperature never changes the ranking.
  opt.log_probs = true;
  opt.temperature = 3.0f;
  std::vector<int32_t> idx_t(15);
  softk::cpu::topk(f32_view(x, 5, 5), 3, p.data(), idx_t.data(), opt);
  EXPECT_EQ(idx_t, idx);
  const double s1 = std::exp(-1.0 / 3.0) + 1.0;  // row 1 at T = 3: {1, 2} -> {-1/3, 0} after the max
  EXPECT_NEAR(p[3], -std::log(s1), 1e-6);
  EXPECT_NEAR(p[4], -1.0 / 3.0 - std::log(s1), 1e-6);
  EXPECT_EQ(p[5], -kInf);
  EXPECT_TRUE(std::isnan(p[6]));
  EXPECT_NEAR(p[12], -std::log(2.0), 1e-6);
  EXPECT_EQ(p[14], -kInf);
}

// The oracle reads a row at data + r * row_stride in the input's own dtype and never touches
// the padding: garbage (NaN, +inf, max) in the padding and before a misaligned base changes
// nothing. Compared against the same logits laid out densely.
TEST(CpuOracle, RowStrideAndOffsetAreHonouredAndPaddingIsIgnored) {
  for (DType dt : kAllDtypes) {
    const HostLogits dense = make_logits(dt, 3, 1, 1000, Dist::llm_like, {}, {}, 77);
    const HostLogits padded = make_logits(dt, 3, 1, 1000, Dist::llm_like, {}, {1037, 1}, 77);
    ASSERT_EQ(dense.values, padded.values);
    std::vector<float> a(3000), b(3000);
    softk::cpu::softmax(dense.host_view(), a.data(), {});
    softk::cpu::softmax(padded.host_view(), b.data(), {});
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << dtype_name(dt);
    std::vector<float> pa(150), pb(150);
    std::vector<int32_t> ia(150), ib(150);
    softk::cpu::topk(dense.host_view(), 50, pa.data(), ia.data(), {});
    softk::cpu::topk(padded.host_view(), 50, pb.data(), ib.data(), {});
    EXPECT_EQ(ia, ib) << dtype_name(dt);
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * 4), 0) << dtype_name(dt);
  }
}

}  // namespace
