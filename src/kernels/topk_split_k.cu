// Split-k top-k, for few rows and long rows: a block per row leaves most SMs idle, so each row
// is cut into chunks, one block each.
//  Launch 1  every chunk runs the fused block core (block_fused_topk.cuh) on its part of the
//            row and writes its (m, d) and its exact local top-K keys to the workspace.
//  Launch 2  a block per row merges the chunk states (in a fixed order, so the bits never
//            depend on scheduling) and radix-selects the row's top-K from the chunks' winners:
//            the union of every chunk's exact top-K holds the row's top-K.
// The kernel boundary is the grid-wide barrier between the two; the chunking depends on V, K
// and the SM count only, so a row gets the same bits whatever batch it sits in.
//
// The merge is a programmatic dependent launch where the GPU has it (sm_90): the chunk kernel
// lets it launch at once, and its block waits in griddepcontrol.wait until every chunk has
// finished and its writes are visible, so the merge block is resident when the last chunk
// ends instead of being launched then.
//
// Why two launches: the single-launch form (the last chunk of a row to finish, found by an
// atomic counter after a fence, merges the row) was built and measured slower on an H200 at
// every shape tried, by 1-2 us at one row (1 x 128256 f32, K = 50: 21.5 vs 19.3 us) and up
// to 8% at 8 x 4M. Its counters must be zero at every call, and a scratch workspace is not,
// so it needs a memset node in front: the launch it saves comes back as the memset, and the
// merge still waits for the slowest chunk.
#include <algorithm>

#include "cuda_check.hpp"
#include "kernels/block_fused_topk.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "workspace.hpp"

namespace softk::kernels {
namespace {

/// A chunk shorter than this spends more on its block's fixed costs than on its data.
constexpr int64_t kMinChunkElements = 4096;
/// The merge block radix-selects over every chunk's K winners, up to 8 passes of them: past
/// ~8K keys the merge outweighs the parallelism more chunks buy (1 x 128256 f32, K = 1024, H200:
/// 32 chunks 62 us, 8 chunks 48 us)...
constexpr int64_t kMergeFriendlyCandidates = 8192;
/// ...unless the chunks would be so long that too few blocks stream the row (1 x 4M, K = 1024:
/// 8 chunks 142 us, 32 chunks 96 us): the merge then takes up to this many.
constexpr int64_t kMaxChunkElements = 131072;
constexpr int64_t kMaxMergeCandidates = 32768;

struct SplitTopkPlan {
  int64_t chunks;
  int64_t chunk_length;
};

SplitTopkPlan plan_for(int64_t vocab, int32_t k, int sm_count) {
  // About two chunks per SM for one row, none shorter than kMinChunkElements, and no more
  // chunks than the merge takes quickly (chunks x K candidates) unless the row needs them.
  const int64_t target = std::max<int64_t>(kMinChunkElements, (vocab + 2 * sm_count - 1) / (2 * sm_count));
  const int64_t merge_friendly = std::max<int64_t>(1, kMergeFriendlyCandidates / k);
  const int64_t streaming = (vocab + kMaxChunkElements - 1) / kMaxChunkElements;
  const int64_t chunk_cap = std::min(std::max(merge_friendly, streaming), std::max<int64_t>(1, kMaxMergeCandidates / k));
  int64_t chunks = std::clamp<int64_t>((vocab + target - 1) / target, 1, chunk_cap);
  int64_t length = (vocab + chunks - 1) / chunks;
  length = (length + 15) / 16 * 16;  // chunks after the first keep the row's 16-byte phase
  chunks = (vocab + length - 1) / length;
  return {chunks, length};
}

struct SplitTopkWorkspace {
  SoftmaxState* states;  ///< [rows, chunks]
  TopkKey* keys;         ///< [rows, chunks, k]: a chunk's winners, descending, kEmptyKey padded
  std::size_t bytes;
};

SplitTopkWorkspace carve(int64_t rows, int32_t k, const SplitTopkPlan& plan, void* base) {
  detail::WorkspaceCarver carver(base);
  SplitTopkWorkspace w{};
  w.states = carver.take<SoftmaxState>(static_cast<std::size_t>(rows * plan.chunks));
  w.keys = carver.take<TopkKey>(static_cast<std::size_t>(rows * plan.chunks * k));
  w.bytes = carver.bytes();
  return w;
}

// Programmatic dependent launch (PTX griddepcontrol, sm_90+). Below sm_90 the merge is launched
// the ordinary way (see merge_launches_early), and these are no-ops.
__device__ __forceinline__ void let_dependent_grid_launch() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void wait_for_prerequisite_grid() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <typename T, int LA>
__global__ void __launch_bounds__(kFusedThreads, 2)
    topk_split_k_chunk_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w) {
  extern __shared__ TopkKey candidate_keys[];
  __shared__ FusedTopkShared shared;
  let_dependent_grid_launch();  // the merge may launch now; it waits for this grid to complete

  const int64_t row = blockIdx.y;
  const int64_t begin = int64_t{blockIdx.x} * plan.chunk_length;
  const int64_t length = min(plan.chunk_length, problem.vocab - begin);
  const auto k = static_cast<unsigned>(problem.k);
  const auto chunk_k = static_cast<unsigned>(min(int64_t{problem.k}, length));
  const FusedTopkResult result =
      block_fused_topk<T, LA>(row_pointer<T>(problem.logits, row, problem.row_stride) + begin, begin, length, chunk_k,
                              problem.k_exp, candidate_keys, shared);

  const int64_t slot = row * plan.chunks + blockIdx.x;
  if (threadIdx.x == 0) w.states[slot] = result.state;
  TopkKey* keys = w.keys + slot * problem.k;
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads)
    keys[j] = (result.sorted != nullptr && j < chunk_k) ? result.sorted[j] : kEmptyKey;
}

__global__ void __launch_bounds__(kFusedThreads)
    topk_split_k_merge_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w) {
  __shared__ SoftmaxState scratch[kFusedThreads / 32];
  __shared__ BlockTopkStorage storage;

  wait_for_prerequisite_grid();  // every chunk done, its writes visible
  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const SoftmaxState* states = w.states + row * plan.chunks;
  SoftmaxState state = empty_state();
  for (int64_t c = threadIdx.x; c < plan.chunks; c += kFusedThreads) state = merge(state, states[c], problem.k_exp);
  const Normalizer normalizer(block_reduce<kFusedThreads / 32>(state, problem.k_exp, scratch), problem.k_exp);
  if (threadIdx.x == 0 && problem.row_status) problem.row_status[row] = static_cast<int32_t>(normalizer.status);

  float* probs = problem.probs + row * problem.k;
  int32_t* indices = problem.indices + row * problem.k;
  if (normalizer.status == RowStatus::has_nan) {  // block-uniform
    write_nan_row<kFusedThreads>(k, probs, indices);
    return;
  }
  // At least K real keys: every chunk gave min(K, its length) of them.
  const TopkKey* chunk_keys = w.keys + row * plan.chunks * problem.k;
  const int64_t listed = plan.chunks * problem.k;
  const auto chunk_winners = [&](auto&& visit) {
    for (int64_t i = threadIdx.x; i < listed; i += kFusedThreads) {
      const TopkKey key = chunk_keys[i];
      if (key != kEmptyKey) visit(key);
    }
  };
  const TopkKey* sorted = block_topk_sorted<kFusedThreads>(k, chunk_winners, storage);
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads)
    write_topk_entry(sorted[j], normalizer, problem.log_probs, probs + j, indices + j);
}

/// Whether the merge kernel may be launched before the chunks finish: the device supports it,
/// and the merge was compiled for sm_90+, so that it does wait (griddepcontrol.wait).
bool merge_launches_early(const DeviceInfo& device) {
  if (device.compute_major < 9) return false;
  cudaFuncAttributes merge{};
  SOFTK_CUDA_CHECK(cudaFuncGetAttributes(&merge, topk_split_k_merge_kernel));
  return merge.ptxVersion >= 90;
}

}  // namespace

std::size_t topk_split_k_workspace_size(int64_t rows, int64_t vocab, int32_t k, const DeviceInfo& device) {
  return carve(rows, k, plan_for(vocab, k, device.sm_count), nullptr).bytes;
}

void launch_topk_split_k(const TopkProblem& problem, const DeviceInfo& device, void* workspace,
                         cudaStream_t stream) {
  const SplitTopkPlan plan = plan_for(problem.vocab, problem.k, device.sm_count);
  const SplitTopkWorkspace w = carve(problem.rows, problem.k, plan, workspace);
  with_input_type(problem.dtype, [&](auto in) {
    using T = typename decltype(in)::type;
    with_seed_count(problem.k, [&](auto seeds) {
      launch_with_candidate_list(topk_split_k_chunk_kernel<T, decltype(seeds)::value>,
                                 dim3(static_cast<unsigned>(plan.chunks), static_cast<unsigned>(problem.rows)), stream,
                                 problem, plan, w);
    });
  });
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t merge{};
  merge.gridDim = dim3(static_cast<unsigned>(problem.rows));
  merge.blockDim = dim3(kFusedThreads);
  merge.stream = stream;
  merge.attrs = &early;
  merge.numAttrs = merge_launches_early(device) ? 1 : 0;
  SOFTK_CUDA_CHECK(cudaLaunchKernelEx(&merge, topk_split_k_merge_kernel, problem, plan, w));
}

}  // namespace softk::kernels
