// Stream/graph and determinism contracts of softk::softmax and softk::topk:
//  - CUDA graph: the op captured on a stream (global capture mode, which rejects any allocation
//    or host synchronisation inside it) and replayed; each replay is bitwise identical to an
//    eager run on the same input. The input buffer is refilled between replays (A, B, A), so an
//    op that bakes data-dependent host decisions into the graph, or leaves state in its
//    workspace (split-k counters) that the next replay trips over, is caught. Outputs are
//    re-poisoned before every replay, so a replay that skips a write is caught too.
//  - Determinism: the same input twice gives the same bits; a row gives the same bits whether it
//    is alone (batch 1) or row 40 of a batch of 64 (same 16-byte phase) with other rows around it.
//    Split-k on long rows (many chunks per row) also: repeated runs, and a row alone vs in a batch
//    (TopkSplitKRepeatable, TopkSplitKBatchInvariance).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "common/compare.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/runners.hpp"

namespace {

using namespace softk_test;
using softk::DType;

/// Owns a captured graph and its executable.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
  }
};

/// Captures launch() on `stream` into g. A failure inside capture is reported with the op's
/// exception or the capture's CUDA error (e.g. cudaErrorStreamCaptureUnsupported when an op
/// allocates or synchronises).
template <class Launch>
void capture(Graph& g, cudaStream_t stream, Launch&& launch) {
  SOFTK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  std::string thrown;
  try {
    launch();
  } catch (const std::exception& e) {
    thrown = e.what();
  }
  const cudaError_t end = cudaStreamEndCapture(stream, &g.graph);
  if (!thrown.empty()) throw std::runtime_error("op threw during stream capture: " + thrown);
  check_cuda(end, "cudaStreamEndCapture (did the op allocate or synchronise?)");
  SOFTK_TEST_CUDA(cudaGraphInstantiate(&g.exec, g.graph, 0));
}

struct GraphShape {
  int64_t V, rows;
};
void PrintTo(const GraphShape& s, std::ostream* os) { *os << "V" << s.V << "_R" << s.rows; }

// ---------------------------------------------------------------------------------------------
// softmax under graph capture

class SoftmaxGraph : public GpuTestWithParam<std::tuple<SoftmaxImpl, DType, GraphShape>> {};

TEST_P(SoftmaxGraph, ReplaysMatchEagerBitwise) {
  const auto [impl, dt, shape] = GetParam();
  const HostLogits a = make_logits(dt, shape.rows, 1, shape.V, Dist::llm_like, {}, {}, 1);
  const HostLogits b = make_logits(dt, shape.rows, 1, shape.V, Dist::pm_inf, {}, {}, 2);
  DeviceLogits x = to_device(a, stream());
  SoftmaxCall call;
  call.impl = impl;

  // Eager answers for A and B, through the very input buffer the graph will read.
  SoftmaxRun eager_a = run_softmax(x.view, call, stream());
  if (eager_a.refused) GTEST_SKIP() << impl_name(impl) << " does not hold V=" << shape.V << ": " << eager_a.error;
  upload(x.buffer.get(), b.bytes.data(), b.bytes.size(), stream());
  const SoftmaxRun eager_b = run_softmax(x.view, call, stream());
  ASSERT_FALSE(eager_b.refused);

  SoftmaxBuffers buf = make_softmax_buffers(x.view, call, stream());
  upload(x.buffer.get(), a.bytes.data(), a.bytes.size(), stream());
  Graph g;
  ASSERT_NO_THROW(capture(g, stream(), [&] { launch_softmax(x.view, call, buf, stream()); }));

  const HostLogits* inputs[] = {&a, &b, &a};
  const SoftmaxRun* expected[] = {&eager_a, &eager_b, &eager_a};
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    upload(x.buffer.get(), inputs[replay]->bytes.data(), inputs[replay]->bytes.size(), stream());
    buf.out.poison(stream());
    buf.status.poison(stream());
    SOFTK_TEST_CUDA(cudaGraphLaunch(g.exec, stream()));
    const SoftmaxRun got = collect_softmax(x.view, call, buf, stream());
    EXPECT_TRUE(bitwise_equal(got.raw.data(), expected[replay]->raw.data(), got.raw.size(), "graph replay vs eager (probs)"));
    EXPECT_EQ(got.status, expected[replay]->status);
    EXPECT_EQ(got.guard_violation, "");
  }
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxGraph,
                         ::testing::Combine(::testing::Values(SoftmaxImpl::register_resident, SoftmaxImpl::shared_memory, SoftmaxImpl::two_pass,
                                                              SoftmaxImpl::split_k),
                                            ::testing::Values(DType::f32, DType::bf16),
                                            ::testing::Values(GraphShape{4097, 3}, GraphShape{50257, 2},
                                                              GraphShape{(int64_t{1} << 20) + 7, 1})),
                         [](const auto& tpi) {
                           const auto& p = tpi.param;
                           return std::string(impl_name(std::get<0>(p))) + "_" + dtype_name(std::get<1>(p)) + "_V" +
                                  std::to_string(std::get<2>(p).V) + "_R" + std::to_string(std::get<2>(p).rows);
                         });

// ---------------------------------------------------------------------------------------------
// top-k under graph capture. Input B is adversarial (all winners in one thread's stride), so on
// the fused path replay 2 takes the exact fallback and replay 3 the fast path again: the choice
// must be made on the device, not frozen into the graph at capture time. On split-k, B puts
// every winner into the first chunk(s) and A spreads them; the replays run on one workspace, so
// chunk states or merge counters left behind by a replay are caught by the next.

struct TopkGraphCase {
  TopkImpl impl;
  int32_t k;
  int64_t V = 151936;
  int64_t rows = 2;
};
void PrintTo(const TopkGraphCase& c, std::ostream* os) { *os << impl_name(c.impl) << "_K" << c.k << "_V" << c.V << "_R" << c.rows; }

class TopkGraph : public GpuTestWithParam<TopkGraphCase> {};

TEST_P(TopkGraph, ReplaysMatchEagerBitwise) {
  const TopkImpl impl = GetParam().impl;
  const int32_t k = GetParam().k;
  const int64_t V = GetParam().V, rows = GetParam().rows;
  DistParams adversarial;
  adversarial.stride = 128;
  adversarial.count = k;
  const HostLogits a = make_logits(DType::f32, rows, 1, V, Dist::llm_like, {}, {}, 3);
  const HostLogits b = make_logits(DType::f32, rows, 1, V, Dist::adversarial_stride, adversarial, {}, 4);
  DeviceLogits x = to_device(a, stream());
  TopkCall call;
  call.impl = impl;
  call.k = k;
  const TopkRun eager_a = run_topk(x.view, call, stream());
  ASSERT_FALSE(eager_a.refused) << eager_a.error;
  upload(x.buffer.get(), b.bytes.data(), b.bytes.size(), stream());
  const TopkRun eager_b = run_topk(x.view, call, stream());
  ASSERT_FALSE(eager_b.refused) << eager_b.error;

  TopkBuffers buf = make_topk_buffers(x.view, call, stream());
  upload(x.buffer.get(), a.bytes.data(), a.bytes.size(), stream());
  Graph g;
  ASSERT_NO_THROW(capture(g, stream(), [&] { launch_topk(x.view, call, buf, stream()); }));

  const HostLogits* inputs[] = {&a, &b, &a};
  const TopkRun* expected[] = {&eager_a, &eager_b, &eager_a};
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    upload(x.buffer.get(), inputs[replay]->bytes.data(), inputs[replay]->bytes.size(), stream());
    buf.probs.poison(stream());
    buf.indices.poison(stream());
    buf.status.poison(stream());
    SOFTK_TEST_CUDA(cudaGraphLaunch(g.exec, stream()));
    const TopkRun got = collect_topk(x.view, call, buf, stream());
    EXPECT_EQ(got.indices, expected[replay]->indices);
    EXPECT_TRUE(bitwise_equal(got.probs.data(), expected[replay]->probs.data(), got.probs.size() * 4, "graph replay probs"));
    EXPECT_EQ(got.status, expected[replay]->status);
    EXPECT_EQ(got.guard_violation, "");
  }
}

// The first six keep their historical names (V = 151936, rows 2); the long-row cases, where
// split-k cuts a single row into many chunks (and auto should take split-k), add _V and _R.
constexpr int64_t kGraphLongV = (int64_t{1} << 20) + 3;
INSTANTIATE_TEST_SUITE_P(All, TopkGraph,
                         ::testing::Values(TopkGraphCase{TopkImpl::fused, 50}, TopkGraphCase{TopkImpl::fused, 1024},
                                           TopkGraphCase{TopkImpl::automatic, 50},
                                           TopkGraphCase{TopkImpl::automatic, 4096},
                                           TopkGraphCase{TopkImpl::radix_select, 50},
                                           TopkGraphCase{TopkImpl::radix_select, 4096},
                                           TopkGraphCase{TopkImpl::split_k, 1}, TopkGraphCase{TopkImpl::split_k, 50},
                                           TopkGraphCase{TopkImpl::split_k, 1024},
                                           TopkGraphCase{TopkImpl::split_k, 50, kGraphLongV, 1},
                                           TopkGraphCase{TopkImpl::split_k, 1024, kGraphLongV, 1},
                                           TopkGraphCase{TopkImpl::automatic, 50, kGraphLongV, 1}),
                         [](const auto& tpi) {
                           const TopkGraphCase& c = tpi.param;
                           std::string n = std::string(impl_name(c.impl)) + "_K" + std::to_string(c.k);
                           if (c.V != 151936 || c.rows != 2) n += "_V" + std::to_string(c.V) + "_R" + std::to_string(c.rows);
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// Determinism

constexpr int64_t kBatch = 64;
// A multiple of 8, so the row starts on the same 16-byte phase as when it is alone, whatever V
// and dtype: the contract (softmax.hpp) promises batch-independent bits for rows at the same
// phase. A row at another phase is cut into head / vectors / tail differently, so its sum is
// accumulated in another order (equal to rounding, not to the bit).
constexpr int64_t kTargetRow = 40;

/// The target row alone ([1, V]) and the same row at position `target_row` (default 40) of a
/// [batch_rows, V] batch (default 64) whose other rows differ (other distributions and seeds,
/// masked and NaN rows among them). target_row must be a multiple of 8 (same 16-byte phase).
std::pair<HostLogits, HostLogits> alone_and_in_batch(DType dt, int64_t V, int64_t batch_rows = kBatch,
                                                     int64_t target_row = kTargetRow) {
  const auto target = [V](float* x) { fill_row(Dist::llm_like, {}, 77, 0, 1, V, x); };
  HostLogits alone = make_logits_with(dt, 1, 1, V, [&](int64_t, float* x) { target(x); });
  HostLogits batch = make_logits_with(dt, batch_rows, 1, V, [&](int64_t r, float* x) {
    if (r == target_row) return target(x);
    const Dist others[] = {Dist::normal, Dist::heavy_tailed, Dist::llm_like, Dist::pm_inf, Dist::spikes};
    fill_row(others[r % 5], {}, 1000 + static_cast<uint64_t>(r), r, batch_rows, V, x);
    if (r % 7 == 3) std::fill(x, x + V, -kInf);  // fully masked neighbours
    if (r % 11 == 5) x[(r * 7919) % V] = kNaN;   // NaN neighbours
  });
  return {std::move(alone), std::move(batch)};
}

class SoftmaxDeterminism : public GpuTestWithParam<std::tuple<SoftmaxImpl, int64_t>> {};

TEST_P(SoftmaxDeterminism, SameInputTwiceIsBitwiseIdentical) {
  const auto [impl, V] = GetParam();
  const HostLogits h = make_logits(DType::bf16, 8, 1, V, Dist::heavy_tailed);
  const DeviceLogits d = to_device(h, stream());
  SoftmaxCall call;
  call.impl = impl;
  const SoftmaxRun first = run_softmax(d.view, call, stream());
  if (first.refused) GTEST_SKIP() << first.error;
  const SoftmaxRun second = run_softmax(d.view, call, stream());
  EXPECT_TRUE(bitwise_equal(first.raw.data(), second.raw.data(), first.raw.size(), "run 1 vs run 2"));
}

// Forced algorithms: the row's bits must not depend on the rows around it nor on how many
// there are (split-k must not size its chunks by the batch, a warp-per-row kernel must not
// care which lane group the row landed in). `automatic` is not in the list: the contract lets
// it pick another algorithm for another row count (softmax.hpp), agreeing only to rounding.
TEST_P(SoftmaxDeterminism, RowIndependentOfBatch) {
  const auto [impl, V] = GetParam();
  const auto [alone, batch] = alone_and_in_batch(DType::f32, V);
  const DeviceLogits d1 = to_device(alone, stream());
  const DeviceLogits d64 = to_device(batch, stream());
  SoftmaxCall call;
  call.impl = impl;
  const SoftmaxRun one = run_softmax(d1.view, call, stream());
  const SoftmaxRun many = run_softmax(d64.view, call, stream());
  if (one.refused || many.refused) GTEST_SKIP() << one.error << many.error;
  EXPECT_TRUE(bitwise_equal(one.raw.data(), many.raw.data() + kTargetRow * V * 4, static_cast<std::size_t>(V) * 4,
                            "row alone vs row 40 of 64"));
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxDeterminism,
                         ::testing::Combine(::testing::Values(SoftmaxImpl::register_resident, SoftmaxImpl::shared_memory, SoftmaxImpl::two_pass,
                                                              SoftmaxImpl::split_k, SoftmaxImpl::reference),
                                            ::testing::Values(int64_t{1000}, int64_t{32000}, int64_t{151936},
                                                              (int64_t{1} << 20) + 5)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_V" +
                                  std::to_string(std::get<1>(tpi.param));
                         });

class TopkDeterminism : public GpuTestWithParam<std::tuple<TopkImpl, int32_t>> {};

TEST_P(TopkDeterminism, SameInputTwiceIsBitwiseIdentical) {
  const auto [impl, k] = GetParam();
  const HostLogits h = make_logits(DType::bf16, 8, 1, 151936, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  TopkCall call;
  call.impl = impl;
  call.k = k;
  const TopkRun first = run_topk(d.view, call, stream());
  if (first.refused) {
    ASSERT_TRUE(must_refuse(impl, k)) << impl_name(impl) << " refused K=" << k << ": " << first.error;
    GTEST_SKIP() << first.error;
  }
  const TopkRun second = run_topk(d.view, call, stream());
  ASSERT_FALSE(second.refused) << second.error;
  EXPECT_EQ(first.indices, second.indices);
  EXPECT_TRUE(bitwise_equal(first.probs.data(), second.probs.data(), first.probs.size() * 4, "run 1 vs run 2"));
}

// Indices are exact, so they match for every implementation. Probabilities: a forced algorithm
// must give the row the same bits alone and in a batch; `automatic` may pick another algorithm,
// or cut a row into fewer parts, for another row count (topk.hpp: split-k for one row, fused for
// 64; narrower clusters for 16 rows of 128256, 6 CTAs on an H200, where one row takes 16), so
// its probabilities must agree to the f32 tolerance, and its indices still exactly.
TEST_P(TopkDeterminism, RowIndependentOfBatch) {
  const auto [impl, k] = GetParam();
  struct Batch { int64_t V, rows, target_row; };
  for (const Batch b : {Batch{151936, kBatch, kTargetRow}, Batch{128256, 16, 9}}) {
    SCOPED_TRACE("V=" + std::to_string(b.V) + ", row " + std::to_string(b.target_row) + " of " + std::to_string(b.rows));
    const auto [alone, batch] = alone_and_in_batch(DType::f32, b.V, b.rows, b.target_row);
    const DeviceLogits d1 = to_device(alone, stream());
    const DeviceLogits dn = to_device(batch, stream());
    TopkCall call;
    call.impl = impl;
    call.k = k;
    const TopkRun one = run_topk(d1.view, call, stream());
    const TopkRun many = run_topk(dn.view, call, stream());
    if (one.refused || many.refused) {
      ASSERT_TRUE(must_refuse(impl, k) && one.refused && many.refused) << one.error << many.error;
      GTEST_SKIP() << one.error;
    }
    const std::size_t at = static_cast<std::size_t>(b.target_row * k);
    EXPECT_TRUE(std::equal(one.indices.begin(), one.indices.end(), many.indices.begin() + at));
    if (impl == TopkImpl::automatic) {
      const Tolerance tol = prob_tolerance(DType::f32);
      for (int32_t j = 0; j < k; ++j)
        EXPECT_TRUE(within(many.probs[at + j], one.probs[static_cast<std::size_t>(j)], tol))
            << "slot " << j << ": alone " << one.probs[static_cast<std::size_t>(j)] << ", in batch "
            << many.probs[at + j];
      continue;
    }
    EXPECT_TRUE(bitwise_equal(one.probs.data(), many.probs.data() + at, static_cast<std::size_t>(k) * 4,
                              "row alone vs in the batch"));
  }
}

INSTANTIATE_TEST_SUITE_P(All, TopkDeterminism,
                         ::testing::Combine(::testing::Values(TopkImpl::automatic, TopkImpl::fused, TopkImpl::radix_select,
                                                              TopkImpl::split_k, TopkImpl::reference),
                                            ::testing::Values(1, 50, 1024, 4096)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_K" +
                                  std::to_string(std::get<1>(tpi.param));
                         });

// ---------------------------------------------------------------------------------------------
// Determinism of split-k on long rows, where a row is cut into many chunks: the merge must not
// depend on which chunk finishes first or last (a single-launch merge by the last CTA to arrive
// is the classic way to lose that), nor, for forced split_k, the chunking on the batch
// (`automatic` chunks by the batch, within tolerance). The input for repeated runs
// is bf16 N(0, 3^2): after quantisation thousands of tokens tie, in every chunk.

constexpr int64_t kLongV = (int64_t{1} << 22) + 5;
constexpr int kRepeats = 4;

class TopkSplitKRepeatable : public GpuTestWithParam<std::tuple<TopkImpl, int32_t>> {};

TEST_P(TopkSplitKRepeatable, RepeatedRunsAreBitwiseIdentical) {
  const auto [impl, k] = GetParam();
  const HostLogits h = make_logits(DType::bf16, 2, 1, kLongV, Dist::normal, {}, {}, 91);
  const DeviceLogits d = to_device(h, stream());
  TopkCall call;
  call.impl = impl;
  call.k = k;
  const TopkRun first = run_topk(d.view, call, stream());
  ASSERT_FALSE(first.refused) << first.error;
  for (int run = 1; run < kRepeats; ++run) {
    SCOPED_TRACE("run " + std::to_string(run + 1));
    const TopkRun again = run_topk(d.view, call, stream());
    ASSERT_FALSE(again.refused) << again.error;
    EXPECT_EQ(again.indices, first.indices);
    EXPECT_TRUE(bitwise_equal(again.probs.data(), first.probs.data(), first.probs.size() * 4, "run n vs run 1"));
    EXPECT_EQ(again.status, first.status);
  }
}

INSTANTIATE_TEST_SUITE_P(All, TopkSplitKRepeatable,
                         ::testing::Combine(::testing::Values(TopkImpl::split_k, TopkImpl::automatic),
                                            ::testing::Values(1, 50, 1024)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_K" +
                                  std::to_string(std::get<1>(tpi.param));
                         });

// A 2^20+3 row alone and as row 8 of 16 (8 x V x 4 bytes: the same 16-byte phase), forced
// split_k: the chunking must come from V (and the device), never from the row count.
class TopkSplitKBatchInvariance : public GpuTestWithParam<int32_t> {};

TEST_P(TopkSplitKBatchInvariance, LongRowIndependentOfBatch) {
  const int32_t k = GetParam();
  const int64_t V = (int64_t{1} << 20) + 3, batch_rows = 16, target = 8;
  const auto [alone, batch] = alone_and_in_batch(DType::f32, V, batch_rows, target);
  const DeviceLogits d1 = to_device(alone, stream());
  const DeviceLogits dn = to_device(batch, stream());
  TopkCall call;
  call.impl = TopkImpl::split_k;
  call.k = k;
  const TopkRun one = run_topk(d1.view, call, stream());
  const TopkRun many = run_topk(dn.view, call, stream());
  ASSERT_FALSE(one.refused) << one.error;
  ASSERT_FALSE(many.refused) << many.error;
  EXPECT_TRUE(std::equal(one.indices.begin(), one.indices.end(), many.indices.begin() + target * k));
  EXPECT_TRUE(bitwise_equal(one.probs.data(), many.probs.data() + target * k, static_cast<std::size_t>(k) * 4,
                            "row alone vs row 8 of 16"));
}

INSTANTIATE_TEST_SUITE_P(All, TopkSplitKBatchInvariance, ::testing::Values(1, 50, 1024),
                         [](const auto& tpi) { return "split_k_K" + std::to_string(tpi.param); });

}  // namespace
