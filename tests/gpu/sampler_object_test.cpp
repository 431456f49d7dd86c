// softk::Sampler (softk/sampler.hpp) on the GPU: within its limits its calls write the free
// functions' bits (their runs in exactly sized workspaces), for smaller batches and every K up
// to max_k, the nucleus and ranked forms of sample included; past its limits a call is refused
// naming the limit and writes nothing; a decode step through it replays in a CUDA graph; and a
// Sampler moves.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/bad_arguments.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/runners.hpp"
#include "softk/sampler.hpp"

namespace {

using namespace softk_test;
using softk::DType;

class GpuSampler : public GpuTest {
 protected:
  static softk::SamplerLimits limits() {
    softk::SamplerLimits l;
    l.dtype = DType::bf16;
    l.vocab = 32000;
    l.max_rows = 16;
    l.max_k = 64;
    return l;
  }
};

/// softk::sample's tokens in an exactly sized workspace.
std::vector<int32_t> free_sample(const softk::LogitsView& v, const softk::SamplingParams& params, cudaStream_t stream) {
  DeviceBuffer workspace(softk::sample_workspace_size(v, params));
  DeviceBuffer tokens(static_cast<std::size_t>(v.rows()) * sizeof(int32_t));
  softk::sample(v, params, tokens.as<int32_t>(), nullptr, workspace.get(), workspace.bytes(), stream);
  return download<int32_t>(tokens.get(), static_cast<std::size_t>(v.rows()), stream);
}

std::vector<int32_t> sampler_sample(const softk::Sampler& sampler, const softk::LogitsView& v,
                                    const softk::SamplingParams& params, cudaStream_t stream) {
  DeviceBuffer tokens(static_cast<std::size_t>(v.rows()) * sizeof(int32_t));
  sampler.sample(v, params, tokens.as<int32_t>(), nullptr, stream);
  return download<int32_t>(tokens.get(), static_cast<std::size_t>(v.rows()), stream);
}

/// sampler.topk's output against softk::topk's in an exactly sized workspace.
void expect_topk_matches(const softk::Sampler& sampler, const softk::LogitsView& v, int32_t k, cudaStream_t stream) {
  TopkCall call;
  call.k = k;
  const TopkRun expected = run_topk(v, call, stream);
  ASSERT_FALSE(expected.refused) << expected.error;
  TopkBuffers b = make_topk_buffers(v, call, stream);
  sampler.topk(v, k, b.probs.as<float>(), b.indices.as<int32_t>(), options_of(call, b.status.as<int32_t>()), stream);
  const TopkRun got = collect_topk(v, call, b, stream);
  EXPECT_EQ(got.indices, expected.indices) << "K=" << k;
  EXPECT_TRUE(bitwise_equal(got.probs.data(), expected.probs.data(), got.probs.size() * sizeof(float), "probs"))
      << "K=" << k;
  EXPECT_EQ(got.guard_violation, "");
}

TEST_F(GpuSampler, CallsWithinTheLimitsWriteTheFreeFunctionsBits) {
  const auto made = std::chrono::steady_clock::now();
  const softk::Sampler sampler(limits());
  std::printf("softk::Sampler of %lld rows x %lld, max_k %d: %zu bytes, sized and allocated in %.1f ms\n",
              static_cast<long long>(limits().max_rows), static_cast<long long>(limits().vocab), limits().max_k,
              sampler.workspace_bytes(),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - made).count());
  const HostLogits h = make_logits(DType::bf16, 16, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  for (int64_t rows : {1, 5, 16}) {
    softk::LogitsView v = d.view;
    v.batch = rows;
    SCOPED_TRACE(std::to_string(rows) + " rows");
    for (int32_t k : {1, 50, 64}) {
      expect_topk_matches(sampler, v, k, stream());
      softk::SamplingParams params;
      params.top_k = k;
      params.top_p = 0.9f;
      params.seed = 11;
      EXPECT_EQ(sampler_sample(sampler, v, params, stream()), free_sample(v, params, stream())) << "top_k " << k;
    }
    softk::SamplingParams nucleus;
    nucleus.top_p = 0.8f;
    nucleus.min_p = 0.01f;
    EXPECT_EQ(sampler_sample(sampler, v, nucleus, stream()), free_sample(v, nucleus, stream())) << "no top_k";

    SoftmaxCall softmax_call;
    const SoftmaxRun expected = run_softmax(v, softmax_call, stream());
    ASSERT_FALSE(expected.refused) << expected.error;
    SoftmaxBuffers b = make_softmax_buffers(v, softmax_call, stream());
    sampler.softmax(v, b.out.get(), options_of(softmax_call, b.status.as<int32_t>()), stream());
    const SoftmaxRun got = collect_softmax(v, softmax_call, b, stream());
    EXPECT_TRUE(bitwise_equal(got.raw.data(), expected.raw.data(), got.raw.size(), "softmax"));
  }
}

// max_k = V: topk past 1024 (radix select), sample with no top_k or top_k = V (the nucleus
// kernel) and per-row top_ks under no scalar bound (the whole row ranked): the workspace sized
// when made holds every one, at the largest batch and a smaller one.
TEST_F(GpuSampler, AWholeRowLimitHoldsEveryCall) {
  softk::SamplerLimits whole_rows;
  whole_rows.dtype = DType::f32;
  whole_rows.vocab = 4096;
  whole_rows.max_rows = 8;
  whole_rows.max_k = 4096;
  const auto made = std::chrono::steady_clock::now();
  const softk::Sampler sampler(whole_rows);
  std::printf("softk::Sampler of 8 rows x 4096, max_k 4096: %zu bytes, sized and allocated in %.1f ms\n",
              sampler.workspace_bytes(),
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - made).count());
  const HostLogits h = make_logits(DType::f32, 8, 1, 4096, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  DeviceBuffer top_ks(8 * sizeof(int32_t));
  const std::vector<int32_t> row_top_ks{0, 4096, 7, 3000, 1025, 1, 4095, 0};
  upload(top_ks.get(), row_top_ks.data(), top_ks.bytes(), stream());
  for (int64_t rows : {8, 3}) {
    softk::LogitsView v = d.view;
    v.batch = rows;
    SCOPED_TRACE(std::to_string(rows) + " rows");
    for (int32_t k : {1024, 1025, 4096}) expect_topk_matches(sampler, v, k, stream());
    softk::SamplingParams per_row;
    per_row.top_ks = top_ks.as<int32_t>();
    per_row.top_p = 0.95f;
    softk::SamplingParams all_of_v;
    all_of_v.top_k = 4096;
    all_of_v.min_p = 0.001f;
    for (const softk::SamplingParams& params : {per_row, all_of_v, softk::SamplingParams{}})
      EXPECT_EQ(sampler_sample(sampler, v, params, stream()), free_sample(v, params, stream()));
  }
}

TEST_F(GpuSampler, CallsPastTheLimitsAreRefusedNamingThem) {
  const softk::Sampler sampler(limits());
  const HostLogits h = make_logits(DType::bf16, 17, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  GuardedOutput tokens(17 * sizeof(int32_t), stream());
  const auto sample = [&](const softk::LogitsView& v, const softk::SamplingParams& p) {
    sampler.sample(v, p, tokens.as<int32_t>(), nullptr, stream());
  };
  softk::SamplingParams top_k_50;
  top_k_50.top_k = 50;
  EXPECT_TRUE(throws_error_naming([&] { sample(d.view, top_k_50); }, {"limits.max_rows", "16", "17"}));
  softk::LogitsView fewer = d.view;
  fewer.batch = 4;
  softk::SamplingParams top_k_65;
  top_k_65.top_k = 65;
  EXPECT_TRUE(throws_error_naming([&] { sample(fewer, top_k_65); }, {"limits.max_k", "64", "65"}));
  const DeviceBuffer top_ks(4 * sizeof(int32_t));
  softk::SamplingParams unbounded_rows;
  unbounded_rows.top_ks = top_ks.as<int32_t>();
  EXPECT_TRUE(throws_error_naming([&] { sample(fewer, unbounded_rows); }, {"params.top_ks", "limits.max_k"}));
  softk::LogitsView narrower = fewer;
  narrower.vocab = 31999;
  narrower.row_stride = 32000;
  EXPECT_TRUE(throws_error_naming([&] { sample(narrower, top_k_50); }, {"limits.vocab", "32000", "31999"}));
  softk::LogitsView as_f16 = fewer;
  as_f16.dtype = DType::f16;
  EXPECT_TRUE(throws_error_naming([&] { sample(as_f16, top_k_50); }, {"limits.dtype", "bf16", "f16"}));
  DeviceBuffer probs(4 * 65 * sizeof(float)), indices(4 * 65 * sizeof(int32_t));
  EXPECT_TRUE(throws_error_naming(
      [&] { sampler.topk(fewer, 65, probs.as<float>(), indices.as<int32_t>(), {}, stream()); },
      {"k", "limits.max_k", "65"}));
  EXPECT_TRUE(tokens.untouched(stream())) << "a refused call wrote tokens";
}

// A decode step, top-k then a draw, captured once and replayed: the Sampler's calls allocate
// nothing and synchronise nothing.
TEST_F(GpuSampler, ADecodeStepReplaysInACudaGraph) {
  const softk::Sampler sampler(limits());
  const HostLogits h = make_logits(DType::bf16, 8, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  DeviceBuffer probs(8 * 50 * sizeof(float)), indices(8 * 50 * sizeof(int32_t)), tokens(8 * sizeof(int32_t));
  softk::SamplingParams params;
  params.top_k = 50;
  params.top_p = 0.95f;
  const auto step = [&] {
    sampler.topk(d.view, 50, probs.as<float>(), indices.as<int32_t>(), {}, stream());
    sampler.sample(d.view, params, tokens.as<int32_t>(), nullptr, stream());
  };
  step();
  const std::vector<int32_t> eager_tokens = download<int32_t>(tokens.get(), 8, stream());
  const std::vector<int32_t> eager_indices = download<int32_t>(indices.get(), 8 * 50, stream());
  cudaGraph_t graph = nullptr;
  SOFTK_TEST_CUDA(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
  step();
  SOFTK_TEST_CUDA(cudaStreamEndCapture(stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  SOFTK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    SOFTK_TEST_CUDA(cudaMemsetAsync(tokens.get(), 0x7B, tokens.bytes(), stream()));
    SOFTK_TEST_CUDA(cudaMemsetAsync(indices.get(), 0x7B, indices.bytes(), stream()));
    SOFTK_TEST_CUDA(cudaGraphLaunch(exec, stream()));
    EXPECT_EQ(download<int32_t>(tokens.get(), 8, stream()), eager_tokens) << "replay " << replay;
    EXPECT_EQ(download<int32_t>(indices.get(), 8 * 50, stream()), eager_indices) << "replay " << replay;
  }
  SOFTK_TEST_CUDA(cudaGraphExecDestroy(exec));
  SOFTK_TEST_CUDA(cudaGraphDestroy(graph));
}

TEST_F(GpuSampler, AMovedSamplerKeepsItsWorkspace) {
  softk::Sampler first(limits());
  const std::size_t bytes = first.workspace_bytes();
  softk::Sampler second(std::move(first));
  EXPECT_EQ(second.workspace_bytes(), bytes);
  EXPECT_EQ(first.workspace_bytes(), 0u);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  const HostLogits h = make_logits(DType::bf16, 2, 1, 32000, Dist::llm_like);
  const DeviceLogits d = to_device(h, stream());
  softk::SamplingParams params;
  params.top_k = 20;
  EXPECT_EQ(sampler_sample(second, d.view, params, stream()), free_sample(d.view, params, stream()));
  first = std::move(second);
  EXPECT_EQ(first.workspace_bytes(), bytes);
  EXPECT_EQ(sampler_sample(first, d.view, params, stream()), free_sample(d.view, params, stream()));
}

}  // namespace
