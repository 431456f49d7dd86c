// Split-k top-k, for few rows and long rows: a block per row leaves most SMs idle, so each row
// is cut into chunks, one block each. (A row that fits the registers of one thread-block
// cluster runs in a single launch instead: topk_cluster.cu. This file is the
// general form: any V, any K <= kMaxFastTopK, any GPU.)
//  Launch 1  every chunk writes its (m, d) and an unsorted list of keys that holds its exact
//            top-K:
//            - a short chunk (the batch-1 decode case) histograms its keys' top 12 bits and
//              lists every key at or above the bin of its K-th largest (block_bin_threshold.cuh):
//              one pass of shared-memory adds and one scan, no select, no sort;
//            - a longer chunk at 1 < K <= 64, up to 4M tokens, keeps each thread's largest value
//              of every span of its elements in K = 1's one read, then reads again the few
//              spans that hold its top-K (block_span_topk.cuh);
//            - a long chunk runs the fused block core (block_fused_topk.cuh), where most
//              elements cost one compare against its prefix threshold, and lists its exact
//              top-K: a counting sort of its candidates (block_range_bin_sort.cuh), or a
//              radix select where that hands back;
//            - at K = 1 a chunk of any length keeps its largest key in one read
//              (block_argmax.cuh).
//  Launch 2  a block per row merges the chunk states (in a fixed order, so the bits never
//            depend on scheduling) and finds the row's top-K in the union of the lists (which
//            holds it, as each list holds its chunk's): where the row has K chunks or more, the
//            K-th largest chunk maximum bounds the row's K-th key from below, and only the
//            lists of the chunks whose maximum reaches it are read
//            (block_topk_sorted_above_chunk_maxima), and of span chunks' lists, which are
//            sorted, little but their heads, loaded with the states (ListHead); else, and
//            where that bound passes too many keys, up to K = 256 a histogram of the listed
//            keys by distance below the row's largest logit gives the bin of the K-th largest
//            (the keys' own bits, 12 at a time, where it holds too many) and the keys at or
//            above it are gathered and sorted; past it, a radix select over the lists; at K = 1
//            the largest of the chunks' keys.
// The kernel boundary is the grid-wide barrier between the two. Forced split-k chunks a row by
// V, K and the SM count only, so a row gets the same bits whatever batch it sits in; under
// `automatic` (SplitSizing::per_batch) the rows of a batch share one wave of chunk blocks, as
// longer chunks: a chunk's fixed phases (seed select, reduce, select) are paid once a row per SM
// instead of once a wave, and several waves of them no longer queue (8 x 4M f32, K = 50: 95 ->
// 53 us, H200).
//
// The merge is a programmatic dependent launch where the GPU has it (sm_90): the chunk kernel
// lets it launch at once, and its block waits in griddepcontrol.wait until every chunk has
// finished and its writes are visible, so the merge block is resident when the last chunk
// ends instead of being launched then. The chunks of a grid of more than one block an SM are
// launched so too, when the caller asks, and wait the same way for the previous op.
//
// Why two launches here: the single-launch form (the last chunk of a row to finish, found by an
// atomic counter after a fence, merges the row) was built and measured slower on an H200 at
// every shape tried, by 1-2 us at one row (1 x 128256 f32, K = 50: 21.5 vs 19.3 us) and up
// to 8% at 8 x 4M. Its counters must be zero at every call, and a scratch workspace is not,
// so it needs a memset node in front: the launch it saves comes back as the memset, and the
// merge still waits for the slowest chunk. (A cooperative launch needs no zeroed memory, but
// one grid.sync costs ~1.1 us on an H200: measured, 132 x 512 threads.) The single launch that
// did win is the cluster form, whose barrier and merge stay inside one GPC.
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "cuda_check.hpp"
#include "kernels/block_argmax.cuh"
#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_fused_topk.cuh"
#include "kernels/block_span_topk.cuh"
#include "kernels/candidate_list.cuh"
#include "kernels/grid_dependency.cuh"
#include "kernels/topk_launch.hpp"
#include "kernels/type_dispatch.cuh"
#include "workspace.hpp"

namespace softk::kernels {
namespace {

/// A chunk shorter than this spends more on its block's fixed costs than on its data...
constexpr int64_t kMinChunkElements = 4096;
/// ...except at K = 1, whose chunks read once and list nothing: 1 x 256000 f32 in 63 chunks 5.07-5.14
/// us, in 125 4.96-4.97, in 250 4.84-4.85 (H200, the first in another run).
constexpr int64_t kMinArgmaxChunkElements = 1024;
/// The merge reads every chunk's list: past ~8K keys it outweighs the parallelism more chunks
/// buy (1 x 128256 f32, K = 1024, H200: 32 chunks 62 us, 8 chunks 48 us)...
constexpr int64_t kMergeFriendlyCandidates = 8192;
/// ...unless the chunks would be so long that too few blocks stream the row (1 x 4M, K = 1024:
/// 8 chunks 142 us, 32 chunks 96 us): the merge then takes up to this many.
constexpr int64_t kMaxChunkElements = 131072;
constexpr int64_t kMaxMergeCandidates = 32768;
/// At K > kLargeK, where those chunks would pass kLongChunkElements and the batch leaves a row
/// twice as many blocks, the merge takes twice as many: 1 x 64M at K = 1024 streamed in 32 chunks
/// of 2M (32 blocks for 132 SMs) at 330 us f32, 295 bf16, and in 64 of 1M at 230 and 218; 2 x 64M
/// 1.30-1.36x, 4 x 64M 1.01-1.05x (H200, two runs). Not at K <= kLargeK (1 x 64M at K = 256
/// 0.78-0.90x), for shorter chunks (4 x 16M bf16 at K = 1024 0.84x), or for 33 chunks instead of
/// 32 (8 x 64M f32 0.98x).
constexpr int64_t kLongChunkElements = int64_t{1} << 20;
constexpr int64_t kMaxMergeCandidatesForLongChunks = 2 * kMaxMergeCandidates;
/// At K > 1, chunks up to this long take the histogram path: a shared-memory add per element is cheap
/// while a thread holds a few elements; past it the fused core's prefix threshold, which skips
/// most elements with one compare, wins (1 x 4M f32, K = 1, 16K-element chunks, H200: 25.0 us
/// binned vs 20.2 fused, measured before K = 1 took the one-read argmax)...
constexpr int64_t kMaxBinnedChunkElements = 8192;
/// ...except at large K, where the fused core's selects cost more (K = 1024, f32: 1 x 128256,
/// 16K-element chunks, 35.5 us binned vs 43.3 fused; 1 x 256000, 32K-element chunks, 34.1 vs
/// 52.7). Re-measured after fused chunks stopped sorting (793e5c3): binned only up to 16K or 8K
/// elements was 0.73-1.01x as fast, up to 128K 0.33-0.45x (H200, bench/RESULTS.md).
constexpr int64_t kMaxBinnedLargeKChunkElements = 32768;
/// Large K, for the two choices above and below. Up to it, the merge finds the row's winners by
/// histogram: the keys at or above the threshold bin (K plus part of a bin) then fit the
/// 1024-key sort, or do a level of bins down (block_topk_sorted_from_bins). Past it they rarely
/// do, and a radix select over the lists measured faster than the histogram pass plus a radix
/// select of that bin (1 x 32000 f32, K = 1024: 26.6 us vs 30.0).
constexpr int32_t kLargeK = 256;

struct SplitTopkPlan {
  int64_t chunks;
  int64_t chunk_length;
  bool binned;             ///< chunks list by histogram threshold
  bool by_spans;           ///< chunks list their top-K in one read (block_span_topk.cuh; else: the fused core)
  int64_t list_capacity;   ///< keys per chunk list, kEmptyKey padded
  int64_t first_row = 0;   ///< the chunk launch's first row (a grid row each: for_each_grid_row_run)
};

/// The chunking of a row that shares the GPU with batch_rows - 1 others (1 under per-row sizing):
/// about two chunk blocks an SM for the batch, none shorter than kMinChunkElements, and no more
/// chunks than the merge takes quickly (chunks x K candidates) unless the row needs them. More
/// rows only ever give fewer and longer chunks, whose lists are no longer (a binned chunk's list
/// holds K + max(K/2, 64) slots, a fused one's K), so the workspace for one row serves any batch.
SplitTopkPlan plan_for(int64_t vocab, int32_t k, int sm_count, int64_t batch_rows) {
  const int64_t blocks_per_row = std::max<int64_t>(1, 2 * sm_count / batch_rows);
  const int64_t min_chunk = k == 1 ? kMinArgmaxChunkElements : kMinChunkElements;
  const int64_t target = std::max<int64_t>(min_chunk, (vocab + blocks_per_row - 1) / blocks_per_row);
  const int64_t streaming = (vocab + kMaxChunkElements - 1) / kMaxChunkElements;
  const int64_t usual_cap = std::max<int64_t>(1, kMaxMergeCandidates / k);
  // The merge that bounds the row's K-th key by the chunks' maxima (takes_chunk_maxima_bound) reads
  // about K lists whatever their number. So where K lists of K keys are merge-friendly, binned
  // chunks, whose cost goes with their length, come as many as the row's blocks, two an SM: 1 x 1M
  // at K = 50 in 256 chunks instead of 163 1.19x f32, 1.06x bf16. Only where the capped chunks
  // are binned too: turning span chunks into binned ones read 0.96-1.05x (1 x 1.5M-2.16M f32), and
  // more span chunks 0.975-1.026x (1 x 4M and 16M; H100, one run of two rounds each).
  const int64_t listing_cap = std::max<int64_t>(1, kMergeFriendlyCandidates / k);
  const bool binned_either_way = k > 1 && int64_t{k} * k <= kMergeFriendlyCandidates &&
                                 (vocab + listing_cap - 1) / listing_cap <= kMaxBinnedChunkElements;
  const int64_t merge_friendly = binned_either_way ? usual_cap : listing_cap;
  const bool long_chunks = k > kLargeK && vocab / usual_cap > kLongChunkElements && blocks_per_row >= 2 * usual_cap;
  const int64_t merge_cap = long_chunks ? kMaxMergeCandidatesForLongChunks : kMaxMergeCandidates;
  const int64_t chunk_cap = std::min(std::max(merge_friendly, streaming), std::max<int64_t>(1, merge_cap / k));
  int64_t chunks = std::clamp<int64_t>((vocab + target - 1) / target, 1, chunk_cap);
  int64_t length = (vocab + chunks - 1) / chunks;
  length = (length + 15) / 16 * 16;  // chunks after the first keep the row's 16-byte phase
  chunks = (vocab + length - 1) / length;
  // K = 1 never bins: the one-read argmax is the binned chunk's fold without its histogram,
  // threshold and second read (with the merge of one key a chunk, 1 x 1M f32 16.4 -> 7.2 us, bf16
  // 15.7 -> 6.4; H200, one run).
  const bool binned = k > 1 && length <= (k > kLargeK ? kMaxBinnedLargeKChunkElements : kMaxBinnedChunkElements);
  const bool by_spans = !binned && takes_spans(length, k);
  // A binned list holds the K winners and the rest of the threshold bin: room for half as many
  // again (at least 64) covers smooth logits; a chunk whose bin holds more lists its exact top-K.
  // A span chunk's list starts on a 16-byte boundary, for the merge's vector loads of its head.
  const int64_t capacity = binned ? (k + std::max(k / 2, 64) + 31) / 32 * 32 : by_spans ? (k + 1) / 2 * 2 : k;
  return {chunks, length, binned, by_spans, capacity};
}

struct SplitTopkWorkspace {
  SoftmaxState* states;  ///< [rows, chunks]
  TopkKey* keys;         ///< [rows, chunks, list_capacity]: each chunk's list, kEmptyKey padded
  std::size_t bytes;
};

SplitTopkWorkspace carve(int64_t rows, const SplitTopkPlan& plan, void* base) {
  detail::WorkspaceCarver carver(base);
  SplitTopkWorkspace w{};
  w.states = carver.take<SoftmaxState>(static_cast<std::size_t>(rows * plan.chunks));
  w.keys = carver.take<TopkKey>(static_cast<std::size_t>(rows * plan.chunks * plan.list_capacity));
  w.bytes = carver.bytes();
  return w;
}

/// The part of the row a chunk block covers, and where its state and list go.
template <typename T>
struct ChunkSlot {
  RowSegment<T> chunk;
  unsigned k;  ///< min(K, chunk length): the chunk's own top-k size
  int64_t slot;
  TopkKey* keys;

  __device__ __forceinline__ ChunkSlot(const TopkProblem& problem, const SplitTopkPlan& plan,
                                       const SplitTopkWorkspace& w)
      : chunk(nullptr, 0, 0) {
    const int64_t row = plan.first_row + blockIdx.y;
    const int64_t begin = int64_t{blockIdx.x} * plan.chunk_length;
    const int64_t length = min(plan.chunk_length, problem.vocab - begin);
    chunk = RowSegment<T>(row_pointer<T>(problem.logits, row, problem.row_stride) + begin, begin, length);
    k = static_cast<unsigned>(min(int64_t{problem.k}, length));
    slot = row * plan.chunks + blockIdx.x;
    keys = w.keys + slot * plan.list_capacity;
  }

  /// Pads the list after its `written` keys (a barrier must make `written` final).
  __device__ __forceinline__ void pad(unsigned written, const SplitTopkPlan& plan) const {
    for (int64_t j = written + threadIdx.x; j < plan.list_capacity; j += blockDim.x) keys[j] = kEmptyKey;
  }
};

/// How a chunk's list is ordered: span chunks list theirs sorted descending (their rank sort
/// writes them so), and the merge reads only the heads of such lists (ListHead); the other
/// chunks' lists are in no order, as a sort of the winners was most of a chunk's fixed cost at
/// K = 1024 (~14,000 cycles then; block_topk.cuh has the sort's cost now).
enum class ListOrder { any, descending };

/// Lists a chunk's exact top-K in `order`. Returns the keys written.
template <int kValueBits, ListOrder kOrder, typename T, typename Keys>
__device__ unsigned list_exact_top_k(const ChunkSlot<T>& at, const Keys& keys, BlockTopkStorage& storage) {
  const TopkKey* winners = kOrder == ListOrder::descending
                               ? block_topk_sorted<kFusedThreads, kValueBits>(at.k, keys, storage)
                               : block_topk_unsorted<kFusedThreads, kValueBits>(at.k, keys, storage);
  for (unsigned j = threadIdx.x; j < at.k; j += kFusedThreads) at.keys[j] = winners[j];
  return at.k;
}

template <typename T, int LA, bool kListsVectors, bool kSeedsFromVectors>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_split_k_fused_chunk_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w,
                                    FusedCoreShape shape) {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector candidate_storage[];
  __shared__ FusedTopkShared shared;
  enter_after_previous_grid();  // launched programmatically (chunk_launch): nothing global before it

  const ChunkSlot<T> at(problem, plan, w);
  const FusedCandidates found = block_fused_candidates<FusedRuns::chunks, T, LA, kListsVectors, kSeedsFromVectors>(
      at.chunk.data, at.chunk.first_index, at.chunk.length, at.k, problem.k_exp, shape, candidate_storage,
      shared);
  if (threadIdx.x == 0) w.states[at.slot] = found.state;
  if (status_of(found.state) == RowStatus::has_nan) {  // block-uniform; the merge writes a NaN row
    at.pad(0, plan);
    return;
  }
  // The counting sort writes the chunk's top-K sorted, which the merge does not need, but it is
  // cheaper than the radix select (block_range_bin_sort.cuh).
  const auto write = [&](unsigned rank, TopkKey key) { at.keys[rank] = key; };
  if (found.write_top_k_by_range_bins(at.k, candidate_storage, write)) {
    at.pad(at.k, plan);
    return;
  }
  const unsigned written = found.with_key_source(at.chunk, [&](const auto& keys) {
    return list_exact_top_k<kSignificantBits<T>, ListOrder::any>(at, keys, shared.storage);
  });
  at.pad(written, plan);
}

/// K = 1 on a chunk of any length: its (m, d) and largest key in one read (block_argmax.cuh).
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_split_k_argmax_chunk_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w, bool staged) {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector stage[];
  __shared__ BlockArgmaxScratch<kFusedThreads> scratch;
  start_block_argmax(scratch);
  enter_after_previous_grid();  // launched programmatically (chunk_launch): nothing global before it

  const ChunkSlot<T> at(problem, plan, w);
  const RunArgmax found = block_argmax<kFusedThreads>(at.chunk, problem.k_exp, staged, stage, scratch);
  if (threadIdx.x == 0) {
    w.states[at.slot] = found.state;
    at.keys[0] = found.best;  // a fused chunk's list holds K = 1 key
  }
}

/// 1 < K <= kMaxSpanTopK on a long chunk: (m, d) and each thread's span maxima in one read, then
/// the chunk's exact top-K from the spans holding it (block_span_topk.cuh).
template <typename T>
__global__ void __launch_bounds__(kFusedThreads, kFusedBlocksPerSm)
    topk_split_k_span_chunk_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w, bool staged) {
  __shared__ SpanTopkShared<kFusedThreads> shared;
  enter_after_previous_grid();  // launched programmatically (chunk_launch): nothing global before it

  const ChunkSlot<T> at(problem, plan, w);
  const SpanFold fold = block_span_fold<kFusedThreads>(at.chunk, problem.k_exp, staged, shared);
  if (threadIdx.x == 0) w.states[at.slot] = fold.total;
  if (status_of(fold.total) == RowStatus::has_nan) {  // block-uniform; the merge writes a NaN row
    at.pad(0, plan);
    return;
  }
  if (block_span_top_k<kFusedThreads>(at.k, at.chunk, fold, at.keys, shared)) {  // sorted
    at.pad(at.k, plan);
    return;
  }
  const unsigned written = list_exact_top_k<kSignificantBits<T>, ListOrder::descending>(
      at, RowKeys<kFusedThreads, T>{at.chunk}, shared.storage);
  at.pad(written, plan);
}

template <typename T>
__global__ void __launch_bounds__(kFusedThreads, 2)
    topk_split_k_binned_chunk_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w) {
  __shared__ BinHistogram<kFusedThreads> histogram;
  __shared__ BlockTopkStorage storage;
  __shared__ SoftmaxState scratch[kFusedThreads / 32];
  __shared__ unsigned listed;
  enter_after_previous_grid();  // launched programmatically (chunk_launch): nothing global before it

  const ChunkSlot<T> at(problem, plan, w);
  histogram.clear();
  if (threadIdx.x == 0) listed = 0;
  __syncthreads();
  SoftmaxState state = empty_state();
  for_each_element<kStreamUnroll, kStreamTailLoads>(at.chunk, threadIdx.x, kFusedThreads, [&](const auto& group) {
    accumulate(state, group, problem.k_exp);
    histogram.add_values(group);
  });
  const SoftmaxState total = block_reduce<kFusedThreads / 32>(state, problem.k_exp, scratch);
  if (threadIdx.x == 0) w.states[at.slot] = total;
  if (status_of(total) == RowStatus::has_nan) {  // block-uniform; the merge writes a NaN row
    at.pad(0, plan);
    return;
  }

  const BinThreshold cut = histogram.threshold(at.k);
  unsigned written;
  if (cut.at_or_above <= plan.list_capacity) {
    // Re-reads the chunk (from L1/L2) and lists every key in the threshold bin or above.
    const CandidateList list{at.keys, &listed, static_cast<unsigned>(plan.list_capacity),
                             key_threshold(bin_floor_key(cut.bin))};
    for_each_element<kStreamUnroll, kStreamTailLoads>(at.chunk, threadIdx.x, kFusedThreads,
                                    [&](const auto& group) { list.offer(group, at.chunk.first_index); });
    __syncthreads();
    written = listed;
  } else {  // one bin holds too many keys (ties, a flat chunk): list the exact top-K instead
    written = list_exact_top_k<kSignificantBits<T>, ListOrder::any>(at, RowKeys<kFusedThreads, T>{at.chunk}, storage);
  }
  at.pad(written, plan);
}

/// Loads of listed keys a merge thread keeps in flight: the lists sit in L2, and the merge is a
/// single block a row. A round of them reads kListedKeysARound keys.
constexpr int kListLoadsInFlight = 8;
constexpr int64_t kListedKeysARound = int64_t{kListLoadsInFlight} * kFusedThreads;

/// Visits the keys of list slots 0 .. slots - 1 across the block, skipping the padding, with
/// kListLoadsInFlight loads in flight a thread: slot i is lists[place(i)], asked only for
/// i < slots.
template <typename Index, typename Place, typename Visit>
__device__ __forceinline__ void visit_list_slots(const TopkKey* lists, Index slots, Place&& place, Visit&& visit) {
  for (Index base = threadIdx.x; base < slots; base += kListLoadsInFlight * kFusedThreads) {
    TopkKey keys[kListLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kListLoadsInFlight; ++u) {
      const Index i = base + static_cast<Index>(u) * kFusedThreads;
      keys[u] = i < slots ? lists[place(i)] : kEmptyKey;
    }
#pragma unroll
    for (int u = 0; u < kListLoadsInFlight; ++u)
      if (keys[u] != kEmptyKey) visit(keys[u]);
  }
}

/// Visits every listed key of a row (skipping the padding) across the block.
struct ListedKeys {
  const TopkKey* lists;
  int64_t slots;

  template <typename Visit>
  __device__ __forceinline__ void operator()(Visit&& visit) const {
    visit_list_slots(lists, slots, [](int64_t i) { return i; }, visit);
  }
};

/// The most chunks a row whose maxima the merge keeps in shared memory to bound the row's K-th key
/// (plan_for gives a row at most ~2 chunks an SM).
constexpr unsigned kMaxBoundingChunks = 1024;

/// Keys at the head of each sorted chunk list (span chunks: ListOrder::descending) that the
/// bounded merge loads with the chunk's state (ListHead). Why 8: on logits the bound passes K to
/// 2 K keys over about K chunks, and a chunk holds 8 of ~100 such keys in about one row in 10^5 at
/// 163-264 chunks (binomial), where 4 would be in most rows at 163.
constexpr unsigned kListHeadKeys = 8;

/// Whether the lists of `plan` are sorted, few enough for a ListHead a thread, and longer than one.
constexpr bool takes_list_heads(const SplitTopkPlan& plan) {
  return plan.by_spans && plan.chunks <= kFusedThreads && plan.list_capacity > kListHeadKeys;
}

/// Whether the merge of a row in `plan` bounds its K-th key by the chunks' maxima: K chunks or more
/// (the bound), and either list heads, or more listed keys than one round of loads reads, where the
/// two passes over every list cost two rounds or more. 4 rows of 1M-16M at K = 50 (66 chunks,
/// 3,300 listed keys a row: one round a pass) read 0.96-0.99x through the bound from memory, where
/// it passes ~2 K keys to sort (H100, one run), and 0.99-1.05x from list heads (H200, one run of
/// three rounds); 1-2 rows of 1M-64M took it at 1.006-1.37x (H100 and H200).
constexpr bool takes_chunk_maxima_bound(const SplitTopkPlan& plan, int32_t k) {
  return k <= kLargeK && plan.chunks >= k && plan.chunks <= kMaxBoundingChunks &&
         (takes_list_heads(plan) || plan.chunks * plan.list_capacity > kListedKeysARound);
}

/// The chunks' maxima (their states' m), and the chunks whose maximum reaches the bound.
struct ChunkMaxima {
  float value[kMaxBoundingChunks];
  unsigned reaching[kMaxBoundingChunks];
  unsigned reaching_count;
};

/// What a merge that takes no such bound keeps of the chunks' maxima: nothing.
struct NoChunkMaxima {};

/// What the bounded merge holds of the chunks' lists in registers when it has the bound: nothing,
/// and it reads every list whose chunk maximum reaches it (binned chunks' lists, in no order)...
struct NoListHead {
  static constexpr unsigned kKeys = 0;

  /// Whether the chunk's list may hold keys >= floor past what is held: where its maximum reaches it.
  __device__ __forceinline__ bool reaches_past(TopkKey floor, float chunk_max) const {
    return key_value_bits(chunk_max) >= static_cast<uint32_t>(floor >> 32);
  }
  __device__ __forceinline__ void append_at_least(TopkKey, unsigned*, TopkKey*, unsigned) const {}
};

/// ...or, where the lists are sorted (takes_list_heads), thread c the first kKeys keys of chunk c's
/// list, loaded with its state. The keys >= the bound are then in the heads but for the chunks
/// whose last head key reaches it, and only those lists' rest is read after the bound: the merge's
/// second round of loads goes (the gather from the lists ~2,800 cycles at 1 x 4M fp32, K = 50,
/// against ~1,050 from the heads; the merge after its wait ~9,400 -> ~7,300; clock64, H100).
struct ListHead {
  static constexpr unsigned kKeys = kListHeadKeys;
  TopkKey key[kKeys];  ///< descending, kEmptyKey in the list's padding

  __device__ __forceinline__ ListHead() {
#pragma unroll
    for (unsigned i = 0; i < kKeys; ++i) key[i] = kEmptyKey;
  }

  /// The head of a list longer than kKeys (takes_list_heads), which starts on a 16-byte boundary
  /// (plan_for).
  __device__ __forceinline__ explicit ListHead(const TopkKey* list) { load_words(list, key); }

  __device__ __forceinline__ bool reaches_past(TopkKey floor, float) const {
    return key[kKeys - 1] != kEmptyKey && key[kKeys - 1] >= floor;
  }
  /// As append_keys_at_least, by one atomic: the keys >= floor are a prefix of the head.
  __device__ __forceinline__ void append_at_least(TopkKey floor, unsigned* count, TopkKey* keys,
                                                  unsigned capacity) const {
    unsigned n = 0;
#pragma unroll
    for (unsigned i = 0; i < kKeys; ++i) n += key[i] != kEmptyKey && key[i] >= floor ? 1u : 0u;
    if (n == 0) return;
    const unsigned slot = atomicAdd(count, n);
#pragma unroll
    for (unsigned i = 0; i < kKeys; ++i)
      if (i < n && slot + i < capacity) keys[slot + i] = key[i];
  }
};

/// The row's top k, sorted descending in shared memory, from the lists of the chunks whose maximum
/// reaches the k-th largest chunk maximum (maxima.value, for chunks >= k, written before a barrier),
/// or nullptr where more than kMaxFastTopK listed keys reach it; `top`: the ordered bits of the
/// largest. Why it is exact: k chunks each list a key at least as large as that k-th maximum, so
/// the row's k-th key, and every winner, is at least as large; a chunk whose maximum is below it
/// holds none; and every winner is in its chunk's list. Why: on logits the bound passes k to 2 k
/// keys in ~k lists, so one round of loads reads them where the histogram's two passes read every
/// list (1 x 64M fp32, K = 50: 264 lists, 13,200 keys; the merge 9.9 -> 6.6 us under ncu, H100).
/// `head`: this thread's chunk's (ListHead: chunk threadIdx.x's, chunks <= kFusedThreads), whose
/// keys are not read again. Expects a cleared histogram (as block_bin_prefix_below) and leaves it
/// cleared where it returns nullptr. Called by the whole block.
template <typename Head>
__device__ const TopkKey* block_topk_sorted_above_chunk_maxima(unsigned k, uint32_t top, unsigned chunks,
                                                               const TopkKey* lists, unsigned list_capacity,
                                                               const Head& head, ChunkMaxima& maxima,
                                                               BinHistogram<kFusedThreads>& histogram,
                                                               BlockTopkStorage& storage) {
  if (threadIdx.x == 0) maxima.reaching_count = storage.count = 0;  // the select starts with a barrier
  // A key a chunk: its maximum, made unique by the chunk's number, for a select that may descend
  // to the low bits where maxima tie.
  const auto chunk_maxima = [&](auto&& visit) {
    for (unsigned c = threadIdx.x; c < chunks; c += kFusedThreads) visit(make_key(maxima.value[c], c));
  };
  const BinPrefix cut = block_bin_prefix_below(top, k, kMaxBoundingChunks, chunk_maxima, histogram);
  // The prefix is at most the k-th largest maximum's key, so its value bits are at most its value's.
  const TopkKey floor = TopkKey{static_cast<uint32_t>(cut.prefix >> 32)} << 32;
  for (unsigned c = threadIdx.x; c < chunks; c += kFusedThreads)
    if (head.reaches_past(floor, maxima.value[c])) maxima.reaching[atomicAdd(&maxima.reaching_count, 1u)] = c;
  head.append_at_least(floor, &storage.count, storage.winners, kMaxFastTopK);
  __syncthreads();
  // With heads, most rows are gathered here (one barrier and a division less).
  if (maxima.reaching_count != 0) {  // block-uniform
    // Slot i is key Head::kKeys + i % unheld of reaching list i / unheld. The quotient by a
    // multiply with the rounded-up reciprocal, exact while i x unheld < 2^32 (slots <= 1024 x
    // unheld, and a list holds at most K + K / 2 <= 384 keys here): a division is ~20 dependent
    // instructions before each load.
    const unsigned unheld = list_capacity - Head::kKeys;  // > 0: takes_list_heads
    const unsigned slots = maxima.reaching_count * unheld;
    const unsigned reciprocal = 0xFFFFFFFFu / unheld + 1u;
    const auto reaching_keys = [&](auto&& visit) {
      visit_list_slots(
          lists, slots,
          [&](unsigned i) {
            const unsigned list = __umulhi(i, reciprocal);
            return maxima.reaching[list] * list_capacity + Head::kKeys + (i - list * unheld);
          },
          visit);
    };
    append_keys_at_least(floor, reaching_keys, &storage.count, storage.winners, kMaxFastTopK);
    __syncthreads();
  }
  const unsigned gathered = storage.count;  // >= k: the k chunks' maxima
  if (gathered <= kMaxFastTopK) return block_sort_winners<kFusedThreads, RankFewBy::warp>(gathered, storage);
  histogram.clear();  // a tied or flat row: the caller reads every list
  __syncthreads();
  return nullptr;
}

/// The row's top k, sorted descending in shared memory, from every chunk's list (at least k real
/// keys: every chunk listed at least min(K, its length)). Up to kLargeK, the bin of the K-th
/// listed key by its distance below the row's largest logit (block_bin_prefix_below: the chunks'
/// top keys crowd a few bins of their own bits), then the keys at or above it, gathered and
/// sorted; past it, a radix select. Expects a cleared histogram. Called by the whole block.
__device__ __forceinline__ const TopkKey* merge_every_list(unsigned k, uint32_t top, const ListedKeys& listed,
                                                           BinHistogram<kFusedThreads>& histogram,
                                                           BlockTopkStorage& storage) {
  return k <= kLargeK ? block_topk_sorted_from_bins<kFusedThreads>(k, top, listed, histogram, storage)
                      : block_topk_sorted<kFusedThreads>(k, listed, storage);
}

/// merge_every_list as a call, where it is the rare way out of the bound: inlined, its code sat
/// between the bounded merge's steps, and the jump over it to the writes stalled on instruction
/// fetch (ncu, 1 x 64M fp32 K = 50: most of that kernel's no-instruction samples). Out of line,
/// with the quotient by a multiply, that merge took 6.6 us against 8.2 (H100, ncu).
__device__ __noinline__ const TopkKey* merge_every_list_out_of_line(unsigned k, uint32_t top, const ListedKeys& listed,
                                                                    BinHistogram<kFusedThreads>& histogram,
                                                                    BlockTopkStorage& storage) {
  return merge_every_list(k, top, listed, histogram, storage);
}

/// How the merge finds the row's winners among the chunks' lists.
enum class MergeReads {
  every_list,           ///< merge_every_list
  lists_reaching_bound, ///< takes_chunk_maxima_bound: block_topk_sorted_above_chunk_maxima, from memory
  heads_then_rest,      ///< the same with ListHead (takes_list_heads)
};

/// A kernel for each way, so that each keeps its own code: built as one kernel with the bound, the
/// merge that does not take it measured slower (4 x 4M f32 K = 50, 7.0 -> 11.5 us under ncu, H100).
template <MergeReads kReads>
__global__ void __launch_bounds__(kFusedThreads)
    topk_split_k_merge_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w) {
  constexpr bool kBounded = kReads != MergeReads::every_list;
  using Head = std::conditional_t<kReads == MergeReads::heads_then_rest, ListHead, NoListHead>;
  __shared__ SoftmaxState scratch[kFusedThreads / 32];
  __shared__ BinHistogram<kFusedThreads> histogram;
  __shared__ BlockTopkStorage storage;
  __shared__ std::conditional_t<kBounded, ChunkMaxima, NoChunkMaxima> maxima;

  histogram.clear();
  __syncthreads();  // the counts are zero before any add
  enter_after_previous_grid();  // every chunk done, its writes visible
  const int64_t row = blockIdx.x;
  const auto k = static_cast<unsigned>(problem.k);
  const SoftmaxState* states = w.states + row * plan.chunks;
  const TopkKey* lists = w.keys + row * plan.chunks * plan.list_capacity;
  SoftmaxState state = empty_state();
  Head head;  // with a ListHead, chunk threadIdx.x's: one chunk a thread
  for (int64_t c = threadIdx.x; c < plan.chunks; c += kFusedThreads) {
    const SoftmaxState chunk = states[c];
    if constexpr (kReads == MergeReads::heads_then_rest)
      head = ListHead(lists + c * plan.list_capacity);
    state = merge(state, chunk, problem.k_exp);
    if constexpr (kBounded) maxima.value[c] = chunk.max;  // visible after block_reduce's barriers
  }
  const RowOutput<kFusedThreads> write(problem, row, block_reduce<kFusedThreads / 32>(state, problem.k_exp, scratch));
  if (write.wrote_nan_row()) return;
  const uint32_t top = key_value_bits(write.normalizer.max);
  const ListedKeys listed{lists, plan.chunks * plan.list_capacity};
  const TopkKey* sorted;
  if constexpr (kBounded) {
    sorted = block_topk_sorted_above_chunk_maxima(k, top, static_cast<unsigned>(plan.chunks), lists,
                                                  static_cast<unsigned>(plan.list_capacity), head, maxima, histogram,
                                                  storage);
    if (sorted == nullptr) sorted = merge_every_list_out_of_line(k, top, listed, histogram, storage);
  } else {
    sorted = merge_every_list(k, top, listed, histogram, storage);
  }
  for (unsigned j = threadIdx.x; j < k; j += kFusedThreads) write(j, sorted[j]);
}

/// K = 1: each chunk wrote one key, its largest, so the row's is the largest of those, and the
/// merge folds the states and takes a maximum (no histogram, select or sort: 1 x 4M f32, 7.0 ->
/// 3.2 us under ncu, H200). The states merge in topk_split_k_merge_kernel's order, so both give
/// the same probability bits.
__global__ void __launch_bounds__(kFusedThreads)
    topk_split_k_argmax_merge_kernel(TopkProblem problem, SplitTopkPlan plan, SplitTopkWorkspace w) {
  __shared__ BlockArgmaxScratch<kFusedThreads> scratch;
  enter_after_previous_grid();  // every chunk done, its writes visible
  const int64_t row = blockIdx.x;
  const SoftmaxState* states = w.states + row * plan.chunks;
  const TopkKey* keys = w.keys + row * plan.chunks;  // a list of one key a chunk
  SoftmaxState state = empty_state();
  TopkKey best = kEmptyKey;
  for (int64_t c = threadIdx.x; c < plan.chunks; c += kFusedThreads) {
    state = merge(state, states[c], problem.k_exp);
    best = max(best, keys[c]);
  }
  const RunArgmax found = block_reduce_argmax<kFusedThreads>(state, best, problem.k_exp, scratch);
  if (threadIdx.x == 0) write_argmax_row(problem, row, found.state, found.best);
}

/// The workspace of `rows` rows chunked one row at a time: what the size query asks for, and a
/// bound on every batch plan's (plan_for).
std::size_t per_row_plan_bytes(int64_t rows, int64_t vocab, int32_t k, int sm_count) {
  return carve(rows, plan_for(vocab, k, sm_count, 1), nullptr).bytes;
}

}  // namespace

std::size_t topk_split_k_workspace_size(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device,
                                        SplitSizing sizing) {
  // Under `automatic` a batch in clusters may still hold fewer rows that take two launches (a lone
  // long row at K = 1: topk_cluster_batch), and its workspace serves every smaller batch.
  const bool all_in_clusters = topk_cluster_batch(rows, vocab, dtype, k, device, sizing).waves != 0 &&
                               topk_cluster_batch(1, vocab, dtype, k, device, sizing).waves != 0;
  if (all_in_clusters) return 0;
  return per_row_plan_bytes(rows, vocab, k, device.sm_count);
}

void launch_topk_split_k(const TopkProblem& problem, const DeviceInfo& device, void* workspace,
                         const LaunchContext& launch, SplitSizing sizing) {
  if (topk_cluster_batch(problem.rows, problem.vocab, problem.dtype, problem.k, device, sizing).waves != 0) {
    launch_topk_cluster(problem, device, launch, sizing);
    return;
  }
  const SplitTopkPlan plan =
      plan_for(problem.vocab, problem.k, device.sm_count, sizing == SplitSizing::per_batch ? problem.rows : 1);
  const SplitTopkWorkspace w = carve(problem.rows, plan, workspace);
  if (w.bytes > per_row_plan_bytes(problem.rows, problem.vocab, problem.k, device.sm_count))
    throw std::logic_error("softk: split-k's batch plan outgrew the workspace sized for one row");
  // The chunk kernel launches programmatically where the caller asks and the chunks are more
  // than one block an SM: its blocks, resident early, start as the previous op's last kernel
  // ends (1 x 1M-16M at K = 1 1.07-1.20x, K = 50 1.04-1.08x, 8 x 1M-4M 1.02-1.13x; H200, one
  // run). A grid of one block an SM or fewer launches the ordinary way: 8 x 1M at K = 1024 (64
  // chunks) read 0.85-0.91x programmatic, as 2-4% slower before, its early blocks taking the
  // SM slots as they free (not traced); so unlike the fused kernel's grids
  // (programmatic_launch_pays), a chunk grid of up to half the SMs does not go early either.
  const int64_t blocks = problem.rows * plan.chunks;
  const LaunchContext chunk_launch{launch.stream, launch.programmatic && !streams_staged(blocks, device)};
  for_each_grid_row_run(problem.rows, device, [&](int64_t first_row, int64_t rows) {
    SplitTopkPlan run = plan;
    run.first_row = first_row;
    const dim3 grid(static_cast<unsigned>(plan.chunks), static_cast<unsigned>(rows));
    with_input_type(problem.dtype, [&](auto in) {
      using T = typename decltype(in)::type;
      if (plan.binned) {
        KernelLaunch(grid, kFusedThreads, 0, launch.stream)
            .programmatic(chunk_launch.programmatic)(topk_split_k_binned_chunk_kernel<T>, problem, run, w);
        return;
      }
      if (problem.k == 1) {
        launch_with_stream_stage(topk_split_k_argmax_chunk_kernel<T>, grid, chunk_launch, device, problem, run, w);
        return;
      }
      if (plan.by_spans) {
        launch_with_stream_stage_after(kSpanKeyBytes<kFusedThreads>, topk_split_k_span_chunk_kernel<T>, grid,
                                       chunk_launch, device, problem, run, w);
        return;
      }
      // The core's shape from the whole batch's blocks, so that every run takes the same one.
      with_fused_core_shape<FusedRuns::chunks, T>(
          problem.k, plan.chunk_length, blocks, sizing, device,
          [&](auto seeds, auto vectors, auto from_vectors, const FusedCoreShape& shape) {
            const auto kernel = topk_split_k_fused_chunk_kernel<T, decltype(seeds)::value, decltype(vectors)::value,
                                                                decltype(from_vectors)::value>;
            launch_with_candidate_list(kernel, grid, chunk_launch, shape, problem, run, w);
          });
    });
  });
  // The merge goes programmatically whenever the device can (not only when the caller asked):
  // the chunk kernel is this op's own, and it lets the merge launch at once. It takes a row a
  // block along x, so every row in one grid; after the last chunk run, it waits for that one,
  // which waited for the one before it.
  const auto merge_kernel =
      problem.k == 1                                ? topk_split_k_argmax_merge_kernel
      : !takes_chunk_maxima_bound(plan, problem.k) ? topk_split_k_merge_kernel<MergeReads::every_list>
      : takes_list_heads(plan)                      ? topk_split_k_merge_kernel<MergeReads::heads_then_rest>
                                                    : topk_split_k_merge_kernel<MergeReads::lists_reaching_bound>;
  KernelLaunch(dim3(static_cast<unsigned>(problem.rows)), kFusedThreads, 0, launch.stream)
      .programmatic(sm90_image_loaded(device))(merge_kernel, problem, plan, w);
}

}  // namespace softk::kernels
