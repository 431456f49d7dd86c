// Resident softmax: the row is read from DRAM once and kept on chip between the reduction and
// the write. Two tiers of one kernel:
//  - register_resident: each thread caches kRegisterVectors 16-byte vectors in registers
//    (V up to 6144 fp32 / 12288 fp16/bf16);
//  - shared_memory: 1024 threads x 4 vectors in registers, and the rest of the row in dynamic
//    shared memory (allow_most_dynamic_shared), for V up to ~72K fp32 / ~144K fp16/bf16 on Hopper.
// Vectors are cached raw (4 registers each, whatever the dtype) and widened on use.
#include <algorithm>

#include "cuda_check.hpp"
#include "kernels/kernel_launch.hpp"
#include "kernels/online_softmax.cuh"
#include "kernels/row_segment.cuh"
#include "kernels/softmax_launch.hpp"
#include "kernels/type_dispatch.cuh"

namespace softk::kernels {
namespace {

/// A launch shape: kThreadsPerRow is 32 (a warp per row, several rows per block) or the whole
/// block (one row per block); never in between, so the reduction is warp- or block-wide.
template <int kThreadsPerRow_, int kRegisterVectors_>
struct ResidentShape {
  static constexpr int kThreadsPerRow = kThreadsPerRow_;
  static constexpr int kRegisterVectors = kRegisterVectors_;
  static constexpr int kBlockThreads = kThreadsPerRow < 128 ? 128 : kThreadsPerRow;
  static constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  template <typename T>
  static constexpr int64_t capacity() { return int64_t{kThreadsPerRow} * kRegisterVectors * kVectorWidth<T>; }
};

// The register tiers, smallest first; the launcher takes the first that holds the row. Larger
// tiers (512 and 1024 threads x 8 vectors; 512 x 4 on 2048 x 8192 fp32, 41.8 us against
// two-pass's 37.5, H200) were measured and lost to two-pass at every shape they could hold
// (bench/RESULTS.md), so the register kernel stops at 256 x 6 vectors.
using Tier0 = ResidentShape<32, 2>;
using Tier1 = ResidentShape<32, 8>;
using Tier2 = ResidentShape<256, 6>;
// The shared tier: 1024 threads x 4 vectors in registers (at 64 registers a thread, its four
// loads in flight need the room), the rest in dynamic shared memory.
using SharedTier = ResidentShape<1024, 4>;

template <typename T, typename OutT, typename Shape, bool kUseShared>
__global__ void __launch_bounds__(Shape::kBlockThreads, 1024 / Shape::kBlockThreads)
    softmax_resident_kernel(SoftmaxProblem problem) {
  constexpr int kThreads = Shape::kThreadsPerRow;
  constexpr int kCached = Shape::kRegisterVectors;
  constexpr int W = kVectorWidth<T>;
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector shared_row[];
  __shared__ SoftmaxState scratch[kThreads / 32];

  const int thread = static_cast<int>(threadIdx.x) % kThreads;
  const int64_t row = int64_t{blockIdx.x} * Shape::kRowsPerBlock + threadIdx.x / kThreads;
  // Only warp-per-row blocks can hold a row past the end; they never use block barriers.
  if (row >= problem.rows) return;

  const RowSegment<T> segment(row_pointer<T>(problem.logits, row, problem.row_stride), 0, problem.vocab);
  const RawVector* body = segment.body();
  const float k = problem.k;

  // Pass 1: every load is issued before the first is used; vectors are folded in pairs (a
  // missing vector reads as -inf, which weighs nothing).
  SoftmaxState state = empty_state();
  float edge = 0.0f;  // at most 2W - 2 < 32 head/tail elements: one per thread
  const bool has_edge = thread < segment.edges();
  if (has_edge) {
    const int64_t offset = segment.edge_offset(thread);
    edge = to_float(segment.data[offset]);
    accumulate(state, single_element_group(edge, offset), k);
  }
  static_assert(kCached % 2 == 0, "cached vectors are folded in pairs");
  RawVector cache[kCached];
#pragma unroll
  for (int j = 0; j < kCached; ++j) {
    const int64_t v = int64_t{j} * kThreads + thread;
    if (v < segment.body_vectors) cache[j] = load_vector(body + v);
  }
#pragma unroll
  for (int j = 0; j < kCached; j += 2) {
    ElementGroup<2, W> group;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (int64_t{j + u} * kThreads + thread < segment.body_vectors) {
        widen<T>(cache[j + u], group.x[u]);
      } else {
#pragma unroll
        for (int i = 0; i < W; ++i) group.x[u][i] = -CUDART_INF_F;
      }
    }
    group.max = elements_max(group);
    accumulate(state, group, k);
  }
  constexpr int64_t kInRegisters = int64_t{kCached} * kThreads;
  if constexpr (kUseShared) {
    // Each thread stores and later reloads only its own vectors: no barrier needed, and
    // 16-byte accesses by consecutive threads are bank-conflict free.
    // kSharedUnroll loads in flight per thread: one at a time leaves the SM latency-bound.
    constexpr int kSharedUnroll = 4;
    int64_t v = kInRegisters + thread;
    for (; v + int64_t{kSharedUnroll - 1} * kThreads < segment.body_vectors; v += int64_t{kSharedUnroll} * kThreads) {
      RawVector raw[kSharedUnroll];
#pragma unroll
      for (int u = 0; u < kSharedUnroll; ++u) raw[u] = load_vector(body + v + int64_t{u} * kThreads);
#pragma unroll
      for (int u = 0; u < kSharedUnroll; ++u) shared_row[v + int64_t{u} * kThreads - kInRegisters] = raw[u];
      constexpr int G = kGroupVectors<kSharedUnroll, W>;
#pragma unroll
      for (int g = 0; g < kSharedUnroll; g += G) {
        ElementGroup<G, W> group;
#pragma unroll
        for (int u = 0; u < G; ++u) widen<T>(raw[g + u], group.x[u]);
        group.max = elements_max(group);
        accumulate(state, group, k);
      }
    }
    for (; v < segment.body_vectors; v += kThreads) {
      const RawVector raw = load_vector(body + v);
      shared_row[v - kInRegisters] = raw;
      ElementGroup<1, W> group;
      widen<T>(raw, group.x[0]);
      group.max = elements_max(group);
      accumulate(state, group, k);
    }
  }
  const SoftmaxState total = kThreads == 32 ? warp_reduce<kSoftmaxStateMerge<T>>(state, k)
                                            : block_reduce<kThreads / 32, kSoftmaxStateMerge<T>>(state, k, scratch);
  const Normalizer normalizer(total, k);
  if (thread == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  // Pass 2: write from the cache.
  OutT* out = static_cast<OutT*>(problem.out) + row * problem.vocab;
  if (has_edge) out[segment.edge_offset(thread)] = from_float<OutT>(normalizer.probability(edge));
  const bool aligned = reinterpret_cast<uintptr_t>(out + segment.head) % 16 == 0;
  const auto write_vector = [&](const RawVector& raw, int64_t v) {
    float p[W];
    widen<T>(raw, p);
#pragma unroll
    for (int i = 0; i < W; ++i) p[i] = normalizer.probability(p[i]);
    store_outputs<OutT, W>(out + segment.body_offset(v), p, aligned);
  };
#pragma unroll
  for (int j = 0; j < kCached; ++j) {
    const int64_t v = int64_t{j} * kThreads + thread;
    if (v < segment.body_vectors) write_vector(cache[j], v);
  }
  if constexpr (kUseShared) {
    for (int64_t v = kInRegisters + thread; v < segment.body_vectors; v += kThreads)
      write_vector(shared_row[v - kInRegisters], v);
  }
}

template <typename T, typename OutT, typename Shape, bool kUseShared>
void launch_shape(const SoftmaxProblem& problem, std::size_t shared_bytes, cudaStream_t stream) {
  auto* kernel = softmax_resident_kernel<T, OutT, Shape, kUseShared>;
  if constexpr (kUseShared) allow_most_dynamic_shared(kernel);
  const int64_t blocks = (problem.rows + Shape::kRowsPerBlock - 1) / Shape::kRowsPerBlock;
  kernel<<<static_cast<unsigned>(blocks), Shape::kBlockThreads, shared_bytes, stream>>>(problem);
  SOFTK_CHECK_LAUNCH();
}

/// Shared memory the shared tier needs for V: the vectors past its registers, plus slack for
/// the head/tail split moving a vector.
template <typename T>
std::size_t shared_bytes_for(int64_t vocab) {
  const int64_t vectors = vocab / kVectorWidth<T> + 1 - SharedTier::capacity<T>() / kVectorWidth<T>;
  return static_cast<std::size_t>(std::max<int64_t>(vectors, 1)) * sizeof(RawVector);
}

/// Static shared memory of the shared tier's kernel (its reduction scratch), kept out of the
/// dynamic budget.
constexpr std::size_t kSharedTierStaticBytes = 4096;

}  // namespace

int64_t register_capacity(DType dtype) {
  int64_t capacity = 0;
  with_input_type(dtype, [&](auto in) { capacity = Tier2::capacity<typename decltype(in)::type>(); });
  return capacity;
}

int64_t shared_memory_capacity(DType dtype, const DeviceInfo& device) {
  const int64_t shared_vectors =
      (static_cast<int64_t>(device.max_shared_memory_per_block) - static_cast<int64_t>(kSharedTierStaticBytes)) /
      static_cast<int64_t>(sizeof(RawVector));
  int64_t capacity = 0;
  with_input_type(dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    capacity = SharedTier::capacity<T>() + (shared_vectors - 1) * kVectorWidth<T>;
  });
  return capacity;
}

void launch_softmax_register(const SoftmaxProblem& problem, cudaStream_t stream) {
  with_input_output_types(problem.dtype, problem.out_dtype, [&](auto in, auto out) {
    using T = typename decltype(in)::type;
    using OutT = typename decltype(out)::type;
    const int64_t v = problem.vocab;
    if (v <= Tier0::capacity<T>()) launch_shape<T, OutT, Tier0, false>(problem, 0, stream);
    else if (v <= Tier1::capacity<T>()) launch_shape<T, OutT, Tier1, false>(problem, 0, stream);
    else launch_shape<T, OutT, Tier2, false>(problem, 0, stream);  // the op layer checked capacity
  });
}

void launch_softmax_shared(const SoftmaxProblem& problem, const DeviceInfo&, cudaStream_t stream) {
  with_input_output_types(problem.dtype, problem.out_dtype, [&](auto in, auto out) {
    using T = typename decltype(in)::type;
    using OutT = typename decltype(out)::type;
    launch_shape<T, OutT, SharedTier, true>(problem, shared_bytes_for<T>(problem.vocab), stream);
  });
}

}  // namespace softk::kernels
