// Stream/graph and determinism contracts of softk::softmax and softk::topk:
//  - CUDA graph: the op captured on a stream (global capture mode, which rejects any allocation
//    or host synchronisation inside it) and replayed; each replay is bitwise identical to an
//    eager run on the same input. The input buffer is refilled between replays (A, B, A), so an
//    op that bakes data-dependent host decisions into the graph, or leaves state in its
//    workspace (split-k counters) that the next replay trips over, is caught. Outputs are
//    re-poisoned before every replay, so a replay that skips a write is caught too.
//  - Determinism: the same input twice gives the same bits; a row gives the same bits whether it
//    is alone (batch 1) or row 40 of a batch of 64 (same 16-byte phase) with other rows around it.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

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
// must be made on the device, not frozen into the graph at capture time.

class TopkGraph : public GpuTestWithParam<std::tuple<TopkImpl, int32_t>> {};

TEST_P(TopkGraph, ReplaysMatchEagerBitwise) {
  const auto [impl, k] = GetParam();
  const int64_t V = 151936, rows = 2;
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

INSTANTIATE_TEST_SUITE_P(All, TopkGraph,
                         ::testing::Values(std::make_tuple(TopkImpl::fused, 50), std::make_tuple(TopkImpl::fused, 1024),
                                           std::make_tuple(TopkImpl::automatic, 50),
                                           std::make_tuple(TopkImpl::automatic, 4096),
                                           std::make_tuple(TopkImpl::radix_select, 50),
                                           std::make_tuple(TopkImpl::radix_select, 4096)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_K" +
                                  std::to_string(std::get<1>(tpi.param));
                         });

// ---------------------------------------------------------------------------------------------
// Determinism

constexpr int64_t kBatch = 64;
// A multiple of 8, so the row starts on the same 16-byte phase as when it is alone, whatever V
// and dtype: the contract (softmax.hpp) promises batch-independent bits for rows at the same
// phase. A row at another phase is cut into head / vectors / tail differently, so its sum is
// accumulated in another order (equal to rounding, not to the bit).
constexpr int64_t kTargetRow = 40;

/// The target row alone ([1, V]) and the same row at position 40 of a [64, V] batch whose other
/// rows differ (other distributions and seeds, masked and NaN rows among them).
std::pair<HostLogits, HostLogits> alone_and_in_batch(DType dt, int64_t V) {
  const auto target = [V](float* x) { fill_row(Dist::llm_like, {}, 77, 0, 1, V, x); };
  HostLogits alone = make_logits_with(dt, 1, 1, V, [&](int64_t, float* x) { target(x); });
  HostLogits batch = make_logits_with(dt, kBatch, 1, V, [&](int64_t r, float* x) {
    if (r == kTargetRow) return target(x);
    const Dist others[] = {Dist::normal, Dist::heavy_tailed, Dist::llm_like, Dist::pm_inf, Dist::spikes};
    fill_row(others[r % 5], {}, 1000 + static_cast<uint64_t>(r), r, kBatch, V, x);
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
  if (first.refused) GTEST_SKIP() << first.error;
  const TopkRun second = run_topk(d.view, call, stream());
  EXPECT_EQ(first.indices, second.indices);
  EXPECT_TRUE(bitwise_equal(first.probs.data(), second.probs.data(), first.probs.size() * 4, "run 1 vs run 2"));
}

TEST_P(TopkDeterminism, RowIndependentOfBatch) {
  const auto [impl, k] = GetParam();
  const int64_t V = 151936;
  const auto [alone, batch] = alone_and_in_batch(DType::f32, V);
  const DeviceLogits d1 = to_device(alone, stream());
  const DeviceLogits d64 = to_device(batch, stream());
  TopkCall call;
  call.impl = impl;
  call.k = k;
  const TopkRun one = run_topk(d1.view, call, stream());
  const TopkRun many = run_topk(d64.view, call, stream());
  if (one.refused || many.refused) GTEST_SKIP() << one.error << many.error;
  EXPECT_TRUE(std::equal(one.indices.begin(), one.indices.end(), many.indices.begin() + kTargetRow * k));
  EXPECT_TRUE(bitwise_equal(one.probs.data(), many.probs.data() + kTargetRow * k, static_cast<std::size_t>(k) * 4,
                            "row alone vs row 40 of 64"));
}

INSTANTIATE_TEST_SUITE_P(All, TopkDeterminism,
                         ::testing::Combine(::testing::Values(TopkImpl::automatic, TopkImpl::fused, TopkImpl::radix_select,
                                                              TopkImpl::reference),
                                            ::testing::Values(1, 50, 1024, 4096)),
                         [](const auto& tpi) {
                           return std::string(impl_name(std::get<0>(tpi.param))) + "_K" +
                                  std::to_string(std::get<1>(tpi.param));
                         });

}  // namespace
