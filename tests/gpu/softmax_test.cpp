// softk::softmax on the GPU, every algorithm (forced, and via auto) and the CUB reference,
// against the double-precision CPU oracle (softk::cpu::softmax):
//   Shapes/      dtype x V x rows, DESIGN.md's matrix (normal logits)
//   Inputs/      every distribution incl. +-inf, NaN rows, masked rows; row_status checked
//   Layouts/     row stride > V with garbage padding, misaligned base pointers
//   OutDtype/    output in the input's own dtype
//   Temperature/ T != 1
//   Sanitize/    a small cross-section for compute-sanitizer (scripts/gpu-check: '*Sanitize*')
// Each case also checks that rows sum to 1, that nothing was written past any output, and,
// for forced register/smem beyond their capacity, that softk::Error names the algorithm and V.
// Tolerances: tests/common/compare.hpp explains each number.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"
#include "common/runners.hpp"
#include "device_info.hpp"
#include "kernels/softmax_launch.hpp"
#include "softk/softmax.hpp"

namespace {

using namespace softk_test;
using softk::DType;

constexpr int64_t kHugeV = (int64_t{1} << 24) + 3;
constexpr int64_t kMiB = int64_t{1} << 20;

struct SoftmaxCase {
  SoftmaxImpl impl = SoftmaxImpl::automatic;
  DType dtype = DType::f32;
  int64_t V = 1;
  int64_t rows = 1;
  Dist dist = Dist::normal;
  Layout layout;
  float temperature = 1.0f;
  DType out_dtype = DType::f32;
  bool with_status = true;
  std::string name;
};

void PrintTo(const SoftmaxCase& c, std::ostream* os) { *os << c.name; }

std::string fmt_float_for_name(float x) {
  std::string s = std::to_string(x);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  for (char& ch : s)
    if (ch == '.') ch = 'p';
  return s;
}

// Readable gtest names, e.g. bf16_V50257_R64_spikes_stride50260_off1_T0p7_outbf16_register.
std::string case_name(const SoftmaxCase& c, bool show_dist) {
  std::string n = std::string(dtype_name(c.dtype)) + "_V" + std::to_string(c.V) + "_R" + std::to_string(c.rows);
  if (show_dist) n += std::string("_") + dist_name(c.dist);
  if (c.layout.row_stride) n += "_stride" + std::to_string(c.layout.row_stride);
  if (c.layout.offset) n += "_off" + std::to_string(c.layout.offset);
  if (c.temperature != 1.0f) n += "_T" + fmt_float_for_name(c.temperature);
  if (c.out_dtype != DType::f32) n += std::string("_out") + dtype_name(c.out_dtype);
  return n + "_" + impl_name(c.impl);
}

// register/smem cache the whole row on chip. Up to V = 4097 every algorithm must hold it; from
// 2^20 neither can (2^20 fp16 values are 2 MB; an SM has 228 KB); in between each one either
// computes the right answer or refuses with softk::Error naming itself and V.
enum class Capacity { must_fit, may_refuse, must_refuse };
Capacity capacity_rule(SoftmaxImpl impl, int64_t V) {
  if (impl != SoftmaxImpl::register_resident && impl != SoftmaxImpl::shared_memory) return Capacity::must_fit;
  if (V <= 4097) return Capacity::must_fit;
  if (V >= (int64_t{1} << 20)) return Capacity::must_refuse;
  return Capacity::may_refuse;
}

struct Prepared {
  HostLogits host;
  DeviceLogits dev;
  SoftmaxOracle oracle;
};

std::string input_key(const SoftmaxCase& c) {
  return std::string(dtype_name(c.dtype)) + "/" + std::to_string(c.V) + "/" + std::to_string(c.rows) + "/" +
         dist_name(c.dist) + "/" + std::to_string(c.layout.row_stride) + "/" + std::to_string(c.layout.offset) + "/" +
         std::to_string(c.temperature);
}

LastCase<Prepared>& cache() {
  static LastCase<Prepared> c;
  return c;
}

Prepared& prepare(const SoftmaxCase& c, cudaStream_t stream) {
  return cache().get(input_key(c), [&] {
    Prepared p;
    DistParams params;
    params.count = 3;  // few_unmasked: three finite logits per row
    const auto [batch, steps] = split_rows(c.rows);
    p.host = make_logits(c.dtype, batch, steps, c.V, c.dist, params, c.layout, 2024);
    p.dev = to_device(p.host, stream);
    p.oracle = oracle_softmax(p.host, c.temperature);
    return p;
  });
}

// Frees the cached device input at the end of the run, while the CUDA runtime is still up
// (a static destructor would run after it is torn down).
struct ReleaseCaches : ::testing::Environment {
  void TearDown() override {
    cache().clear();
  }
};
[[maybe_unused]] ::testing::Environment* const release_caches = ::testing::AddGlobalTestEnvironment(new ReleaseCaches);

class SoftmaxVsOracle : public GpuTestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxVsOracle, Matches) {
  const SoftmaxCase& c = GetParam();
  Prepared& p = prepare(c, stream());
  SoftmaxCall call;
  call.impl = c.impl;
  call.temperature = c.temperature;
  call.out_dtype = c.out_dtype;
  call.with_status = c.with_status;
  const SoftmaxRun run = run_softmax(p.dev.view, call, stream());
  const Capacity cap = capacity_rule(c.impl, c.V);

  if (run.refused) {
    ASSERT_NE(cap, Capacity::must_fit) << impl_name(c.impl) << " refused V=" << c.V << ": " << run.error;
    EXPECT_TRUE(names_softmax_algorithm(run.error, c.impl)) << "refusal must name the algorithm: " << run.error;
    EXPECT_TRUE(contains_token(run.error, std::to_string(c.V))) << "refusal must name V: " << run.error;
    EXPECT_TRUE(run.untouched_after_refusal) << "a refused call wrote to its output";
    return;
  }
  ASSERT_NE(cap, Capacity::must_refuse) << "forced " << impl_name(c.impl) << " accepted V=" << c.V
                                        << ", beyond any on-chip capacity";
  EXPECT_EQ(run.guard_violation, "");
  const Tolerance tol = prob_tolerance(c.out_dtype);
  EXPECT_TRUE(all_close(run.probs, p.oracle.probs, c.rows, c.V, tol, "softmax vs CPU oracle"));
  EXPECT_TRUE(rows_sum_to_one(run.probs, c.rows, c.V, p.oracle.status, tol, "row sums"));
  if (c.with_status) {
    EXPECT_TRUE(all_equal(run.status, p.oracle.status, c.rows, 1, "row_status"));
  }
}

// ---------------------------------------------------------------------------------------------
// The case lists. The implementation varies fastest so consecutive tests share one prepared input.

std::vector<SoftmaxCase> finish(std::vector<SoftmaxCase> cases, bool show_dist) {
  for (auto& c : cases) c.name = case_name(c, show_dist);
  return cases;
}

std::vector<SoftmaxCase> shape_cases() {
  std::vector<SoftmaxCase> out;
  const int64_t vocabs[] = {1, 2, 7, 31, 32, 33, 1000, 4097, 32000, 50257, 128256, 151936, 256000, int64_t{1} << 20, kHugeV};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t V : vocabs)
      for (int64_t rows : {1, 3, 64, 257}) {
        if (V == kHugeV && rows > 1) continue;                 // 2^24+3: one row is the point
        if (rows * V * 4 > kMaxInputBytes) continue;
        for (SoftmaxImpl impl : kAllSoftmaxImpls) {
          SoftmaxCase c;
          c.impl = impl;
          c.dtype = dt;
          c.V = V;
          c.rows = rows;
          c.with_status = rows != 3;  // rows == 3 exercises the null row_status path
          out.push_back(c);
        }
      }
  return finish(out, false);
}

std::vector<SoftmaxCase> input_cases() {
  std::vector<SoftmaxCase> out;
  const Dist dists[] = {Dist::normal,   Dist::heavy_tailed, Dist::llm_like,    Dist::ascending,    Dist::descending,
                        Dist::constant, Dist::spikes,       Dist::pm_inf,      Dist::nan_row,      Dist::masked_rows,
                        Dist::few_unmasked};
  struct Shape { int64_t V, rows; };
  const Shape shapes[] = {{7, 7}, {33, 7}, {4097, 7}, {50257, 5}, {151936, 3}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Dist d : dists)
      for (const Shape& s : shapes)
        for (SoftmaxImpl impl : kAllSoftmaxImpls) {
          SoftmaxCase c;
          c.impl = impl;
          c.dtype = dt;
          c.V = s.V;
          c.rows = s.rows;
          c.dist = d;
          out.push_back(c);
        }
  return finish(out, true);
}

std::vector<SoftmaxCase> layout_cases() {
  std::vector<SoftmaxCase> out;
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    // An offset of 3 (f32) or 7 (f16/bf16) elements leaves the base as far from 16-byte
    // alignment as it gets; stride V + 1 gives every row a different alignment.
    const int64_t far = dt == DType::f32 ? 3 : 7;
    for (int64_t V : {1, 7, 33, 4097, 50257, 151936})
      for (Layout layout : {Layout{V + 1, 0}, Layout{(V + 63) / 64 * 64 + 64, 0}, Layout{0, 1}, Layout{V + 5, far}})
        for (SoftmaxImpl impl : kAllSoftmaxImpls) {
          SoftmaxCase c;
          c.impl = impl;
          c.dtype = dt;
          c.V = V;
          c.rows = 5;
          c.dist = Dist::spikes;  // spikes at the head and the tail: a mishandled edge moves most of the mass
          c.layout = layout;
          out.push_back(c);
        }
  }
  return finish(out, true);
}

std::vector<SoftmaxCase> out_dtype_cases() {
  std::vector<SoftmaxCase> out;
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t V : {7, 4097, 32000, 151936})
      for (float T : {1.0f, 0.6f})
        for (SoftmaxImpl impl : kAllSoftmaxImpls) {
          if (impl == SoftmaxImpl::reference) continue;  // the reference writes fp32 only
          SoftmaxCase c;
          c.impl = impl;
          c.dtype = dt;
          c.out_dtype = dt;
          c.V = V;
          c.rows = 3;
          c.dist = Dist::llm_like;
          c.temperature = T;
          out.push_back(c);
        }
  return finish(out, true);
}

std::vector<SoftmaxCase> temperature_cases() {
  std::vector<SoftmaxCase> out;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t V : {1000, 128256})
      for (float T : {0.25f, 0.7f, 1.9f, 30.0f})
        for (SoftmaxImpl impl : kAllSoftmaxImpls) {
          SoftmaxCase c;
          c.impl = impl;
          c.dtype = dt;
          c.V = V;
          c.rows = 3;
          c.dist = Dist::heavy_tailed;
          c.temperature = T;
          out.push_back(c);
        }
  return finish(out, true);
}

// A small selection for compute-sanitizer (scripts/gpu-check runs '*Sanitize*' under memcheck
// and racecheck): every implementation and dtype on misaligned, strided inputs with masked and
// NaN rows, plus one row long enough that split-k really splits it into chunks.
std::vector<SoftmaxCase> sanitize_cases() {
  std::vector<SoftmaxCase> out;
  struct Small { int64_t V, rows; Dist dist; Layout layout; };
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Small& s : {Small{33, 5, Dist::masked_rows, {34, 1}}, Small{4097, 3, Dist::nan_row, {0, 1}}})
      for (SoftmaxImpl impl : kAllSoftmaxImpls) {
        SoftmaxCase c;
        c.impl = impl;
        c.dtype = dt;
        c.V = s.V;
        c.rows = s.rows;
        c.dist = s.dist;
        c.layout = s.layout;
        out.push_back(c);
      }
  for (SoftmaxImpl impl : {SoftmaxImpl::automatic, SoftmaxImpl::two_pass, SoftmaxImpl::split_k}) {
    SoftmaxCase c;
    c.impl = impl;
    c.V = (int64_t{1} << 17) + 5;
    c.rows = 1;
    c.dist = Dist::spikes;
    c.layout = {0, 1};
    out.push_back(c);
  }
  return finish(out, true);
}

std::string param_name(const ::testing::TestParamInfo<SoftmaxCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxVsOracle, ::testing::ValuesIn(shape_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Inputs, SoftmaxVsOracle, ::testing::ValuesIn(input_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Layouts, SoftmaxVsOracle, ::testing::ValuesIn(layout_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(OutDtype, SoftmaxVsOracle, ::testing::ValuesIn(out_dtype_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Temperature, SoftmaxVsOracle, ::testing::ValuesIn(temperature_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Sanitize, SoftmaxVsOracle, ::testing::ValuesIn(sanitize_cases()), param_name);

// ---------------------------------------------------------------------------------------------
// Extreme finite logits: +-FLT_MAX (and +-65504 in f16). x - m overflows to -inf in fp32, which
// is fine (exp -> 0); scaling x by log2(e)/T *before* subtracting the max overflows to inf and
// gives inf - inf = NaN. Finite input must give a finite, exact answer.

class SoftmaxExtremeFinite : public GpuTestWithParam<std::tuple<SoftmaxImpl, DType, float>> {};

TEST_P(SoftmaxExtremeFinite, Matches) {
  const auto [impl, dt, T] = GetParam();
  const float big = dt == DType::f32 ? FLT_MAX : dt == DType::f16 ? 65504.0f : 3.3895313892515355e38f;
  const HostLogits h = make_logits_with(dt, 4, 1, 4097, [&](int64_t r, float* x) {
    Rng rng(7, r);
    for (int64_t v = 0; v < 4097; ++v) x[v] = static_cast<float>(rng.normal());
    // row 0: two maxima at +big, one -big; row 1: max +big, rest normal; row 2: -big everywhere
    // but one normal value; row 3: max 0 with -big entries (underflow only).
    if (r == 0) { x[5] = big; x[4096] = big; x[100] = -big; }
    if (r == 1) x[2048] = big;
    if (r == 2) { for (int64_t v = 0; v < 4097; ++v) x[v] = -big; x[17] = 1.0f; }
    if (r == 3) { for (int64_t v = 0; v < 4097; v += 3) x[v] = -big; x[0] = 0.0f; }
  });
  const DeviceLogits d = to_device(h, stream());
  const SoftmaxOracle o = oracle_softmax(h, T);
  SoftmaxCall call;
  call.impl = impl;
  call.temperature = T;
  const SoftmaxRun run = run_softmax(d.view, call, stream());
  ASSERT_FALSE(run.refused) << run.error;
  EXPECT_TRUE(all_close(run.probs, o.probs, 4, 4097, prob_tolerance(DType::f32), "extreme finite logits"));
  EXPECT_TRUE(all_equal(run.status, o.status, 4, 1, "row_status"));
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxExtremeFinite,
                         ::testing::Combine(::testing::ValuesIn(kAllSoftmaxImpls),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(1.0f, 0.5f)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_" +
                                  dtype_name(std::get<1>(tpi.param)) + "_T" +
                                  fmt_float_for_name(std::get<2>(tpi.param));
                         });

// ---------------------------------------------------------------------------------------------
// Exact capacity edges of the resident algorithms: at its advertised capacity an algorithm must
// compute the right answer; one past it must refuse. (Reads the capacity from the kernels'
// launch header, src/kernels/softmax_launch.hpp.) auto must be right on both sides.

class SoftmaxCapacityEdge : public GpuTestWithParam<std::tuple<SoftmaxImpl, DType>> {};

TEST_P(SoftmaxCapacityEdge, AtCapacityRightAndOnePastRefused) {
  const auto [impl, dt] = GetParam();
  const int64_t capacity = impl == SoftmaxImpl::register_resident
                               ? softk::kernels::register_capacity(dt)
                               : softk::kernels::shared_memory_capacity(dt, softk::current_device_info());
  ASSERT_GT(capacity, 4097) << "capacity below the V every algorithm must hold";
  for (int64_t V : {capacity, capacity + 1}) {
    SCOPED_TRACE("V = " + std::to_string(V) + " (capacity " + std::to_string(capacity) + ")");
    const HostLogits h = make_logits(dt, 2, 1, V, Dist::spikes);
    const DeviceLogits d = to_device(h, stream());
    const SoftmaxOracle o = oracle_softmax(h, 1.0f);
    for (SoftmaxImpl which : {impl, SoftmaxImpl::automatic}) {
      SoftmaxCall call;
      call.impl = which;
      const SoftmaxRun run = run_softmax(d.view, call, stream());
      if (which == impl && V > capacity) {
        ASSERT_TRUE(run.refused) << impl_name(impl) << " accepted V one past its capacity";
        EXPECT_TRUE(names_softmax_algorithm(run.error, impl)) << run.error;
        EXPECT_TRUE(contains_token(run.error, std::to_string(V))) << run.error;
        EXPECT_TRUE(run.untouched_after_refusal);
        continue;
      }
      ASSERT_FALSE(run.refused) << impl_name(which) << ": " << run.error;
      EXPECT_TRUE(all_close(run.probs, o.probs, 2, V, prob_tolerance(DType::f32), impl_name(which)));
      EXPECT_EQ(run.guard_violation, "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxCapacityEdge,
                         ::testing::Combine(::testing::Values(SoftmaxImpl::register_resident, SoftmaxImpl::shared_memory),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_" + dtype_name(std::get<1>(tpi.param));
                         });

// ---------------------------------------------------------------------------------------------
// The op against the CUB reference directly (both are GPU fp32: the bound is the sum of their
// two distances to the exact value).

class SoftmaxVsReference : public GpuTestWithParam<std::tuple<SoftmaxImpl, DType, int64_t>> {};

TEST_P(SoftmaxVsReference, Agree) {
  const auto [impl, dt, V] = GetParam();
  const HostLogits h = make_logits(dt, 3, 1, V, Dist::llm_like, {}, {}, 31);
  const DeviceLogits d = to_device(h, stream());
  SoftmaxCall ref_call;
  ref_call.impl = SoftmaxImpl::reference;
  const SoftmaxRun ref = run_softmax(d.view, ref_call, stream());
  ASSERT_FALSE(ref.refused) << ref.error;
  SoftmaxCall call;
  call.impl = impl;
  const SoftmaxRun run = run_softmax(d.view, call, stream());
  if (run.refused) {
    ASSERT_NE(capacity_rule(impl, V), Capacity::must_fit) << run.error;
    return;
  }
  const Tolerance one = prob_tolerance(DType::f32);
  EXPECT_TRUE(all_close(run.probs, ref.probs, 3, V, {2 * one.abs, 2 * one.rel}, "op vs reference"));
  EXPECT_TRUE(all_equal(run.status, ref.status, 3, 1, "row_status op vs reference"));
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxVsReference,
                         ::testing::Combine(::testing::Values(SoftmaxImpl::automatic, SoftmaxImpl::register_resident,
                                                              SoftmaxImpl::shared_memory, SoftmaxImpl::two_pass,
                                                              SoftmaxImpl::split_k),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(int64_t{4097}, int64_t{151936})),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_" +
                                  dtype_name(std::get<1>(tpi.param)) + "_V" + std::to_string(std::get<2>(tpi.param));
                         });

}  // namespace
