// How an inference server embeds softk: size the workspace once for the largest shape, then
// every decode step is one stream-ordered op with no allocation and no host sync, so the whole
// step can be captured once in a CUDA graph and replayed.
//
//   ./decode_loop [batch=8] [vocab=128256] [k=50] [steps=100]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "softk/softk.hpp"

#define CHECK(call)                                                                       \
  do {                                                                                    \
    const cudaError_t status = (call);                                                    \
    if (status != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(status));        \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 8;
  const int64_t vocab = argc > 2 ? std::atoll(argv[2]) : 128256;
  const int32_t k = argc > 3 ? std::atoi(argv[3]) : 50;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 100;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("decode_loop: no CUDA device; nothing to show (the sampler CLI has a CPU backend)\n");
    return 0;
  }

  // The model would write its logits here every step; fill them once with something peaked.
  std::vector<float> host(static_cast<std::size_t>(batch * vocab));
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 100.0f;
  float* logits = nullptr;
  float* probs = nullptr;
  int32_t* indices = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&logits), host.size() * sizeof(float)));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&probs), static_cast<std::size_t>(batch * k) * sizeof(float)));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&indices), static_cast<std::size_t>(batch * k) * sizeof(int32_t)));
  CHECK(cudaMemcpy(logits, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));

  const softk::LogitsView view{logits, softk::DType::f32, batch, 1, vocab, vocab};
  softk::TopkOptions options;
  options.temperature = 0.8f;

  try {
    // Once, at start-up: the workspace for the largest shape this loop will see.
    const std::size_t workspace_bytes = softk::topk_workspace_size(view, k, options);
    void* workspace = nullptr;
    if (workspace_bytes) CHECK(cudaMalloc(&workspace, workspace_bytes));

    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    // One step outside the graph first: CUDA loads each kernel on its first launch, waiting for
    // the device to go idle (README, "Lazy loading"), and start-up is the place for that wait.
    softk::topk(view, k, probs, indices, options, workspace, workspace_bytes, stream);
    CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph;
    cudaGraphExec_t step;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    softk::topk(view, k, probs, indices, options, workspace, workspace_bytes, stream);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&step, graph, 0));

    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(cudaEventRecord(start, stream));
    for (int s = 0; s < steps; ++s) CHECK(cudaGraphLaunch(step, stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));

    std::vector<int32_t> top(static_cast<std::size_t>(k));
    std::vector<float> top_probs(static_cast<std::size_t>(k));
    CHECK(cudaMemcpy(top.data(), indices, top.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(top_probs.data(), probs, top_probs.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::printf("batch %lld, V %lld, k %d: %.2f us per step (graph replay, %d steps)\n", static_cast<long long>(batch),
                static_cast<long long>(vocab), k, 1000.0f * ms / steps, steps);
    for (int j = 0; j < 5 && j < k; ++j) std::printf("  row 0 rank %d: token %d p=%.5f\n", j, top[j], top_probs[j]);

    CHECK(cudaGraphExecDestroy(step));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaStreamDestroy(stream));
    CHECK(cudaFree(workspace));
  } catch (const softk::Error& e) {
    std::fprintf(stderr, "decode_loop: %s\n", e.what());
    return 2;
  }
  CHECK(cudaFree(logits));
  CHECK(cudaFree(probs));
  CHECK(cudaFree(indices));
  return 0;
}
