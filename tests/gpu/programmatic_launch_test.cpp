// Programmatic dependent launch (softk::TopkOptions::programmatic_launch, on by default;
// src/kernels/kernel_launch.hpp). A programmatically launched kernel may be scheduled while the
// kernel before it is still running; it must wait before touching memory. The test chains two
// ops so that the second reads what the first writes, with nothing but stream order between
// them: softmax(logits) -> X, then top-k over X as logits. X is poisoned with NaN first, so a
// top-k kernel that read X before the softmax finished sees NaN rows. Each chain runs with
// programmatic launches off, then on (eagerly, and captured in a CUDA graph, where they become
// programmatic edges), and all must agree bit for bit with no NaN rows. The softmax is large
// enough (tens of microseconds) that an early read would land inside it. The chains reach the
// fused kernel, split-k's one-cluster form, and the two-launch split-k: its merge is always
// programmatic on sm_90+, and its chunks are where they are more than one block an SM (each
// kind: 264 one-read argmax chunks a row of 2^22+3 at K = 1; at K = 50 257 binned chunks a row
// of 2^20+3 and 163 span chunks a row of 2^22+3; 132 SMs). Before sm_90 the option is ignored and
// the chains still run.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "common/runners.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace {

using namespace softk_test;
using softk::DType;

struct Chain {
  const char* name;
  int64_t rows, V;
  softk::SoftmaxAlgorithm softmax;
  softk::TopkAlgorithm topk;
  int32_t k;
};
void PrintTo(const Chain& c, std::ostream* os) { *os << c.name; }

struct ChainResult {
  std::vector<float> probs;
  std::vector<int32_t> indices, status;
};

class ProgrammaticLaunch : public GpuTestWithParam<Chain> {};

TEST_P(ProgrammaticLaunch, ChainedOpsSeeEachOthersWrites) {
  const Chain& c = GetParam();
  const HostLogits h = make_logits(DType::f32, c.rows, 1, c.V, Dist::llm_like);
  const DeviceLogits logits = to_device(h, stream());
  DeviceBuffer x(static_cast<std::size_t>(c.rows * c.V) * sizeof(float));
  softk::LogitsView x_view = logits.view;
  x_view.data = x.get();
  x_view.dtype = DType::f32;
  x_view.row_stride = 0;

  const std::size_t n = static_cast<std::size_t>(c.rows) * static_cast<std::size_t>(c.k);
  DeviceBuffer probs(n * sizeof(float)), indices(n * sizeof(int32_t)),
      status(static_cast<std::size_t>(c.rows) * sizeof(int32_t));
  softk::SoftmaxOptions so;
  so.algorithm = c.softmax;
  softk::TopkOptions to;
  to.algorithm = c.topk;
  to.row_status = status.as<int32_t>();
  DeviceBuffer softmax_ws(softk::softmax_workspace_size(logits.view, so));
  DeviceBuffer topk_ws(softk::topk_workspace_size(x_view, c.k, to));

  const auto chain = [&](bool programmatic) {
    to.programmatic_launch = programmatic;
    SOFTK_TEST_CUDA(cudaMemsetAsync(x.get(), 0xFF, x.bytes(), stream()));  // NaN everywhere
    softk::softmax(logits.view, x.get(), so, softmax_ws.get(), softmax_ws.bytes(), stream());
    softk::topk(x_view, c.k, probs.as<float>(), indices.as<int32_t>(), to, topk_ws.get(), topk_ws.bytes(), stream());
  };
  const auto collect = [&] {
    SOFTK_TEST_CUDA(cudaStreamSynchronize(stream()));
    return ChainResult{download<float>(probs.get(), n, stream()), download<int32_t>(indices.get(), n, stream()),
                       download<int32_t>(status.get(), static_cast<std::size_t>(c.rows), stream())};
  };

  chain(false);
  const ChainResult ordinary = collect();
  for (int64_t r = 0; r < c.rows; ++r)
    ASSERT_EQ(ordinary.status[r], static_cast<int32_t>(softk::RowStatus::ok)) << "row " << r << " without PDL";

  for (int round = 0; round < 3; ++round) {  // a race may lose only now and then
    chain(true);
    const ChainResult eager = collect();
    EXPECT_EQ(eager.status, ordinary.status) << "round " << round << ": a top-k read X before the softmax wrote it";
    EXPECT_EQ(eager.indices, ordinary.indices) << "round " << round;
    EXPECT_EQ(0, std::memcmp(eager.probs.data(), ordinary.probs.data(), n * sizeof(float))) << "round " << round;
  }

  cudaGraph_t graph = nullptr;
  SOFTK_TEST_CUDA(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeGlobal));
  chain(true);
  SOFTK_TEST_CUDA(cudaStreamEndCapture(stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  SOFTK_TEST_CUDA(instantiated);
  for (int replay = 0; replay < 3; ++replay) {
    SOFTK_TEST_CUDA(cudaMemsetAsync(probs.get(), 0, probs.bytes(), stream()));
    SOFTK_TEST_CUDA(cudaGraphLaunch(exec, stream()));
    const ChainResult replayed = collect();
    EXPECT_EQ(replayed.status, ordinary.status) << "graph replay " << replay;
    EXPECT_EQ(replayed.indices, ordinary.indices) << "graph replay " << replay;
    EXPECT_EQ(0, std::memcmp(replayed.probs.data(), ordinary.probs.data(), n * sizeof(float))) << "graph replay " << replay;
  }
  (void)cudaGraphExecDestroy(exec);
}

using SA = softk::SoftmaxAlgorithm;
using TA = softk::TopkAlgorithm;
INSTANTIATE_TEST_SUITE_P(
    All, ProgrammaticLaunch,
    ::testing::Values(Chain{"two_pass_then_fused", 256, 128256, SA::two_pass, TA::fused, 50},
                      Chain{"two_pass_then_cluster_split_k", 64, 128256, SA::two_pass, TA::split_k, 50},
                      Chain{"register_then_fused", 4096, 4097, SA::register_resident, TA::fused, 16},
                      Chain{"split_k_then_two_launch_split_k", 2, (int64_t{1} << 22) + 3, SA::split_k, TA::split_k, 256},
                      Chain{"split_k_then_argmax_chunks", 2, (int64_t{1} << 22) + 3, SA::split_k, TA::split_k, 1},
                      Chain{"split_k_then_binned_chunks", 2, (int64_t{1} << 20) + 3, SA::split_k, TA::split_k, 50},
                      Chain{"split_k_then_span_chunks", 1, (int64_t{1} << 22) + 3, SA::split_k, TA::split_k, 50},
                      Chain{"auto_then_auto", 1, 128256, SA::automatic, TA::automatic, 50}),
    [](const ::testing::TestParamInfo<Chain>& info) { return std::string(info.param.name); });

}  // namespace
