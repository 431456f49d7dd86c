// Split-k top-k (issue 4): the fused issue's matrix and exactness bar for few, long rows:
// rows {1, 2, 3, 7} (4 to 32 in Batch), V up to 2^26. Every case runs twice, forced split_k and
// auto (which should reach split-k for few long rows), through check_case (common/topk_check.hpp): indices EXACTLY
// the CPU oracle's (softk::cpu::topk), probabilities within compare.hpp's fp32 tolerance,
// row_status, output guards and the oracle-free properties (order, ties, completeness).
//   Shapes/TopkSplitK    rows {1,2,3,7} x V {1 .. 2^20+3, 2^24+3 (rows 1)} x K {1,2,16,50,256,1024},
//                        fp32 LLM-like logits
//   Dtypes/TopkSplitK    f16 / bf16 on a subset (quantisation makes ties common)
//   Inputs/TopkSplitK    every distribution at a mid V, at V = 2^20+3 and at 2^22+3 (span
//                        chunks); strided / misaligned layouts with log-probs; temperature
//   Batch/TopkSplitK     rows 8-32 at V <= 256000, where auto may take narrower clusters, and
//                        rows 4-24 at V >= 2^20+3 (one 2^22+3), where it takes longer chunks;
//                        rows 16-128 of 16001-2^20, which auto runs in clusters, a block per row
//                        or two launches (dispatch.cpp); 65539 short rows, past a grid's 65535
//   Huge/TopkSplitK      V = 2^24+3 on the inputs that stress the merge, V = 2^26 (K = 50,
//                        f32 llm_like and bf16 normal; two rows of crowded tied winners, which
//                        overflow a span chunk's gather), and the merge's bin of the K-th key
//                        overflowing (heavy tails, ties)
//   Sanitize/TopkSplitK  38 small cases for compute-sanitizer (scripts/gpu-check: '*Sanitize*'),
//                        through both forms (one cluster a row, two launches)
// plus TopkSplitKWorkspace (too-small / null workspace), TopkSplitKDispatch (auto keeps room
// for split-k when a single row is long) and TopkSplitKGridRuns (batches launched in runs of
// grid rows). '--gtest_filter=*SplitK*' selects all of it.
//
// What split-k adds over block-per-row, and the inputs aimed at it:
//  - chunk boundaries: all K winners in the first chunk(s) (adversarial with a small stride,
//    descending), one winner every V/K tokens, so in every chunk (adversarial "spread"), winners
//    at the end of the row (ascending; +inf and NaN at V-1 in pm_inf / nan_row);
//  - ties across chunks: the merge must keep the lower index (constant rows, tied adversarial
//    winners, bf16 ascending at V = 2^24+3, where ~16K tokens share the largest value);
//  - chunks with fewer than K, or no, unmasked tokens (few_unmasked, masked rows, K = 1024 on
//    short rows), whose padding must never reach the output;
//  - the (m, d) merge when +inf or NaN sits in a single chunk;
//  - a misaligned base and a row stride, so chunks start at every 16-byte phase.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/oracle.hpp"
#include "common/runners.hpp"
#include "common/topk_check.hpp"
#include "device_info.hpp"
#include "kernels/topk_launch.hpp"
#include "softk/topk.hpp"

namespace {

using namespace softk_test;
using softk::DType;

constexpr int64_t kV1M = (int64_t{1} << 20) + 3;
constexpr int64_t kV16M = (int64_t{1} << 24) + 3;
constexpr int64_t kV64M = int64_t{1} << 26;

// Forced first, then auto: consecutive cases share the input and the oracle answer.
const TopkImpl kSplitKImpls[] = {TopkImpl::split_k, TopkImpl::automatic};

int64_t floor_pow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

/// Distribution parameters for `d` at (V, K):
///  - few_unmasked: K/2 finite tokens, so the tail slots must be -1 / 0;
///  - adversarial_stride: all K winners placed, S tokens apart. Below 2^20 tokens S <= 256
///    (one thread's stride of a block-strided loop: the winners crowd one chunk); from 2^20 on
///    S = V/K rounded down to a power of two, so the winners are spread over every chunk.
DistParams params_for(Dist d, int64_t V, int32_t k) {
  DistParams p;
  if (d == Dist::few_unmasked) p.count = std::max(1, k / 2);
  if (d == Dist::adversarial_stride) {
    p.count = k;
    p.stride = floor_pow2(std::max<int64_t>(1, V / k));
    if (V < (int64_t{1} << 20)) p.stride = std::min<int64_t>(p.stride, 256);
  }
  return p;
}

/// K winners 64 tokens apart: inside one chunk of any split-k plan.
DistParams winners_in_one_chunk(int32_t k) {
  DistParams p;
  p.count = k;
  p.stride = 64;
  return p;
}

struct Extra {
  Layout layout;
  bool log_probs = false;
  float temperature = 1.0f;
};

TopkCase make_case(TopkImpl impl, DType dt, int64_t V, int64_t rows, int32_t k, Dist d, const DistParams& params,
                   const Extra& extra) {
  TopkCase c = topk_case(impl, dt, V, rows, k, d);
  c.params = params;
  c.layout = extra.layout;
  c.log_probs = extra.log_probs;
  c.temperature = extra.temperature;
  return c;
}

void add(std::vector<TopkCase>& out, DType dt, int64_t V, int64_t rows, int32_t k, Dist d, const DistParams& params,
         const Extra& extra = {}) {
  for (TopkImpl impl : kSplitKImpls) out.push_back(make_case(impl, dt, V, rows, k, d, params, extra));
}
void add(std::vector<TopkCase>& out, DType dt, int64_t V, int64_t rows, int32_t k, Dist d) {
  add(out, dt, V, rows, k, d, params_for(d, V, k));
}

class TopkSplitK : public GpuTestWithParam<TopkCase> {};

TEST_P(TopkSplitK, MatchesOracle) { check_case(GetParam(), stream()); }

// ---------------------------------------------------------------------------------------------
// Case lists (implementation innermost, K next: consecutive cases share input and oracle).

const int32_t kKs[] = {1, 2, 16, 50, 256, 1024};

std::vector<TopkCase> shape_cases() {
  std::vector<TopkCase> out;
  const int64_t vocabs[] = {1, 7, 33, 4097, 32000, 128256, 151936, 256000, kV1M, kV16M};
  for (int64_t V : vocabs)
    for (int64_t rows : {1, 2, 3, 7}) {
      if (V == kV16M && rows > 1) continue;
      for (int32_t k : kKs)
        if (k <= V) add(out, DType::f32, V, rows, k, Dist::llm_like);
    }
  return finish(out, false);
}

std::vector<TopkCase> dtype_cases() {
  std::vector<TopkCase> out;
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t V : {int64_t{33}, int64_t{4097}, int64_t{151936}, kV1M})
      for (int64_t rows : {1, 3, 7})
        for (int32_t k : {1, 50, 1024})
          if (k <= V) add(out, dt, V, rows, k, Dist::normal);
  add(out, DType::bf16, kV16M, 1, 50, Dist::normal);
  return finish(out, false);
}

std::vector<TopkCase> input_cases() {
  std::vector<TopkCase> out;
  struct Shape { DType dt; int64_t V, rows; int32_t k; };
  const Shape shapes[] = {
      {DType::f32, 4097, 7, 50},  {DType::f32, 151936, 3, 1024}, {DType::f32, kV1M, 2, 256}, {DType::f32, kV1M, 1, 16},
      {DType::bf16, 128256, 2, 50}, {DType::bf16, kV1M, 3, 1024},
      {DType::f16, 32000, 7, 2},    {DType::f16, 256000, 1, 256},
      // K = 1 in one cluster a row runs its own kernel (topk_cluster.cu: no threshold, the
      // largest key merged across the cluster): 16 CTAs, and one. Past the cluster's reach a
      // row's chunks take the one-read argmax (block_argmax.cuh) and the merge the largest of
      // their keys: ~4K-token chunks at 2^20+3 (one row, and three whose batch plan is longer
      // chunks), 16K-token ones at 2^22, and under auto one row of 256000 fp32 in 1024-token
      // chunks (forced split_k: a cluster); an odd V ends its last chunk in a scalar tail.
      {DType::f32, 151936, 3, 1},   {DType::bf16, 4097, 7, 1},   {DType::f32, 256000, 1, 1},
      {DType::f32, kV1M, 1, 1},     {DType::bf16, kV1M, 3, 1},
      {DType::f32, int64_t{1} << 22, 1, 1}, {DType::bf16, (int64_t{1} << 22) + 3, 2, 1},
      // Span chunks (block_span_topk.cuh) and the merge from their sorted lists' heads: one row
      // of 2^22+3 at K = 33 in ~17K-token chunks (an odd K: a padding slot a list), and two bf16
      // rows at K = 50 (auto: ~32K-token chunks, one wave for the batch).
      {DType::f32, (int64_t{1} << 22) + 3, 1, 33}, {DType::bf16, (int64_t{1} << 22) + 3, 2, 50},
  };
  for (const Shape& s : shapes)
    for (Dist d : kAllDists) add(out, s.dt, s.V, s.rows, s.k, d);
  // Tied winners: equal logits, one per thread stride at mid V, one per V/K tokens at 2^20+3.
  for (const Shape& s : {Shape{DType::f32, 151936, 3, 1024}, Shape{DType::f32, kV1M, 2, 256}}) {
    DistParams p = params_for(Dist::adversarial_stride, s.V, s.k);
    p.tied_winners = true;
    add(out, s.dt, s.V, s.rows, s.k, Dist::adversarial_stride, p);
  }
  // The merge's bound from the chunks' maxima (one row of 2^20+3 at K = 50: on 132 SMs, 257
  // binned chunks of 4096 tokens, each listing its keys from its K-th key's bin up): K tied
  // winners in as many chunks, so that the bound is their value and exactly they reach it; and
  // K + 13, so that more keys tie at the bound than win and the lowest indices must.
  for (int64_t count : {50, 63}) {
    DistParams p = params_for(Dist::adversarial_stride, kV1M, 50);
    p.tied_winners = true;
    p.count = count;
    p.stride = kV1M / count;
    add(out, DType::f32, kV1M, 1, 50, Dist::adversarial_stride, p);
  }
  // Row stride > V with garbage padding (NaN, FLT_MAX, +inf: a chunk that reads past V wins or
  // poisons the row) and a misaligned base, each with and without log-probs.
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& s : {Shape{dt, 4097, 3, 50}, Shape{dt, kV1M, 2, 1024}, Shape{dt, (int64_t{1} << 22) + 3, 2, 1}})
      for (Layout layout : {Layout{s.V + 1, 0}, Layout{s.V + 5, dt == DType::f32 ? 3 : 7}})
        for (bool log_probs : {false, true}) {
          Extra e;
          e.layout = layout;
          e.log_probs = log_probs;
          add(out, dt, s.V, s.rows, s.k, Dist::spikes, {}, e);
        }
  // Temperature scales the probabilities (and the merged (m, d)), never the ranking.
  for (float T : {0.3f, 2.5f}) {
    Extra e;
    e.temperature = T;
    add(out, DType::f32, 128256, 1, 256, Dist::heavy_tailed, {}, e);
  }
  return finish(out, true);
}

// Batches where `automatic` cuts a row into fewer parts than forced split_k. Past what the widest
// clusters hold at once (7 of 16 CTAs on an H200) it may take narrower clusters
// (topk_cluster.cu, cluster_plan_for): rows 8 and 16, V from 9 to 16 CTAs of 8192 tokens (an H200
// holds 9 clusters of 9, so 8 rows of 73000 keep the widest plan and 16 do not), every
// distribution at one shape; V = 200003 and 256000, where the CTAs of a narrow cluster hold up
// to 64 tokens a thread in shared memory (fp32 and bf16; 12 rows strided and misaligned; 32 rows
// of 256000, 8 CTAs and 128000 bytes a CTA on an H200); and 24 and 32 rows of 128256, which take
// clusters narrower than 8 CTAs, as many as run the batch in the fewest waves (on an H200 24 rows
// of 4 CTAs in one wave, 32 rows of 6 in two). Rows past the cluster form take fewer, longer
// chunks as the batch grows (topk_split_k.cu, plan_for): 2^20+3 tokens at 4, 8 and 16 rows, where forced split_k
// lists 163 binned chunks a row at K = 50 and auto 66 / 33 / 16 fused ones, with ties, a NaN row
// and bf16 beside LLM-like logits, and 4 rows of 2^22+3. Past K = 256 (the merge's radix select)
// the batch plan differs only for more rows: 17 and 24 rows of 500000 at K = 512 take 15 and 11
// fused chunks where one row takes 16 binned ones. (Counts for 132 SMs; another device gets other
// plans, all exact.) Forced split_k runs beside it as always. Which plan ran is not observable
// here; bench/RESULTS.md shows the times.
std::vector<TopkCase> batch_cases() {
  std::vector<TopkCase> out;
  for (int64_t rows : {4, 8, 16})
    for (int32_t k : {1, 50, 256, 1024}) add(out, DType::f32, kV1M, rows, k, Dist::llm_like);
  add(out, DType::f32, kV1M, 8, 50, Dist::constant);
  add(out, DType::f32, kV1M, 8, 16, Dist::nan_row);
  add(out, DType::bf16, kV1M, 8, 50, Dist::normal);
  add(out, DType::f32, (int64_t{1} << 22) + 3, 4, 50, Dist::llm_like);
  // The winners one thread's stride apart (a chunk block's thread visits one vector in 512: 2048
  // fp32 or 4096 bf16 tokens), so each of auto's ~16K-token chunks holds several in one span of
  // one thread (block_span_topk.cuh: the K largest span maxima name only one of them).
  for (DType dt : {DType::f32, DType::bf16}) {
    DistParams p = params_for(Dist::adversarial_stride, kV1M, 50);
    p.stride = dt == DType::f32 ? 2048 : 4096;
    add(out, dt, kV1M, 4, 50, Dist::adversarial_stride, p);
  }
  // Past K = 256, auto's two launches cut a batch's rows into fewer, longer chunks than forced
  // split_k's (up to SMs / 8 rows of 768 KB or more: dispatch.cpp).
  for (int64_t rows : {12, 16}) add(out, DType::f32, 500000, rows, 512, Dist::llm_like);
  for (int64_t V : {73000, 128256, 131072})
    for (int64_t rows : {8, 16})
      for (int32_t k : {1, 50, 256}) add(out, DType::f32, V, rows, k, Dist::llm_like);
  for (int32_t k : {1, 50}) add(out, DType::bf16, 128256, 8, k, Dist::normal);
  // K = 1 clusters held one CTA an SM while the batch fits one wave so (7 rows of 16 CTAs on an
  // H200; the input cases' 3 rows of 151936 too), and 8 rows that do not; under auto only up to
  // 4 MiB of logits (5 and 7 rows of 128256), past it two launches (of 256000: topk_cluster.cu).
  for (int64_t V : {128256, 256000})
    for (int64_t rows : {5, 7}) add(out, DType::f32, V, rows, 1, Dist::llm_like);
  add(out, DType::bf16, 201088, 6, 1, Dist::nan_row);
  for (int64_t V : {200003, 256000})
    for (int64_t rows : {8, 16})
      for (int32_t k : {1, 50, 256}) add(out, DType::f32, V, rows, k, Dist::llm_like);
  for (int32_t k : {1, 50}) add(out, DType::bf16, 256000, 8, k, Dist::normal);
  for (int64_t rows : {24, 32})
    for (int32_t k : {1, 50, 256}) add(out, DType::f32, 128256, rows, k, Dist::llm_like);
  add(out, DType::bf16, 128256, 32, 50, Dist::normal);
  Extra strided;
  strided.layout = Layout{200003 + 5, 3};
  add(out, DType::f32, 200003, 12, 50, Dist::llm_like, {}, strided);
  add(out, DType::f32, 256000, 32, 50, Dist::llm_like);
  // K = 1024 past one wave of clusters: forced split_k's leader sorts ~1500-1800 candidates, auto
  // takes a block per row (32 rows of 256000, 1 MB a row past SMs / 8 rows; 8 of 128256 in 16-CTA
  // clusters under split_k).
  add(out, DType::f32, 256000, 32, 1024, Dist::llm_like);
  add(out, DType::bf16, 128256, 8, 1024, Dist::llm_like);
  for (Dist d : kAllDists) {
    if (d != Dist::llm_like) add(out, DType::f32, 128256, 8, 50, d);  // llm_like: above
    add(out, DType::bf16, 100003, 9, 16, d);
  }
  // Chunks held in shared memory send their candidates by comparing values first (SharedChunk in
  // topk_cluster.cu): every distribution through it (8 rows of 200003 f32: 9-CTA clusters of ~43
  // tokens a thread on an H200), and K = 1024 across such clusters (sorted in buckets since
  // 6656784), fp32 and bf16.
  for (Dist d : kAllDists)
    if (d != Dist::llm_like) add(out, DType::f32, 200003, 8, 50, d);  // llm_like: above
  add(out, DType::f32, 200003, 8, 1024, Dist::llm_like);
  add(out, DType::bf16, 256000, 8, 1024, Dist::llm_like);
  // Past SMs / 8 rows auto takes clusters of 4 CTAs or more, and narrower ones only where a block
  // per row would take the fused core; else split-k's two launches up to SMs / 2 rows where the
  // rows are long enough, else a block per row (src/dispatch.cpp). On 132 SMs: 64 rows of 32000
  // f32 and of 50257 bf16 a block each (they read their rows once), 64 of 50257 f32 at K = 256 in
  // 2-CTA clusters holding their chunks in shared memory, 128 of 32000 bf16 and 96 of 16001 at
  // K = 16 (ties and NaN rows) a block each, by spans; in two launches: K = 1 on 64 rows of 128256 bf16 and
  // 50257 f32 (batches past 4 MiB), 32 of 151936 f32 at K = 50 (8 chunks a row), 32 of 256000
  // bf16 at K = 256, 16 of 201088 f32 at K = 1024 and 40 of 1M bf16 at K = 50; 128 of 32000 at
  // K = 1 with a NaN row a block each.
  for (int32_t k : {1, 50, 1024}) add(out, DType::f32, 32000, 64, k, Dist::llm_like);
  add(out, DType::bf16, 50257, 64, 256, Dist::normal);
  add(out, DType::f32, 50257, 64, 256, Dist::llm_like);
  add(out, DType::bf16, 32000, 128, 50, Dist::llm_like);
  add(out, DType::bf16, 128256, 64, 1, Dist::llm_like);
  add(out, DType::f32, 50257, 64, 1, Dist::nan_row);
  add(out, DType::f32, 151936, 32, 50, Dist::llm_like);
  add(out, DType::bf16, 256000, 32, 256, Dist::adversarial_stride);
  add(out, DType::f32, 201088, 16, 1024, Dist::llm_like);
  add(out, DType::bf16, kV1M, 40, 50, Dist::constant);
  add(out, DType::f32, 32000, 128, 1, Dist::nan_row);
  for (Dist d : {Dist::constant, Dist::nan_row, Dist::adversarial_stride})
    add(out, DType::f32, 16001, 96, 16, d);
  // More rows than a grid's y extent (65535), where split-k gives a row a grid row, so it
  // launches in runs (for_each_grid_row_run): short rows in clusters of one CTA, in the top-k
  // kernel and in K = 1's (NaN rows in the second run).
  add(out, DType::f32, 64, 65539, 5, Dist::llm_like);
  add(out, DType::bf16, 300, 65539, 1, Dist::nan_row);
  return finish(out, true);
}

// The long rows: V = 2^24+3 on the inputs that stress the merge, then 2^26 (the top V;
// the CPU oracle takes a few seconds there, so two inputs only). Rows 1: rows x V stays small.
std::vector<TopkCase> huge_cases() {
  std::vector<TopkCase> out;
  add(out, DType::f32, kV16M, 1, 1024, Dist::constant);            // every token ties
  add(out, DType::f32, kV16M, 1, 50, Dist::adversarial_stride);    // one winner per 2^18 tokens
  DistParams clustered = params_for(Dist::adversarial_stride, kV16M, 1024);
  clustered.stride = 128;                                          // all 1024 winners in 128K tokens
  add(out, DType::f32, kV16M, 1, 1024, Dist::adversarial_stride, clustered);
  add(out, DType::f32, kV16M, 1, 50, Dist::nan_row);               // one NaN somewhere
  add(out, DType::f32, kV16M, 1, 256, Dist::few_unmasked);         // 128 finite tokens in 16M
  add(out, DType::f32, kV16M, 1, 1024, Dist::masked_rows);         // the whole row masked
  add(out, DType::bf16, kV16M, 1, 256, Dist::ascending);           // winners: the first of ~16K tokens tied at 8.0
  add(out, DType::f32, kV16M, 1, 16, Dist::descending);            // winners at the front
  add(out, DType::f32, kV16M, 1, 2, Dist::pm_inf);                 // -inf head, 2% masked
  add(out, DType::f32, kV64M, 1, 50, Dist::llm_like);
  add(out, DType::bf16, kV64M, 1, 50, Dist::normal);
  // 1100 tied winners 256 tokens apart: in auto's 508K-token chunks of two rows of 2^26 they lie
  // in ~70 spans of 8 threads (16 turns a span), all tied for the K-th largest span maximum, so
  // the chunk gathers more keys than it ranks (1024) and selects from the whole chunk instead
  // (block_span_topk.cuh). Forced split_k's 254K-token chunks name spans by index bits instead.
  DistParams crowded = params_for(Dist::adversarial_stride, kV64M, 50);
  crowded.count = 1100;
  crowded.stride = 256;
  crowded.tied_winners = true;
  add(out, DType::f32, kV64M, 2, 50, Dist::adversarial_stride, crowded);
  // The merge's bin of the K-th key holding more keys than it gathers: heavy-tailed logits crowd
  // [36, 40) with ~6,700 listed keys at K = 256, which the next 12 bits split; a constant row
  // ties every value, and the select goes down to the index bits.
  add(out, DType::f32, kV16M, 1, 256, Dist::heavy_tailed);
  add(out, DType::f32, (int64_t{1} << 22) + 3, 1, 50, Dist::constant);
  // Span chunks list their keys sorted, and the merge holds the first 8 of each list (ListHead in
  // topk_split_k.cu; forced split_k at 2^22+3 on 132 SMs: 264 chunks of ~16K tokens): an odd K,
  // whose lists carry one padding slot; K winners 64 tokens apart in one chunk, over a background
  // capped at 3.0 whose ties reach the bound in every chunk, so that the merge reads every list
  // instead; and descending logits at K = 16, where the first 15 chunks' lists hold 16 keys at or
  // above the bound each and are read past their heads (the 2^24+3 row above, too).
  add(out, DType::f32, (int64_t{1} << 22) + 3, 1, 33, Dist::llm_like);
  add(out, DType::f32, (int64_t{1} << 22) + 3, 1, 33, Dist::adversarial_stride, winners_in_one_chunk(33));
  add(out, DType::f32, (int64_t{1} << 22) + 3, 1, 16, Dist::descending);
  return finish(out, true);
}

// Small cases for compute-sanitizer memcheck / racecheck / synccheck, through both forms of
// split-k. Two-launch (V past a cluster's registers): the merge's bin select going a level
// down (heavy-tailed logits at K = 256, misaligned) and down to the index bits (a constant row),
// at 2^22+3; ties over many chunks (K = 50 at 300000, where every binned chunk's threshold bin
// overflows its list, whose exact fallback lists the chunk's top-K, and the merge's bin
// overflows its gather); +inf across chunks at K = 1024; a misaligned 2^20+3 row through
// both split_k and auto, and 4 aligned rows of 2^20+3 through auto (the batch's longer chunks
// take spans, and the merge their lists' heads, where one row's are binned); 32K-token chunks of
// the fused core at K = 256, selecting from their candidates (LLM-like) or, the candidate lists
// overflowing, from the chunk itself (constant); K = 1's one-read chunks and the merge of their keys, on +inf at
// 2^22+3, on NaN rows at 2^20+3 and on a masked row of 256000 in 1024-token chunks (auto), each
// on a misaligned base. The merge's bound from the chunks' maxima on the misaligned LLM-like row
// of 2^20+3 at K = 50 (257 chunks on 132 SMs), and its way out to every list on the constant
// rows of 2^22+3 and 300000. One cluster a row (topk_cluster.cu): constant rows (the select goes
// down to the index bits, level by level; at K = 1024 the first CTA holds every candidate and
// sorts ~2048), NaN rows on a misaligned base, +inf, a 16-CTA LLM-like bf16 row, K = 1024 over
// 16 CTAs on a misaligned base (~1500 candidates in every CTA's runs) and on an ascending bf16
// row (the candidates in the last CTAs), 8 rows of 128256 at K = 1024 (two waves of 16-CTA
// clusters on an H100 / H200: the leader sorts ~1500 keys), 16 rows of 128256 (6 CTAs a row on
// an H200) and 15 of 256000 on a misaligned base (8 CTAs a row, 125 KB a CTA in shared memory)
// through `automatic` in narrower clusters (on a device holding fewer than 16 clusters of 16),
// the K = 1 kernel on a masked row and on +inf at a misaligned base, and `automatic` past SMs / 8 rows: 64 rows of 50257 f32
// in one wave of 2-CTA clusters holding their chunks in shared memory (K = 256 sorted by the
// leader, a misaligned base; K = 1024 ranked across both CTAs), and 40 rows of 50257 f32 at K = 1
// in two launches. The bounded kernel (1 < K <= 64, cluster_bounded.cuh)
// on LLM-like logits at a misaligned base (every CTA sends its keys above the bound to every
// other), a constant bf16 row at K = 64 (every CTA meets more keys than its region holds and
// selects its own top K), an ascending row (the bound from the first CTAs' low keys: the last CTAs
// select their own) and NaN rows (empty regions shared; the leader writes them). The merge from
// the heads of span chunks' sorted lists at 2^22+3: K = 33 (an odd K: a padding slot a list) on a
// misaligned LLM-like row, and descending logits at K = 16 (15 lists read past their heads).
std::vector<TopkCase> sanitize_cases() {
  std::vector<TopkCase> out;
  const auto one = [&](TopkImpl impl, DType dt, int64_t V, int64_t rows, int32_t k, Dist d, Layout layout) {
    out.push_back(make_case(impl, dt, V, rows, k, d, params_for(d, V, k), Extra{layout}));
  };
  one(TopkImpl::split_k, DType::f32, (int64_t{1} << 22) + 3, 1, 256, Dist::heavy_tailed, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, (int64_t{1} << 22) + 3, 1, 50, Dist::constant, {});
  one(TopkImpl::split_k, DType::f32, 4097, 3, 1024, Dist::nan_row, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, 33000, 1, 1024, Dist::constant, {});
  one(TopkImpl::split_k, DType::f32, 300000, 2, 50, Dist::constant, {});
  one(TopkImpl::split_k, DType::bf16, kV1M, 2, 1024, Dist::pm_inf, {});
  one(TopkImpl::split_k, DType::f32, kV1M, 1, 50, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, kV1M, 1, 50, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, kV1M, 4, 50, Dist::llm_like, {});
  one(TopkImpl::split_k, DType::bf16, 33000, 2, 1, Dist::masked_rows, {});
  one(TopkImpl::split_k, DType::f32, 33000, 2, 50, Dist::constant, {});
  one(TopkImpl::split_k, DType::f32, 4097, 3, 16, Dist::nan_row, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, kV1M, 1, 256, Dist::llm_like, {});
  one(TopkImpl::split_k, DType::bf16, kV1M, 1, 256, Dist::constant, {});
  one(TopkImpl::split_k, DType::f32, 128256, 1, 256, Dist::pm_inf, {});
  one(TopkImpl::split_k, DType::bf16, 256000, 1, 50, Dist::llm_like, {});
  one(TopkImpl::automatic, DType::f32, 128256, 16, 50, Dist::llm_like, {});
  one(TopkImpl::split_k, DType::f32, 128256, 2, 1, Dist::pm_inf, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, (int64_t{1} << 22) + 3, 1, 1, Dist::pm_inf, Layout{0, 1});
  one(TopkImpl::split_k, DType::bf16, kV1M, 3, 1, Dist::nan_row, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, 256000, 1, 1, Dist::masked_rows, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, 256000, 15, 50, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, 128256, 2, 1024, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::split_k, DType::bf16, 151936, 1, 1024, Dist::ascending, {});
  one(TopkImpl::split_k, DType::f32, 128256, 8, 1024, Dist::llm_like, {});
  one(TopkImpl::split_k, DType::f32, 32000, 9, 256, Dist::llm_like, {});  // ranked across the cluster
  // The bound at K > 64 (four keys a warp): on logits, and with every winner in one CTA's chunk,
  // which shares its own top K.
  one(TopkImpl::automatic, DType::f32, 128256, 1, 256, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, 128256, 1, 256, Dist::adversarial_stride, {});
  one(TopkImpl::automatic, DType::bf16, 50257, 2, 100, Dist::constant, {});
  one(TopkImpl::automatic, DType::f32, 50257, 64, 256, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::automatic, DType::f32, 50257, 64, 1024, Dist::llm_like, {});
  one(TopkImpl::automatic, DType::f32, 50257, 40, 1, Dist::nan_row, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, 128256, 1, 50, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::split_k, DType::bf16, 128256, 1, 64, Dist::constant, {});
  one(TopkImpl::split_k, DType::f32, 151936, 1, 50, Dist::ascending, {});
  one(TopkImpl::split_k, DType::f32, 128256, 2, 16, Dist::nan_row, {});
  one(TopkImpl::split_k, DType::f32, (int64_t{1} << 22) + 3, 1, 33, Dist::llm_like, Layout{0, 1});
  one(TopkImpl::split_k, DType::f32, (int64_t{1} << 22) + 3, 1, 16, Dist::descending, {});
  return finish(out, true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TopkSplitK, ::testing::ValuesIn(shape_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Dtypes, TopkSplitK, ::testing::ValuesIn(dtype_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Inputs, TopkSplitK, ::testing::ValuesIn(input_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Batch, TopkSplitK, ::testing::ValuesIn(batch_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Huge, TopkSplitK, ::testing::ValuesIn(huge_cases()), param_name);
INSTANTIATE_TEST_SUITE_P(Sanitize, TopkSplitK, ::testing::ValuesIn(sanitize_cases()), param_name);

// ---------------------------------------------------------------------------------------------
// Workspace. Split-k keeps each chunk's (m, d) and local top-K in the workspace (topk.hpp), so
// a long single row needs some; the size query's answer must be exactly enough (the runners
// allocate exactly that, so an overrun is a sanitizer hit) and one byte less, or a null
// workspace, is refused before anything is written.

class TopkSplitKWorkspace : public GpuTest {};

TEST_F(TopkSplitKWorkspace, TooSmallOrNullWorkspaceIsRefusedBeforeLaunch) {
  const HostLogits h = make_logits(DType::f32, 1, 1, kV1M, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  for (TopkImpl impl : kSplitKImpls)
    for (int32_t k : {1, 50, 1024}) {
      TopkCall call;
      call.impl = impl;
      call.k = k;
      TopkBuffers b = make_topk_buffers(d.view, call, stream());
      const std::size_t need = b.workspace.bytes();
      SCOPED_TRACE(std::string(impl_name(impl)) + " K=" + std::to_string(k) + " needs " + std::to_string(need) + " bytes");
      if (impl == TopkImpl::split_k) {
        ASSERT_GT(need, 0u) << "split-k writes per-chunk states and candidates to its workspace";
      } else if (need == 0) {
        continue;  // auto chose a path without workspace: nothing to be too small (TopkSplitKDispatch checks that)
      }
      const softk::TopkOptions o = options_of(call, nullptr);
      const auto call_with = [&](void* ws, std::size_t bytes) {
        softk::topk(d.view, k, b.probs.as<float>(), b.indices.as<int32_t>(), o, ws, bytes, stream());
      };
      EXPECT_TRUE(throws_error_naming([&] { call_with(b.workspace.get(), need - 1); },
                                      {"workspace_bytes", std::to_string(need - 1)}));
      EXPECT_TRUE(throws_error_naming([&] { call_with(nullptr, need); }, {"workspace", "null"}));
      EXPECT_TRUE(throws_error_naming([&] { call_with(static_cast<char*>(b.workspace.get()) + 8, need); },
                                      {"workspace", "aligned"}));
      EXPECT_TRUE(b.probs.untouched(stream()) && b.indices.untouched(stream())) << "a refused call wrote its outputs";
      // The exact size works.
      const TopkRun run = run_topk(d.view, call, stream());
      ASSERT_FALSE(run.refused) << run.error;
      EXPECT_EQ(run.guard_violation, "");
      EXPECT_TRUE(topk_properties(h, k, run.probs, run.indices));
    }
}

// ---------------------------------------------------------------------------------------------
// Dispatch: the issue has auto reach split-k for few long rows. Observable from outside through
// the size query: auto's answer is the largest need of the paths it may take (topk.hpp) and the
// fused path needs none, so a single row of a million tokens or more with K <= kMaxFastTopK
// must get a non-zero workspace from auto, or auto can never take split-k there.

class TopkSplitKDispatch : public GpuTest {};

TEST_F(TopkSplitKDispatch, AutoKeepsRoomForSplitKOnOneLongRow) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {kV1M, kV16M, kV64M})
      for (int32_t k : {1, 50, 256, 1024}) {
        softk::LogitsView v = valid_fake_logits();  // the size query reads no data
        v.dtype = dt;
        v.batch = 1;
        v.steps = 1;
        v.vocab = V;
        const std::size_t need = softk::topk_workspace_size(v, k, {});
        EXPECT_GT(need, 0u) << "auto cannot take split-k for " << dtype_name(dt) << " V=" << V << " K=" << k;
      }
}

// A workspace sized for a batch serves every smaller batch under auto (topk.hpp), also where the
// batch runs in clusters (no workspace) and one row takes two launches (K = 1 past 768 KB a row:
// topk_cluster.cu, kClusterArgmaxMaxRowBytes), and where the batch takes a block per row while
// fewer rows take two launches (dispatch.cpp, two_launch_max_rows).
TEST_F(TopkSplitKDispatch, AutoWorkspaceForABatchServesEverySmallerBatch) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t V : {int64_t{128256}, int64_t{201088}, int64_t{256000}, kV1M})
      for (int32_t k : {1, 50, 1024}) {
        softk::LogitsView v = valid_fake_logits();
        v.dtype = dt;
        v.steps = 1;
        v.vocab = V;
        v.batch = 1;
        const std::size_t one_row = softk::topk_workspace_size(v, k, {});
        for (int64_t rows : {2, 4, 8, 16, 32, 64}) {
          v.batch = rows;
          EXPECT_GE(softk::topk_workspace_size(v, k, {}), one_row)
              << dtype_name(dt) << " V=" << V << " K=" << k << ": " << rows << " rows' workspace is short for one";
        }
      }
}

// ---------------------------------------------------------------------------------------------
// Runs of grid rows. Split-k gives each row a grid row, and a grid holds at most 65535 of them,
// so a larger batch is launched in runs (for_each_grid_row_run). The two-launch form's chunk
// kernels take a row each only past 256K tokens, where 65536 rows would not fit a GPU, so here
// the device's limit is set to 2 rows and a batch of 5 goes in runs of 2, 2 and 1, in every
// kernel of both forms. Forced split-k gives a row the same bits in any batch, so every row
// must match one call of the public op, which launches the 5 rows at once; NaN rows (rows 2
// and 4) sit in the later runs.

class TopkSplitKGridRuns : public GpuTest {};

TEST_F(TopkSplitKGridRuns, RowsLaunchedInRunsMatchOneLaunch) {
  namespace kernels = softk::kernels;
  softk::DeviceInfo two_rows_a_grid = softk::current_device_info();
  two_rows_a_grid.max_grid_rows = 2;
  struct Form {
    DType dtype;
    int64_t vocab;
    int32_t k;
    const char* what;
  };
  const Form forms[] = {
      {DType::f32, 32000, 50, "bounded cluster kernel"},
      {DType::bf16, 128256, 50, "cluster top-k kernel"},
      {DType::f32, 128256, 1, "cluster K = 1 kernel"},
      {DType::f32, 128256, 1024, "cluster, sorted in buckets"},
      {DType::f32, kV1M, 50, "binned chunks"},
      {DType::f32, kV1M, 1, "K = 1 chunks"},
      {DType::f32, (int64_t{1} << 22) + 3, 50, "span chunks"},
      {DType::bf16, (int64_t{1} << 22) + 3, 256, "fused-core chunks"},
  };
  constexpr int64_t kRows = 5;
  for (const Form& f : forms) {
    SCOPED_TRACE(std::string(f.what) + ": " + dtype_name(f.dtype) + " V=" + std::to_string(f.vocab) +
                 " K=" + std::to_string(f.k));
    const HostLogits h = make_logits(f.dtype, kRows, 1, f.vocab, Dist::nan_row);
    const DeviceLogits d = to_device(h, stream());
    TopkCall call;
    call.impl = TopkImpl::split_k;
    call.k = f.k;
    const TopkRun expected = run_topk(d.view, call, stream());
    ASSERT_FALSE(expected.refused) << expected.error;

    TopkBuffers b = make_topk_buffers(d.view, call, stream());
    const kernels::TopkProblem problem{d.view.data, f.dtype, kRows, f.vocab, f.vocab, f.k,
                                       static_cast<float>(M_LOG2E), false, b.probs.as<float>(),
                                       b.indices.as<int32_t>(), b.status.as<int32_t>()};
    const DeviceBuffer workspace(kernels::topk_split_k_workspace_size(kRows, f.vocab, f.dtype, f.k, two_rows_a_grid,
                                                                      kernels::SplitSizing::per_row));
    const kernels::LaunchContext launch{stream(), kernels::sm90_image_loaded(two_rows_a_grid)};
    kernels::launch_topk_split_k(problem, two_rows_a_grid, workspace.get(), launch, kernels::SplitSizing::per_row);
    const TopkRun runs = collect_topk(d.view, call, b, stream());
    EXPECT_EQ(runs.guard_violation, "");
    EXPECT_EQ(runs.indices, expected.indices);
    // Bits, not floats: the NaN rows' probabilities are NaN.
    ASSERT_EQ(runs.probs.size(), expected.probs.size());
    EXPECT_TRUE(bitwise_equal(runs.probs.data(), expected.probs.data(), expected.probs.size() * sizeof(float), "probs"));
    EXPECT_EQ(runs.status, expected.status);
  }
}

}  // namespace
