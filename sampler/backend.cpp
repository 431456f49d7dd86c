#include "backend.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "error.hpp"
#include "softk/cpu.hpp"

namespace sampler {
namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(status));
}

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  void softmax(const softk::LogitsView& chunk, float* probs, int32_t* row_status,
               softk::SoftmaxOptions options) override {
    options.row_status = row_status;
    softk::cpu::softmax(chunk, probs, options);
  }

  void topk(const softk::LogitsView& chunk, int32_t k, float* values, int32_t* indices, int32_t* row_status,
            softk::TopkOptions options) override {
    options.row_status = row_status;
    softk::cpu::topk(chunk, k, values, indices, options);
  }

  void sample(const softk::LogitsView& chunk, const softk::SamplingParams& params, int32_t* tokens,
              int32_t* row_status) override {
    softk::cpu::sample(chunk, params, tokens, row_status);
  }
};

/// Device memory that only grows: the first chunk of a run is its largest, so every later
/// chunk reuses the first allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// At least `bytes` bytes of device memory (null for 0 bytes).
  void* reserve(std::size_t bytes) {
    if (bytes > bytes_) {
      check_cuda(cudaFree(data_), "cudaFree");
      data_ = nullptr;
      bytes_ = 0;
      check_cuda(cudaMalloc(&data_, bytes), ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Copies each chunk to the device, runs the GPU op on its own stream with a workspace sized
/// by the op's query, and copies the results back: one synchronisation per chunk.
class CudaBackend final : public Backend {
 public:
  CudaBackend() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~CudaBackend() override { cudaStreamDestroy(stream_); }

  const char* name() const override { return "cuda"; }

  void softmax(const softk::LogitsView& chunk, float* probs, int32_t* row_status,
               softk::SoftmaxOptions options) override {
    const softk::LogitsView device = upload(chunk);
    const auto outputs = static_cast<std::size_t>(chunk.rows() * chunk.vocab);
    options.row_status = static_cast<int32_t*>(status_.reserve(status_bytes(chunk)));
    const std::size_t workspace_bytes = softk::softmax_workspace_size(device, options);
    void* device_probs = values_.reserve(outputs * sizeof(float));
    softk::softmax(device, device_probs, options, workspace_.reserve(workspace_bytes), workspace_bytes, stream_);
    download(probs, device_probs, outputs * sizeof(float));
    download(row_status, options.row_status, status_bytes(chunk));
    synchronize();
  }

  void topk(const softk::LogitsView& chunk, int32_t k, float* values, int32_t* indices, int32_t* row_status,
            softk::TopkOptions options) override {
    const softk::LogitsView device = upload(chunk);
    const auto outputs = static_cast<std::size_t>(chunk.rows() * k);
    options.row_status = static_cast<int32_t*>(status_.reserve(status_bytes(chunk)));
    const std::size_t workspace_bytes = softk::topk_workspace_size(device, k, options);
    auto* device_values = static_cast<float*>(values_.reserve(outputs * sizeof(float)));
    auto* device_indices = static_cast<int32_t*>(indices_.reserve(outputs * sizeof(int32_t)));
    softk::topk(device, k, device_values, device_indices, options, workspace_.reserve(workspace_bytes), workspace_bytes,
                stream_);
    download(values, device_values, outputs * sizeof(float));
    download(indices, device_indices, outputs * sizeof(int32_t));
    download(row_status, options.row_status, status_bytes(chunk));
    synchronize();
  }

  void sample(const softk::LogitsView& chunk, const softk::SamplingParams& params, int32_t* tokens,
              int32_t* row_status) override {
    const softk::LogitsView device = upload(chunk);
    softk::SamplingParams on_device = params;
    const auto rows = static_cast<std::size_t>(chunk.rows());
    on_device.temperatures = upload_row_values(params.temperatures, rows, temperatures_);
    on_device.top_ks = upload_row_values(params.top_ks, rows, top_ks_);
    on_device.top_ps = upload_row_values(params.top_ps, rows, top_ps_);
    on_device.min_ps = upload_row_values(params.min_ps, rows, min_ps_);
    on_device.seeds = upload_row_values(params.seeds, rows, seeds_);
    on_device.offsets = upload_row_values(params.offsets, rows, offsets_);
    auto* device_status = static_cast<int32_t*>(status_.reserve(status_bytes(chunk)));
    auto* device_tokens = static_cast<int32_t*>(indices_.reserve(rows * sizeof(int32_t)));
    const std::size_t workspace_bytes = softk::sample_workspace_size(device, on_device);
    softk::sample(device, on_device, device_tokens, device_status, workspace_.reserve(workspace_bytes),
                  workspace_bytes, stream_);
    download(tokens, device_tokens, rows * sizeof(int32_t));
    download(row_status, device_status, status_bytes(chunk));
    synchronize();
  }

 private:
  /// A per-row parameter array copied into `buffer` (null stays null).
  template <class T>
  const T* upload_row_values(const T* host, std::size_t rows, DeviceBuffer& buffer) {
    if (host == nullptr) return nullptr;
    void* device = buffer.reserve(rows * sizeof(T));
    check_cuda(cudaMemcpyAsync(device, host, rows * sizeof(T), cudaMemcpyHostToDevice, stream_), "copy to device");
    return static_cast<const T*>(device);
  }

  static std::size_t status_bytes(const softk::LogitsView& chunk) {
    return static_cast<std::size_t>(chunk.rows()) * sizeof(int32_t);
  }

  softk::LogitsView upload(const softk::LogitsView& chunk) {
    const auto bytes = static_cast<std::size_t>(chunk.rows() * chunk.vocab) * softk::dtype_size(chunk.dtype);
    void* device_logits = logits_.reserve(bytes);
    check_cuda(cudaMemcpyAsync(device_logits, chunk.data, bytes, cudaMemcpyHostToDevice, stream_), "copy to device");
    softk::LogitsView device = chunk;
    device.data = device_logits;
    return device;
  }
  void download(void* host, const void* device, std::size_t bytes) {
    check_cuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
  }
  void synchronize() { check_cuda(cudaStreamSynchronize(stream_), "running the op"); }

  cudaStream_t stream_ = nullptr;
  DeviceBuffer logits_, values_, indices_, status_, workspace_;
  DeviceBuffer temperatures_, top_ks_, top_ps_, min_ps_, seeds_, offsets_;  // sample's per-row arrays
};

/// The number of CUDA devices, 0 when there is no device or no usable driver; `reason` says why.
int cuda_device_count(std::string& reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    reason = cudaGetErrorString(status);
    cudaGetLastError();  // reset the runtime's last-error state, which the failed query set
    return 0;
  }
  if (count == 0) reason = "no CUDA device";
  return count;
}

}  // namespace

std::unique_ptr<Backend> make_backend(BackendKind kind) {
  if (kind == BackendKind::cpu) return std::make_unique<CpuBackend>();
  std::string reason;
  if (cuda_device_count(reason) > 0) return std::make_unique<CudaBackend>();
  if (kind == BackendKind::cuda) throw Error("--backend cuda: no usable CUDA device (" + reason + ")");
  return std::make_unique<CpuBackend>();
}

}  // namespace sampler
