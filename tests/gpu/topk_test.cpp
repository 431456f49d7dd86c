// softk::topk on the GPU, every algorithm (fused, radix_select, split_k, auto) and the CUB reference,
// against the CPU oracle (softk::cpu::topk). The contract is a total order (logit descending,
// then index ascending; -inf never selected), so indices must match the oracle EXACTLY;
// probabilities within the fp32 tolerance of tests/common/compare.hpp. Every answer is also
// checked without the oracle (tests/common/oracle.hpp: order, ties, uniqueness, completeness).
//   Shapes/    V x rows x K, DESIGN.md's matrix (fp32, LLM-like logits)
//   Dtypes/    f16 and bf16 inputs (quantisation makes ties common)
//   Inputs/    every distribution, incl. constant, adversarial stride, +-inf, NaN, masked,
//              fewer unmasked tokens than K, signed zeros; strided/misaligned layouts,
//              log-probs and temperature on a few shapes
//   WarpRow/   the edges of the warp-per-row kernel (rows of at most 32 KB, K <= 64)
//   SortedRow/ the whole-row sort (V <= 1024, K > 64) and its edge
//   Sanitize/  a small cross-section for compute-sanitizer (scripts/gpu-check: '*Sanitize*')
// plus the six exactness-guard tests (TopkAllWinnersInOneThreadStride, TopkAllEqualRows,
// TopkTiedBin, TopkSlottedSeeds, TopkSpanRows, TopkVectorMaxima),
// properties against the GPU softmax (gather), log-probs, temperature, workspace checks.
// The case description, the input/oracle caches and check_case() live in common/topk_check.hpp;
// split-k's own matrix (V up to 2^26, rows {1, 2, 3, 7}) is topk_split_k_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"
#include "common/runners.hpp"
#include "common/topk_check.hpp"
#include "softk/topk.hpp"

namespace {

using namespace softk_test;
using softk::DType;

constexpr int64_t kHugeV = (int64_t{1} << 24) + 3;

class TopkVsOracle : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkVsOracle, Matches) { check_case(GetParam(), stream()); }

// ---------------------------------------------------------------------------------------------
// Case lists (implementation innermost, K next: consecutive cases share input and oracle).

std::vector<int32_t> ks_for(int64_t V, int64_t rows) {
  std::vector<int32_t> ks;
  for (int32_t k : {1, 2, 16, 50, 256, 1024, 4096})
    if (k < V) ks.push_back(k);
  // K = V sorts whole rows: kept where the output stays small (rows x V <= 2^24).
  if (rows * V <= (int64_t{1} << 24) || rows == 1) ks.push_back(static_cast<int32_t>(V));
  return ks;
}

std::vector<TopkCase> shape_cases() {
  std::vector<TopkCase> out;
  const int64_t vocabs[] = {1, 2, 7, 31, 32, 33, 1000, 4097, 32000, 50257, 128256, 151936, 256000, int64_t{1} << 20, kHugeV};
  for (int64_t V : vocabs)
    for (int64_t rows : {1, 3, 64, 257}) {
      if (V == kHugeV && rows > 1) continue;
      if (rows * V * 4 > kMaxInputBytes) continue;
      for (int32_t k : ks_for(V, rows)) {
        if (V == kHugeV && k == V) continue;  // a 16M-element full sort adds time, not coverage
        for (TopkImpl impl : kAllTopkImpls) {
          TopkCase c = topk_case(impl, DType::f32, V, rows, k, Dist::llm_like);
          out.push_back(c);
        }
      }
    }
  return finish(out, false);
}

std::vector<TopkCase> dtype_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t V : {33, 4097, 50257, 151936, 1 << 20})
      for (int64_t rows : {3, 64}) {
        if (V == (1 << 20) && rows > 3) continue;
        for (int32_t k : {1, 50, 1024, 4096}) {
          if (k > V) continue;
          for (TopkImpl impl : kAllTopkImpls) {
            TopkCase c = topk_case(impl, dt, V, rows, k, Dist::normal);
            out.push_back(c);
          }
        }
      }
  return finish(out, false);
}

std::vector<TopkCase> input_cases() {
  std::vector<TopkCase> out;
  struct Shape { int64_t V, rows; int32_t k; };
  // K = 1024 at V = 50257 and 151936: the fused core's fp32 vector and key lists (forced fused
  // sizes its list for a full wave of rows: with_fused_core_shape). K = 1: the one-read argmax
  // of a block (forced fused) and of a cluster (auto at 151936).
  const Shape shapes[] = {{33, 7, 16},      {4097, 5, 50},      {50257, 3, 256}, {50257, 3, 1024},
                          {151936, 4, 1024}, {32000, 3, 4096}, {4097, 5, 1},    {151936, 4, 1}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Dist d : kAllDists)
      for (const Shape& s : shapes)
        for (TopkImpl impl : kAllTopkImpls) {
          TopkCase c = topk_case(impl, dt, s.V, s.rows, s.k, d);
          // few_unmasked: fewer unmasked tokens than K, so the tail slots must be -1 / 0.
          c.params.count = d == Dist::few_unmasked ? std::max(1, s.k / 2) : s.k;
          c.params.stride = 256;
          out.push_back(c);
        }
  // Row stride > V with garbage padding and a misaligned base, and log-probs, on a few shapes.
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& s : {Shape{33, 5, 16}, Shape{4097, 5, 50}, Shape{151936, 3, 1024}, Shape{32000, 3, 4096},
                           Shape{4097, 5, 1}})
      for (Layout layout : {Layout{s.V + 1, 0}, Layout{s.V + 5, dt == DType::f32 ? 3 : 7}})
        for (bool log_probs : {false, true})
          for (TopkImpl impl : kAllTopkImpls) {
            TopkCase c = topk_case(impl, dt, s.V, s.rows, s.k, Dist::spikes);
            c.layout = layout;
            c.log_probs = log_probs;
            out.push_back(c);
          }
  // Temperature on the probabilities (never on the ranking).
  for (float T : {0.3f, 2.5f})
    for (TopkImpl impl : kAllTopkImpls) {
      TopkCase c = topk_case(impl, DType::f32, 128256, 5, 256, Dist::heavy_tailed);
      c.temperature = T;
      out.push_back(c);
    }
  return finish(out, true);
}

// The warp-per-row kernel (topk_warp_row.cu: rows of at most 32 KB, K <= 64) at its edges, through
// forced `fused` (`automatic` runs these 13 rows a block each, one wave of blocks, except 16-bit
// rows of 4096 at K = 1, whose 8 KB take the warp: dispatch.cpp), so the same inputs check both
// kernels:
// V = 32 KB of tokens (8192 fp32, 16384 16-bit), its limit, beside one token more (a block per
// row), and 4096 (its limit by tokens before);
// K = 64, its sort's width, beside 65 (a block per row);
// 13 rows, so the last block's warps partly exit at once; constant rows (ties down to the index
// bytes, of which a row of at most 16384 tokens sets only the low two), ascending rows (the
// winners in the last lanes' vectors), all winners in one lane's stride, a NaN row among finite
// ones in a block, masked rows and fewer unmasked tokens than K; bf16 and f16 ties.
std::vector<TopkCase> warp_row_cases() {
  std::vector<TopkCase> out;
  const Dist dists[] = {Dist::llm_like, Dist::constant,    Dist::ascending,  Dist::adversarial_stride,
                        Dist::nan_row,  Dist::masked_rows, Dist::few_unmasked};
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const int64_t limit = 32 * 1024 / (dt == DType::f32 ? 4 : 2);
    for (int64_t V : {int64_t{4096}, limit, limit + 1})
      for (Dist d : dists)
        for (int32_t k : {1, 64, 65})
          for (TopkImpl impl : {TopkImpl::fused, TopkImpl::automatic}) {
            TopkCase c = topk_case(impl, dt, V, 13, k, d);
            c.params.count = d == Dist::few_unmasked ? std::max(1, k / 2) : k;
            c.params.stride = 32 * 8;  // one lane's stride, for a row of 16-byte bf16 vectors
            out.push_back(c);
          }
  }
  // The candidate list's edges and the exact path's index bytes (K > 1: K = 1 keeps no list). A
  // constant row lists every token: 32 is the longest row listed whole and 33 the shortest that
  // seeds, 64 and 65 fill one and both halves of the final sort, 128 its whole room, 129
  // overflows it, and 300, 1000 and 2048 tokens send the exact select on into 9, 10 and 11 index
  // bits. K = 8 is the last K whose tau comes from rounds over tied seeds, 9 the first sorted.
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {32, 33, 64, 65, 128, 129, 300, 1000, 2048})
      for (int32_t k : {2, 8, 9, 50, 64}) {
        if (k > V) continue;
        TopkCase c = topk_case(TopkImpl::fused, dt, V, 13, k, Dist::constant);
        c.params.count = k;
        out.push_back(c);
      }
  // K = 1 keeps a lane's largest logit and its index; a lane visits its tail elements before its
  // body, so on a tied row whose base is aligned (row 0 of a dense batch) and whose length is not
  // a whole number of vectors, lane 0 meets the tail's ties before token 0, and they must lose.
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {33, 1001, 4095}) out.push_back(topk_case(TopkImpl::fused, dt, V, 13, 1, Dist::constant));
  // Masked, NaN and +-inf rows and fewer unmasked tokens than K where tau comes from rounds (33
  // and 300 tokens: tau goes down to -inf, and the list overflows into the exact select) or the
  // row is listed whole (20 tokens), in every dtype.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t V : {20, 33, 300})
      for (Dist d : {Dist::few_unmasked, Dist::masked_rows, Dist::nan_row, Dist::pm_inf})
        for (int32_t k : {2, 8}) {
          TopkCase c = topk_case(TopkImpl::fused, dt, V, 13, k, d);
          c.params.count = d == Dist::few_unmasked ? k / 2 : k;
          out.push_back(c);
        }
  // Mixture-of-experts routing: rows of 8-32 experts list every token in pass 1; 33 to 256 take
  // the seeds.
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {8, 32, 33, 64, 128, 256})
      for (int32_t k : {2, 8}) out.push_back(topk_case(TopkImpl::fused, dt, V, 257, k, Dist::llm_like));
  // Non-constant rows on a misaligned strided layout (head and tail elements seed, and tau is
  // finite), with +-inf, signed zeros, log-probabilities and a temperature, at K = 1 (one read),
  // K = 8 (tau by rounds) and K = 16 / 64 (the list); 300 tokens seed every element, 20 are
  // listed whole.
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {20, 300, 1000})
      for (Dist d : {Dist::llm_like, Dist::pm_inf, Dist::signed_zeros})
        for (int32_t k : {1, 8, 16, 64}) {
          if (k > V) continue;
          TopkCase c = topk_case(TopkImpl::fused, dt, V, 13, k, d);
          c.layout = Layout{V + 5, dt == DType::f32 ? 3 : 7};
          c.log_probs = k != 16;
          c.temperature = k == 16 ? 0.7f : 1.0f;
          out.push_back(c);
        }
  return finish(out, true);
}

// The whole-row sort (V <= 1024, K > 64): every distribution at the network's edges (65 keys pad
// to 128, 1000 to 1024, 1024 fills the largest) and past them (1025, 4096 and 4097 take the block
// core), K from 65 to V (or the fused path's 1024), dense and on a misaligned strided layout with
// log-probabilities and a temperature; fp16 through auto.
std::vector<TopkCase> sorted_row_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t V : {65, 1000, 1024, 1025, 4096, 4097})
      for (Dist d : kAllDists)
        for (int32_t k : {65, 256, 1024}) {
          if (k > V) continue;
          TopkCase c = topk_case(dt == DType::f16 ? TopkImpl::automatic : TopkImpl::fused, dt, V, 7, k, d);
          c.params.count = d == Dist::few_unmasked ? k / 2 : k;
          c.params.stride = 64;
          out.push_back(c);
        }
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {65, 777, 4096})
      for (Dist d : {Dist::llm_like, Dist::pm_inf, Dist::signed_zeros}) {
        TopkCase c = topk_case(TopkImpl::fused, dt, V, 9, static_cast<int32_t>(std::min<int64_t>(V, 1024)), d);
        c.layout = Layout{V + 5, dt == DType::f32 ? 3 : 7};
        c.log_probs = d != Dist::pm_inf;
        c.temperature = d == Dist::pm_inf ? 0.7f : 1.0f;
        out.push_back(c);
      }
  return finish(out, true);
}

// A small selection for compute-sanitizer ('*Sanitize*' in scripts/gpu-check): every
// implementation on ties (V = 20000: the fused core's overflowing lists), adversarial buffers
// (the exact fallback), NaN rows, fewer unmasked tokens than K on a misaligned strided layout,
// K beyond the fused and split-k paths, and the warp-per-row kernel's ways to its winners: tied
// rows of 4096 at K = 64 (the list overflows; the select goes down to the index bytes), rows of
// 1000 LLM-like logits (a short list; at K = 8 tau comes from rounds), rows of 200 (every
// element a seed), tied rows of 128 (a full list), rows of 32 (listed whole in one read) and
// tied rows of 1001 at K = 1 (one read, ties across the tail); and tied, misaligned rows of 1000
// at K = 256 (the whole-row sort); and K = 1024 on tied rows of 50257 and on rows of 131077, which
// the forced fused core lists as fp32 vectors (overflowing) and keys; and misaligned rows of
// 128256 at K = 50, whose long prefix leaves each thread's last vectors to the paired loads; and
// misaligned rows of 4095 at K = 1024 with 32 winners side by side (slotted seeds: threads whose
// four seeds all pass re-read their stride), and at K = 64 with 64 (spans of short rows under
// auto: the floor from the thread maxima names many threads); and rows of 8192 at K = 50, which
// forced fused gives a warp each (32 KB of fp32) and auto a block each (spans); and misaligned
// rows of 8191 at K = 256 with 64 winners side by side (fp32: slotted seeds at four vectors a
// thread); and K = 1024 on misaligned rows of 32000 (vector maxima: fp32 rows of 128 KB) and of
// 16385 with 1024 winners side by side (the K-th largest vector maximum in the background).
std::vector<TopkCase> sanitize_cases() {
  std::vector<TopkCase> out;
  struct Small { int64_t V, rows; int32_t k; Dist dist; int64_t stride, count; Layout layout; };
  for (DType dt : {DType::f32, DType::bf16})
    for (const Small& s : {Small{4097, 3, 50, Dist::constant, 256, 50, {}},
                           Small{20000, 2, 50, Dist::constant, 256, 50, {}},
                           Small{4097, 3, 1024, Dist::adversarial_stride, 4, 1024, {}},
                           Small{4097, 3, 4096, Dist::nan_row, 256, 16, {}},
                           Small{33, 5, 16, Dist::few_unmasked, 256, 8, {34, 1}},
                           Small{4096, 13, 64, Dist::constant, 256, 64, {}},
                           Small{1000, 13, 50, Dist::llm_like, 256, 50, {}},
                           Small{200, 13, 64, Dist::llm_like, 256, 64, {}},
                           Small{32, 13, 8, Dist::llm_like, 256, 8, {}},
                           Small{1000, 13, 8, Dist::llm_like, 256, 8, {}},
                           Small{1000, 5, 256, Dist::constant, 256, 256, {1003, 3}},
                           Small{1001, 13, 1, Dist::constant, 256, 1, {}},
                           Small{128, 13, 64, Dist::constant, 256, 64, {}},
                           Small{50257, 2, 1024, Dist::constant, 256, 1024, {}},
                           Small{131077, 2, 1024, Dist::llm_like, 256, 1024, {}},
                           Small{128256, 2, 50, Dist::llm_like, 256, 50, {128259, 1}},
                           Small{20000, 2, 1, Dist::llm_like, 256, 1, {20003, 1}},
                           Small{4095, 2, 1024, Dist::adversarial_stride, 1, 32, {4100, 3}},
                           Small{4095, 2, 64, Dist::adversarial_stride, 1, 64, {4100, 3}},
                           Small{8192, 3, 50, Dist::llm_like, 256, 50, {}},
                           Small{8191, 2, 256, Dist::adversarial_stride, 1, 64, {8196, 3}},
                           Small{32000, 2, 1024, Dist::llm_like, 256, 1024, {32003, 1}},
                           Small{16385, 2, 1024, Dist::adversarial_stride, 1, 1024, {16390, 3}}})
      for (TopkImpl impl : kAllTopkImpls) {
        TopkCase c = topk_case(impl, dt, s.V, s.rows, s.k, s.dist);
        c.params.stride = s.stride;
        c.params.count = s.count;
        c.layout = s.layout;
        out.push_back(c);
      }
  for (TopkImpl impl : kAllTopkImpls) {  // all winners in one thread's stride: S = 128, K = 16
    TopkCase c = topk_case(impl, DType::f32, 16 * 128 + 97, 4, 16, Dist::adversarial_stride);
    c.params.stride = 128;
    c.params.count = 16;
    out.push_back(c);
  }
  return finish(out, true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TopkVsOracle, ::testing::ValuesIn(shape_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Dtypes, TopkVsOracle, ::testing::ValuesIn(dtype_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Inputs, TopkVsOracle, ::testing::ValuesIn(input_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(WarpRow, TopkVsOracle, ::testing::ValuesIn(warp_row_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(SortedRow, TopkVsOracle, ::testing::ValuesIn(sorted_row_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Sanitize, TopkVsOracle, ::testing::ValuesIn(sanitize_cases()), param_name);

// ---------------------------------------------------------------------------------------------
// Exactness guard (1): all K winners sit in ONE thread's stride: indices i*S + c for i < K, with
// S the thread stride of a block-strided loop (blockDim x vector width: 128 .. 4096 here). A
// per-thread register buffer of L < K entries then holds only L of the K winners; the guard
// must notice the evictions and redo the row exactly. The four rows use lanes c = 0, S-1,
// S/2+1, 1; the "tied" variant makes all winners equal, so ties must also go to lower indices.

class TopkAllWinnersInOneThreadStride : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkAllWinnersInOneThreadStride, IsExact) { check_case(GetParam(), stream()); }

/// `count` winners (all equal where `tied`) at stride S over a background strictly below them,
/// in 4 rows at row-dependent lanes (inputs.hpp, adversarial_stride).
TopkCase stride_winners_case(TopkImpl impl, DType dt, int64_t V, int32_t k, int64_t S, int64_t count, bool tied) {
  TopkCase c = topk_case(impl, dt, V, 4, k, Dist::adversarial_stride);
  c.params.stride = S;
  c.params.count = count;
  c.params.channel = -1;
  c.params.tied_winners = tied;
  return c;
}

std::vector<TopkCase> one_stride_cases() {
  std::vector<TopkCase> out;
  for (int64_t S : {128, 256, 512, 1024, 2048, 4096})
    for (int32_t k : {16, 50, 256, 1024}) {
      if (S * k > (int64_t{1} << 21)) continue;  // V = K*S + 97 stays <= ~2M
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (bool tied : {false, true}) {
          if (tied && dt != DType::f32) continue;
          // an odd remainder: the winners' stride does not end the row
          for (TopkImpl impl : kAllTopkImpls) out.push_back(stride_winners_case(impl, dt, k * S + 97, k, S, k, tied));
        }
    }
  return finish(out, false);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkAllWinnersInOneThreadStride, ::testing::ValuesIn(one_stride_cases()), param_name);

// Exactness guard (2): all-equal rows. Every token ties, so the answer is indices 0..K-1 with
// probability 1/V each; a buffer that keeps "the first L it saw" per thread holds the wrong
// indices for every thread but the first.

class TopkAllEqualRows : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkAllEqualRows, IsExact) {
  const TopkCase& c = GetParam();
  check_case(c, stream());
  if (HasFatalFailure() || must_refuse(c.impl, c.k)) return;
  // The answer written out, independent of the oracle.
  const PreparedTopkInput& p = prepare_input(c, stream());
  TopkCall call;
  call.impl = c.impl;
  call.k = c.k;
  const TopkRun run = run_topk(p.dev.view, call, stream());
  ASSERT_FALSE(run.refused) << run.error;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int32_t j = 0; j < c.k; ++j) {
      ASSERT_EQ(run.indices[r * c.k + j], j) << "row " << r << " slot " << j;
      ASSERT_TRUE(within(run.probs[r * c.k + j], 1.0 / static_cast<double>(c.V), prob_tolerance(DType::f32)))
          << "row " << r << " slot " << j << ": " << run.probs[r * c.k + j];
    }
}

std::vector<TopkCase> all_equal_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f32, DType::bf16})
    // 20000: the fused core's vector list holds a bf16 row (2,500 vectors) but its keys (20,000)
    // overflow the rewrite, and an fp32 row (5,000 vectors) overflows the list itself: both
    // take the exact redo.
    for (int64_t V : {1000, 4097, 20000, 50257, 128256, 1 << 20})
      for (int32_t k : {1, 16, 50, 256, 1024}) {
        if (k > V) continue;
        for (TopkImpl impl : kAllTopkImpls) {
          TopkCase c = topk_case(impl, dt, V, 4, k, Dist::constant);
          out.push_back(c);
        }
      }
  return finish(out, false);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkAllEqualRows, ::testing::ValuesIn(all_equal_cases()), param_name);

// Exactness guard (3): a bin of ties at the edge of the fused kernel's counting sort
// (block_range_bin_sort.cuh), which ranks a key by comparing it with every key of its bin and
// hands a bin of more than 256 keys (kMaxRankedBinKeys) at or above the K-th key's to the radix
// select. `count` tied winners (one value, so one bin) over a background strictly below them:
// K inside the ties cuts their bin, K past them leaves it whole above the cut. 256 ties are
// ranked, 257 go to the select; both must be exact, ties to the lower index. (Which of the two
// ran is seen only in range_bin_sort_test.cu, which calls the sort directly.) Also: tied winners
// that crowd the spans of a block-per-row span kernel past what it ranks.

class TopkTiedBin : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkTiedBin, IsExact) { check_case(GetParam(), stream()); }

std::vector<TopkCase> tied_bin_cases() {
  std::vector<TopkCase> out;
  // stride 61: the ties spread over the row, not one thread's
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (int64_t ties : {256, 257})
      for (int32_t k : {1, 100, 255, 256, 257, 300, 1024})
        for (TopkImpl impl : kAllTopkImpls) out.push_back(stride_winners_case(impl, dt, 32000, k, 61, ties, true));
  // Rows of 2^20 tokens: split-k's chunks there are long enough for the fused core, which sorts
  // its candidates the same way (rows of 32000 take its short-chunk kernel); the first chunk
  // holds every tie.
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t ties : {256, 257})
      for (int32_t k : {100, 256, 257, 1024})
        for (TopkImpl impl : kAllTopkImpls) out.push_back(stride_winners_case(impl, dt, 1 << 20, k, 61, ties, true));
  // 1100 tied winners 256 tokens apart in rows of 2^19 fp32 tokens, which a block per row reads by
  // spans (block_span_topk.cuh: 16 turns a span there): they lie in ~72 spans of 8 threads, all
  // tied for the K-th largest span maximum, so the spans named hold more keys than the block ranks
  // (1024) and the row is selected whole instead.
  for (TopkImpl impl : kAllTopkImpls) out.push_back(stride_winners_case(impl, DType::f32, 1 << 19, 50, 256, 1100, true));
  return finish(out, false);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkTiedBin, ::testing::ValuesIn(tied_bin_cases()), param_name);

// Exactness guard (4): the slotted seeds of short rows at K > 64 (at most 32 KB: four vectors a
// thread; block_slotted_seeds.cuh). Each thread keeps its four largest elements keyed with where
// they lie, lists those that reach the threshold by that place, and re-reads its stride when
// all four do (at K = 1024 of 4096 tokens a quarter of the row wins, so ~10% of threads do).
// Every distribution at K = 65, 257 and 1024, fp32, bf16 and fp16, on dense rows of 16 and 32 KB
// and on a misaligned layout one token shorter, where the first threads visit an edge element
// before their vectors (16-bit rows of 32 KB: the 33rd slot); adversarial rows put 32 winners
// (tied or not) side by side, filling eight threads' first vectors (fp32: four seeds each, all
// passing), or one thread's stride apart.

class TopkSlottedSeeds : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkSlottedSeeds, IsExact) { check_case(GetParam(), stream()); }

/// A block-per-row guard's cases over every distribution, appended to `out`: 4 rows of V tokens
/// at each K, each of `impls` innermost (consecutive cases share input and oracle). Adversarial
/// rows put `winners` winners side by side or one block's thread stride apart (512 vectors),
/// tied or not; few_unmasked rows hold K / 2 finite logits. A misaligned layout (a row stride of
/// V + 5, the first row at element 3 or 7) moves the row's head off its 16-byte vectors.
void add_every_distribution(std::vector<TopkCase>& out, DType dt, int64_t V, std::initializer_list<int32_t> ks,
                            int64_t winners, std::initializer_list<TopkImpl> impls, bool misaligned) {
  const int64_t width = dt == DType::f32 ? 4 : 8;  // elements a vector
  for (Dist d : kAllDists)
    for (int32_t k : ks)
      for (int64_t S : {int64_t{1}, 512 * width})
        for (bool tied : {false, true}) {
          if (d != Dist::adversarial_stride && (S != 1 || tied)) continue;
          for (TopkImpl impl : impls) {
            TopkCase c = d == Dist::adversarial_stride ? stride_winners_case(impl, dt, V, k, S, winners, tied)
                                                       : topk_case(impl, dt, V, 4, k, d);
            if (d == Dist::few_unmasked) c.params.count = k / 2;
            if (misaligned) c.layout = Layout{V + 5, dt == DType::f32 ? 3 : 7};
            out.push_back(c);
          }
        }
}

std::vector<TopkCase> slotted_seed_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t bytes : {16 * 1024, 32 * 1024}) {
      const int64_t dense = bytes / (dt == DType::f32 ? 4 : 2);
      for (bool misaligned : {false, true})
        add_every_distribution(out, dt, misaligned ? dense - 1 : dense, {65, 257, 1024}, 32,
                               {TopkImpl::fused, TopkImpl::automatic}, misaligned);
    }
  return finish(out, true);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkSlottedSeeds, ::testing::ValuesIn(slotted_seed_cases()), param_name);

// Exactness guard (5): the spans of rows that take a block each at 1 < K <= 64 (past 1024 tokens
// and up to 4M: block_span_topk.cuh).
//  - Short rows: a thread holds at most four vectors, one span, so the floor comes from the thread
//    maxima and the spans named are threads. Every distribution at K = 2, 50 and 64, fp32, bf16
//    and fp16, on rows of 1025 tokens (half the threads or more hold no vector, one an edge
//    element), 2000, a misaligned 4095 (edge elements in span 0) and 8192; and 64 winners side by
//    side (the K-th largest thread maximum then lies in the background, so the floor names many
//    threads), or one thread's stride apart, tied or not. Four rows: `automatic` gives them a
//    block each (dispatch.cpp), where forced fused takes the warp per row up to 32 KB.
//  - Many spans a thread: every distribution on misaligned rows of 131077 tokens (16 spans of 4
//    turns in fp32, 8 in 16-bit), forced fused; a thread's stride apart, 64 winners fill 16 of one
//    thread's spans.
//  - The second floor, from the span maxima: 64 winners one a span in the 16 spans of four
//    neighbouring threads (rows of 2^20 tokens: a span is 65536 tokens, one vector in 512 of them
//    a thread's), over a background whose maximum, 3.0, most threads hold. The first floor, the
//    K-th largest thread maximum, is then 3.0 and names ~1,300 spans; the K-th largest span
//    maximum is a winner's, and names only the winners' spans.
//  - The longest runs: rows of 2^22 tokens (16 spans of 128 turns in fp32), LLM-like, and 64
//    winners 2048 tokens apart, tied or not; 2^22 - 3 misaligned; 2^22 + 1, past the spans' reach
//    (the fused core).

class TopkSpanRows : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkSpanRows, IsExact) { check_case(GetParam(), stream()); }

std::vector<TopkCase> span_row_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t V : {1025, 2000, 4095, 8192})
      add_every_distribution(out, dt, V, {2, 50, 64}, 64, {TopkImpl::automatic}, V == 4095);
    add_every_distribution(out, dt, 131077, {2, 50, 64}, 64, {TopkImpl::fused}, true);
    const int64_t width = dt == DType::f32 ? 4 : 8;
    for (int32_t k : {50, 64})
      for (bool tied : {false, true}) {
        TopkCase c = stride_winners_case(TopkImpl::fused, dt, int64_t{1} << 20, k, 65536, 64, tied);
        c.params.channel = 0;
        c.params.lanes = 4;
        c.params.lane_gap = width;
        out.push_back(c);
      }
  }
  constexpr int64_t kLongest = int64_t{1} << 22;
  for (DType dt : {DType::f32, DType::bf16}) {
    out.push_back(topk_case(TopkImpl::fused, dt, kLongest, 2, 50, Dist::llm_like));
    for (bool tied : {false, true}) out.push_back(stride_winners_case(TopkImpl::fused, dt, kLongest, 64, 2048, 64, tied));
    TopkCase misaligned = topk_case(TopkImpl::fused, dt, kLongest - 3, 2, 50, Dist::llm_like);
    misaligned.layout = Layout{kLongest + 2, dt == DType::f32 ? 3 : 7};
    out.push_back(misaligned);
    out.push_back(topk_case(TopkImpl::fused, dt, kLongest + 1, 2, 50, Dist::llm_like));
  }
  return finish(out, true);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkSpanRows, ::testing::ValuesIn(span_row_cases()), param_name);

// Exactness guard (6): the vector maxima of rows of 32-128 KB at K > 64 (block_vector_maxima.cuh).
// The cut is the bin of the K-th largest maximum of the rows' 16-byte vectors, and only the
// vectors reaching it are read again. Every distribution at K = 65, 257 and 1024, fp32, bf16 and
// fp16, on misaligned rows one token past 32 KB (the first that take them: edge elements outside
// the vectors) and on rows of 8192 vectors (the most), dense and misaligned; adversarial rows put
// 1024 winners side by side, four or eight a vector, so that the K-th largest vector maximum lies
// among them or, at K = 1024, in the background, whose vectors are then read again too; or one
// thread's stride apart, a vector each; tied or not. Constant rows put every vector in the cut's
// bin: too many to read again (8192 vectors) or to list (2048), and the row is selected whole.
// 5000 winners a vector each, tied, put 5000 vectors in the cut's bin: read again in three rounds
// of the block's loads (2048 vectors a round), and listed (untied, ~1,250 vectors: one round).

class TopkVectorMaxima : public GpuTestWithParam<TopkCase> {};

constexpr int64_t kManyReread = 5000;

TEST_P(TopkVectorMaxima, IsExact) { check_case(GetParam(), stream()); }

std::vector<TopkCase> vector_maxima_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    const int64_t width = dt == DType::f32 ? 4 : 8;
    const int64_t past_32k = 32 * 1024 / (16 / width) + 1;
    const int64_t most = 8192 * width;
    add_every_distribution(out, dt, past_32k, {65, 257, 1024}, 1024, {TopkImpl::fused, TopkImpl::automatic}, true);
    for (bool misaligned : {false, true})
      add_every_distribution(out, dt, most, {65, 257, 1024}, 1024, {TopkImpl::fused, TopkImpl::automatic},
                             misaligned);
    for (int32_t k : {65, 1024})
      for (bool tied : {false, true})
        for (TopkImpl impl : {TopkImpl::fused, TopkImpl::automatic})
          out.push_back(stride_winners_case(impl, dt, most, k, width, kManyReread, tied));
  }
  return finish(out, true);
}

INSTANTIATE_TEST_SUITE_P(Guard, TopkVectorMaxima, ::testing::ValuesIn(vector_maxima_cases()), param_name);

// ---------------------------------------------------------------------------------------------
// Properties against the GPU softmax and between options, independent of the CPU oracle:
//  - gather(softk::softmax(x), idx) == probs (two GPU fp32 results: twice the fp32 bound);
//  - log_probs gives the same indices and exp(log p) == p;
//  - temperature never changes the indices (ranking is by raw logits).

class TopkProperties : public GpuTestWithParam<std::tuple<TopkImpl, DType, Dist, int64_t, int32_t>> {};

TEST_P(TopkProperties, GatherLogProbsTemperature) {
  const auto [impl, dt, dist, V, k] = GetParam();
  const int64_t rows = 3;
  const HostLogits h = make_logits(dt, rows, 1, V, dist, {}, {}, 555);
  const DeviceLogits d = to_device(h, stream());

  TopkCall call;
  call.impl = impl;
  call.k = k;
  const TopkRun base = run_topk(d.view, call, stream());
  if (base.refused) {
    ASSERT_TRUE(must_refuse(impl, k)) << base.error;
    return;
  }
  ASSERT_TRUE(topk_properties(h, k, base.probs, base.indices));

  SoftmaxCall sm;
  sm.impl = SoftmaxImpl::automatic;
  const SoftmaxRun soft = run_softmax(d.view, sm, stream());
  ASSERT_FALSE(soft.refused) << soft.error;
  std::vector<float> gathered(base.probs.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int32_t j = 0; j < k; ++j) {
      const int32_t i = base.indices[r * k + j];
      gathered[r * k + j] = i < 0 ? 0.0f : soft.probs[r * V + i];
    }
  const Tolerance one = prob_tolerance(DType::f32);
  EXPECT_TRUE(all_close(base.probs, gathered, rows, k, {2 * one.abs, 2 * one.rel}, "gather(softmax, idx) vs probs"));

  call.log_probs = true;
  const TopkRun logs = run_topk(d.view, call, stream());
  ASSERT_FALSE(logs.refused) << logs.error;
  EXPECT_TRUE(all_equal(logs.indices, base.indices, rows, k, "indices with log_probs"));
  std::vector<float> exp_logs(logs.probs.size());
  for (std::size_t i = 0; i < exp_logs.size(); ++i) exp_logs[i] = std::exp(logs.probs[i]);
  // exp(log p) carries the log-prob's absolute error as a relative one: 5e-5 + p's own 1e-4.
  EXPECT_TRUE(all_close(exp_logs, base.probs, rows, k, {one.abs, 2e-4}, "exp(log_probs) vs probs"));

  call.log_probs = false;
  call.temperature = 0.5f;
  const TopkRun hot = run_topk(d.view, call, stream());
  ASSERT_FALSE(hot.refused) << hot.error;
  EXPECT_TRUE(all_equal(hot.indices, base.indices, rows, k, "indices at T = 0.5"));
  const TopkOracle o = oracle_topk(h, k, 0.5f, false);
  EXPECT_TRUE(all_close(hot.probs, o.probs, rows, k, one, "probs at T = 0.5 vs CPU oracle"));
}

INSTANTIATE_TEST_SUITE_P(All, TopkProperties,
                         ::testing::Combine(::testing::ValuesIn(kAllTopkImpls), ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(Dist::llm_like, Dist::normal, Dist::ascending, Dist::constant),
                                            ::testing::Values(int64_t{4097}, int64_t{151936}),
                                            ::testing::Values(50, 1024, 4096)),
                         [](const auto& tpi) {
                           const auto& p = tpi.param;
                           return std::string(impl_name(std::get<0>(p))) + "_" + dtype_name(std::get<1>(p)) + "_" +
                                  dist_name(std::get<2>(p)) + "_V" + std::to_string(std::get<3>(p)) + "_K" +
                                  std::to_string(std::get<4>(p));
                         });

// ---------------------------------------------------------------------------------------------
// Workspace: the radix path's size depends on the device (CUB scratch), so its too-small and
// null checks run here. A refused call must leave its outputs untouched.

class TopkWorkspace : public GpuTest {};

TEST_F(TopkWorkspace, TooSmallOrNullWorkspaceIsRefusedBeforeLaunch) {
  const HostLogits h = make_logits(DType::f32, 4, 1, 50257, Dist::normal);
  const DeviceLogits d = to_device(h, stream());
  for (TopkImpl impl : {TopkImpl::radix_select, TopkImpl::automatic, TopkImpl::reference}) {
    const int32_t k = 4096;  // auto takes the radix path above kMaxFastTopK
    TopkCall call;
    call.impl = impl;
    call.k = k;
    TopkBuffers b = make_topk_buffers(d.view, call, stream());
    const std::size_t need = b.workspace.bytes();
    SCOPED_TRACE(std::string(impl_name(impl)) + " needs " + std::to_string(need) + " bytes");
    ASSERT_GT(need, 0u) << "the radix path sorts in its workspace";
    const softk::TopkOptions o = options_of(call, nullptr);
    const auto call_with = [&](void* ws, std::size_t bytes) {
      if (impl == TopkImpl::reference)
        softk::reference::topk(d.view, k, b.probs.as<float>(), b.indices.as<int32_t>(), o, ws, bytes, stream());
      else
        softk::topk(d.view, k, b.probs.as<float>(), b.indices.as<int32_t>(), o, ws, bytes, stream());
    };
    EXPECT_TRUE(throws_error_naming([&] { call_with(b.workspace.get(), need - 1); }, {"workspace_bytes", std::to_string(need - 1)}));
    EXPECT_TRUE(throws_error_naming([&] { call_with(nullptr, need); }, {"workspace", "null"}));
    EXPECT_TRUE(throws_error_naming([&] { call_with(static_cast<char*>(b.workspace.get()) + 8, need); },
                                    {"workspace", "aligned"}));
    EXPECT_TRUE(b.probs.untouched(stream()) && b.indices.untouched(stream())) << "a refused call wrote its outputs";
  }
  // The fused path needs none: a null workspace of 0 bytes must work.
  TopkCall fused;
  fused.impl = TopkImpl::fused;
  fused.k = 50;
  EXPECT_EQ(softk::topk_workspace_size(d.view, 50, options_of(fused, nullptr)), 0u);
  const TopkRun run = run_topk(d.view, fused, stream());
  ASSERT_FALSE(run.refused) << run.error;
  EXPECT_TRUE(topk_properties(h, 50, run.probs, run.indices));
}

}  // namespace
