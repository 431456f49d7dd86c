// The GPU ops' host path allocates nothing once warm: a decode loop calls an op thousands of times
// a second, and every heap allocation there (a message built for a check that passes, a
// container) is host time a call. Each case makes its first call outside the count (what a
// process does once: the device's attributes and the cluster limits cached, kernels opted in to
// their shared memory), then counts three calls and the workspace query. The shapes spread over
// the dispatcher's families (on an H100 or H200: the one-cluster kernels at batch 1, split-k's two
// launches at 1 x 256000 K = 1 and 1 x 4M, the fused kernel at 256 rows and a warp a row at 512 x
// 1000, the radix select past K = 1024, and the softmax kernels), and forced split-k.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/counting_new.hpp"
#include "common/gpu.hpp"
#include "common/inputs.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"

namespace {

using namespace softk_test;
using softk::DType;

struct HostPathCase {
  const char* name;
  DType dtype;
  int64_t rows, V;
  int32_t k;  ///< 0: softmax
  softk::TopkAlgorithm topk_algorithm = softk::TopkAlgorithm::automatic;
};
void PrintTo(const HostPathCase& c, std::ostream* os) { *os << c.name; }

class HostAllocationGpu : public GpuTestWithParam<HostPathCase> {};

TEST_P(HostAllocationGpu, WarmCallsAllocateNothing) {
  const HostPathCase& c = GetParam();
  const HostLogits host = make_logits(c.dtype, c.rows, 1, c.V, Dist::llm_like);
  DeviceBuffer logits(host.bytes.size());
  upload(logits.get(), host.bytes.data(), host.bytes.size(), stream());
  const softk::LogitsView view = host.view_at(logits.get());
  DeviceBuffer status(static_cast<std::size_t>(c.rows) * sizeof(int32_t));

  std::function<void()> call;
  std::function<std::size_t()> query;
  DeviceBuffer out, indices, workspace;
  softk::TopkOptions topk_options;
  topk_options.algorithm = c.topk_algorithm;
  topk_options.row_status = status.as<int32_t>();
  softk::SoftmaxOptions softmax_options;
  softmax_options.row_status = status.as<int32_t>();
  if (c.k > 0) {
    query = [&] { return softk::topk_workspace_size(view, c.k, topk_options); };
    workspace = DeviceBuffer(query());
    out = DeviceBuffer(static_cast<std::size_t>(c.rows * c.k) * sizeof(float));
    indices = DeviceBuffer(static_cast<std::size_t>(c.rows * c.k) * sizeof(int32_t));
    call = [&] {
      softk::topk(view, c.k, out.as<float>(), indices.as<int32_t>(), topk_options, workspace.get(), workspace.bytes(),
                  stream());
    };
  } else {
    query = [&] { return softk::softmax_workspace_size(view, softmax_options); };
    workspace = DeviceBuffer(query());
    out = DeviceBuffer(static_cast<std::size_t>(c.rows * c.V) * sizeof(float));
    call = [&] { softk::softmax(view, out.get(), softmax_options, workspace.get(), workspace.bytes(), stream()); };
  }
  call();
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream()));

  EXPECT_EQ(heap_allocations_during([&] {
              (void)query();
              for (int i = 0; i < 3; ++i) call();
            }),
            0);
  SOFTK_TEST_CUDA(cudaStreamSynchronize(stream()));
  SOFTK_TEST_CUDA(cudaGetLastError());
}

const HostPathCase kHostPathCases[] = {
    {"topk_1x128256_bf16_K50", DType::bf16, 1, 128256, 50},
    {"topk_1x32000_f32_K1", DType::f32, 1, 32000, 1},
    {"topk_1x128256_f32_K256", DType::f32, 1, 128256, 256},
    {"topk_1x256000_f32_K1", DType::f32, 1, 256000, 1},
    {"topk_1x4M_f32_K50", DType::f32, 1, int64_t{1} << 22, 50},
    {"topk_split_k_3x100000_f16_K16", DType::f16, 3, 100000, 16, softk::TopkAlgorithm::split_k},
    {"topk_256x32000_f32_K50", DType::f32, 256, 32000, 50},
    {"topk_256x32000_bf16_K1024", DType::bf16, 256, 32000, 1024},
    {"topk_512x1000_f32_K8", DType::f32, 512, 1000, 8},
    {"topk_2x32000_f32_K4096", DType::f32, 2, 32000, 4096},
    {"softmax_1x128256_f32", DType::f32, 1, 128256, 0},
    {"softmax_256x32000_bf16", DType::bf16, 256, 32000, 0},
    {"softmax_2x4M_f32", DType::f32, 2, int64_t{1} << 22, 0},
};

INSTANTIATE_TEST_SUITE_P(Ops, HostAllocationGpu, ::testing::ValuesIn(kHostPathCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
