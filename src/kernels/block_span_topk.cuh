// The exact top-K (1 < K <= kMaxSpanTopK) of a long run by one block in one read: split-k's
// chunks, and the rows of a block per row. The stream is K = 1's (block_argmax.cuh), except that a
// thread keeps its largest value of each span of its elements (a span: J consecutive turns of the
// block's loop, a thread's J vectors spaced a block apart; at most kMaxSpans spans, so up to
// 16 x 512 a block, in shared memory). After the stream:
//  1. A histogram of each thread's largest value finds a floor (a value) at or below the K-th
//     largest of them, and so at or below the K-th largest span maximum, and names the spans
//     whose maxima reach it: about K where the winners are spread. Where that names more than
//     kMaxNamedSpans (the winners crowd a few threads), a histogram of the span maxima finds a
//     floor with K to K + kSpanSlack of them above it, and ties at it.
//  2. The block reads those spans again (~K x J vectors: ~1% of a chunk of 1 x 64M fp32 at
//     K = 50) and gathers their keys at or above the floor.
//  3. Each gathered key's rank among them is counted, and the K largest are written by rank.
//
// Exactness: the K largest thread maxima, or span maxima, are K distinct elements at or above the
// floor, so every winner of the run is at or above it; and a winner's span maximum is at least the
// winner, so its span is among those named in step 1. The gather therefore holds every winner.
// Where the spans at the floor are too many to name, or the gather holds more than kMaxFastTopK
// keys (ties, a flat run), the caller selects from the run itself instead.
//
// Why: the fused core (block_fused_topk.cuh) agrees on a threshold from a prefix before its
// stream and selects from ~400-1,500 candidates after it. A chunk grid of one wave pays those
// phases in every block at once, while DRAM idles: under ncu (clocks and caches untouched,
// H200), 1 x 64M f32 at K = 50 spent 82.5 us in its fused chunks against 70.7 for K = 1's one read.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/block_argmax.cuh"
#include "kernels/block_bin_threshold.cuh"
#include "kernels/block_topk.cuh"
#include "kernels/row_segment.cuh"

namespace softk::kernels {

/// Up to this K a run takes spans (takes_spans; measured at K = 50). The spans named,
/// the keys re-read and step 3's count over them grow with K: at K = 256 spans read 0.93-1.08x the
/// fused core, geomean 0.997 (1 x 64M f32 106.4 -> 114.5 us, 1 x 4M bf16 31.3 -> 29.1; H200, rows
/// 1-16 of 1M-64M), so past K = 64 chunks keep the fused core.
constexpr int kMaxSpanTopK = 64;
constexpr int kMaxSpans = 16;
/// At 1 < K <= kMaxSpanTopK, runs past kMinSpanRunElements tokens and up to kMaxSpanRunElements list
/// their top-K by spans rather than by the fused core, at any batch: split-k's chunks and the rows
/// of a block per row (from the length past which `automatic` gives a row a block rather than a
/// warp at K > 1, 1024 tokens: dispatch.cpp, warp_rows_pay). Since spans keep values, not keys
/// (SpanMaxima), against the fused core at K = 50 (H200, auto, llm logits, one run of three
/// rounds, 2026-11-25): 16-bit runs of 256000 tokens to 4M 0.85-1.00x the time (4 x 64M bf16 in
/// chunks of 1M 149.0 -> 141.8 us; 256 x 256000 bf16 42.1 -> 39.5; 64 x 1M bf16 64.7 -> 55.1), fp32
/// 0.91-1.01x (64 x 1M 101.0 -> 91.4 us; 4 x 64M and 8 x 64M, chunks of 1M and 2M, 1.009-1.014x,
/// the losses). Up to then spans stopped at 512K tokens, and 16-bit rows past 448 KB took them
/// only in grids of up to half the SMs, where the 16-bit streams had paid more for a key a span
/// than the core's fixed phases cost. Before that, at K = 50: chunks of 16K-508K tokens 0.94-1.15x
/// (1 x 64M f32 83.4 -> 79.9 us; H200, 7d493e9), rows of 2000-8000 tokens 1.02-1.43x (64 x 4000
/// f32 9.44 -> 6.69 us; H100, f4edf92) and of 128256-256000 0.90-0.98x at 128-1024 rows (H200,
/// 5b007ba). Chunks of at most 8192 tokens are binned instead (topk_split_k.cu), so no chunk comes
/// near the floor below. Past 4M tokens: not measured.
constexpr int64_t kMinSpanRunElements = 1024;
constexpr int64_t kMaxSpanRunElements = int64_t{1} << 22;
__host__ __device__ constexpr bool takes_spans(int64_t length, int32_t k) {
  return k > 1 && k <= kMaxSpanTopK && length > kMinSpanRunElements && length <= kMaxSpanRunElements;
}
/// Spans named past K in step 1 at most: past it, a level of bins further down.
constexpr unsigned kSpanSlack = 32;
constexpr unsigned kMaxNamedSpans = kMaxSpanTopK + kSpanSlack;

/// The span maxima's shared memory (dynamic: a block's static limit is 48 KB).
template <int kThreads>
constexpr std::size_t kSpanKeyBytes = std::size_t{kMaxSpans} * kThreads * sizeof(TopkKey);

/// How a run's body is cut into spans: span s holds turns [s J, (s + 1) J) of every thread (turn j
/// of thread t: body vector t + j kThreads), J a power of two and a multiple of kStreamUnroll, so
/// that a visited group never straddles two spans, and large enough for at most kMaxSpans spans.
template <int kThreads, typename T>
struct SpanCut {
  int turns_log2;  ///< log2 J
  int shift;       ///< the span of body element offset o (from the body's start) is o >> shift
  int spans;

  __device__ __forceinline__ explicit SpanCut(const RowSegment<T>& run) {
    static_assert(kStreamUnroll == 4 && (kThreads & (kThreads - 1)) == 0, "J from 4 up, a power-of-two block");
    const int64_t turns = (run.body_vectors + kThreads - 1) / kThreads;
    turns_log2 = 2;
    while ((int64_t{kMaxSpans} << turns_log2) < turns) ++turns_log2;
    shift = turns_log2 + log2_of(kThreads) + log2_of(RowSegment<T>::kWidth);
    spans = static_cast<int>((turns + (int64_t{1} << turns_log2) - 1) >> turns_log2);
  }

  static constexpr int log2_of(int x) { return x <= 1 ? 0 : 1 + log2_of(x / 2); }
};

/// The span maxima: the first kSpanKeyBytes of the kernel's dynamic shared memory. (Named here
/// rather than held, as a pointer would be, in a register of the stream.)
__device__ __forceinline__ TopkKey* span_keys() {
  extern __shared__ __align__(kDynamicSharedAlignment) RawVector dynamic_shared[];
  return reinterpret_cast<TopkKey*>(dynamic_shared);
}

/// The key that stands for a span whose largest value is x (not NaN), in slot `slot` of
/// span_keys(): x's value bits, and the slot's bits in place of an index, so that no two spans'
/// keys tie (block_bin_prefix counts keys down to their last bits). Only the value half is a
/// span's: step 1 finds a floor on these keys and names the spans by its value half alone.
__device__ __forceinline__ TopkKey span_key(float x, uint32_t slot) {
  return (TopkKey{key_value_bits(x)} << 32) | TopkKey{~slot};
}

/// A key with its low word zeroed: a floor found on span keys keeps its value half alone, so that
/// spans are named, and elements gathered, by value.
__device__ __forceinline__ TopkKey value_half(TopkKey key) { return key & ~TopkKey{0xFFFFFFFFu}; }

/// A thread's largest value of each span of its elements (fold_with_argmax's argmax), written to
/// span_keys()[s kThreads + thread] as span_key each span ends (the last by finish()). Edge
/// elements, which a thread visits before its body, count in span 0. One maximum a group and
/// one compare: the group's offset against the end of the current span. The spans' shift is read
/// from shared memory (written, then a barrier, before the stream) where a span ends, rather than
/// held in a register: the 16-bit streams run at their 64-register cap.
/// Why values and no index: a RunningArgmax a span (the element's key) took a chain of selects
/// at the first group of every span, which a span of one group a thread (chunks of 1 x 64M)
/// pays at every group; the index is read again in step 2 anyway, from the named spans.
template <int kThreads, typename T>
struct SpanMaxima {
  float largest;             ///< the current span's, by fmaxf: NaN until a group not all NaN
  const RowSegment<T>& run;  ///< the stream's own: nothing more held
  const int& shift;          ///< SpanCut's, in shared memory
  uint32_t span_end;         ///< segment offset of the current span's end (32-bit: plan_for)

  __device__ __forceinline__ SpanMaxima(const RowSegment<T>& run_, const int& shared_shift)
      : largest(std::numeric_limits<float>::quiet_NaN()),
        run(run_),
        shift(shared_shift),
        span_end(static_cast<uint32_t>(run_.head) + (1u << shared_shift)) {
    for (int s = 0; s < kMaxSpans; ++s) span_keys()[s * kThreads + threadIdx.x] = kEmptyKey;
  }

  template <int N, int W>
  __device__ __forceinline__ void offer(const ElementGroup<N, W>& group, int64_t) {
    if constexpr (W > 1) {  // a body group (edges are single elements)
      if (static_cast<uint32_t>(group.offset[0]) >= span_end) {
        finish();
        largest = std::numeric_limits<float>::quiet_NaN();
        span_end += 1u << *static_cast<const volatile int*>(&shift);  // a thread's spans come in turn
      }
    }
    largest = fmaxf(largest, group.max);
  }

  /// Writes the current span's maximum (kEmptyKey for a span of NaNs alone, as its NaN row is
  /// reported whole).
  __device__ __forceinline__ void finish() const {
    const int s = *static_cast<const volatile int*>(&shift);
    const uint32_t slot = (((span_end - static_cast<uint32_t>(run.head)) >> s) - 1) * kThreads + threadIdx.x;
    span_keys()[slot] = largest == largest ? span_key(largest, slot) : kEmptyKey;
  }
};

/// A block's shared memory for listing a run's top-K by spans, besides the dynamic shared memory
/// (span_keys(), then the stream's stage).
template <int kThreads>
struct SpanTopkShared {
  SoftmaxState scratch[kThreads / 32];
  BinHistogram<kThreads> histogram;
  BlockTopkStorage storage;
  unsigned named[kMaxNamedSpans];
  unsigned named_count;
  int span_shift;
};

/// What block_span_fold leaves each thread.
struct SpanFold {
  SoftmaxState total;  ///< the run's (m, d), the same in every thread
  float own_max;       ///< the largest of this thread's elements (-inf where it has none)
};

/// The stream: the run's (m, d), which every thread gets, and each thread's span maxima in
/// span_keys(), with the histogram cleared for block_span_top_k. The stage, where `staged`
/// (launch_with_stream_stage_after), follows the span maxima. Called by the whole block.
template <int kThreads, typename T>
__device__ __forceinline__ SpanFold block_span_fold(const RowSegment<T>& run, float k_exp, bool staged,
                                                    SpanTopkShared<kThreads>& shared) {
  shared.histogram.clear();  // block_reduce's barriers come before the first add
  if (threadIdx.x == 0) shared.span_shift = SpanCut<kThreads, T>(run).shift;
  __syncthreads();
  SoftmaxState state = empty_state();
  SpanMaxima<kThreads, T> maxima(run, shared.span_shift);
  RawVector* stage = reinterpret_cast<RawVector*>(span_keys() + kMaxSpans * kThreads);
  fold_with_argmax<kThreads>(run, k_exp, staged, stage, state, maxima);
  maxima.finish();
  return {block_reduce<kThreads / 32>(state, k_exp, shared.scratch), state.max};
}

/// After block_span_fold over `run` (`fold`: what it left this thread): writes the run's k largest
/// keys (k <= kMaxSpanTopK, and at most the run's length) to out[0, k), sorted descending. Returns
/// false, having written nothing, where more than kMaxFastTopK keys reach the spans' floor (the
/// caller then selects from the run itself). Called by the whole block; ends on a barrier. Not
/// inlined, and taking the run by value: the stream before it keeps its registers (inlined, the
/// 16-bit kernels spilled 144 bytes at their 64-register cap; taking the run by reference put the
/// stream's segment in local memory).
template <int kThreads, typename T>
__device__ __noinline__ bool block_span_top_k(unsigned k, const RowSegment<T> run, SpanFold fold, TopkKey* out,
                                              SpanTopkShared<kThreads>& shared) {
  BinHistogram<kThreads>& histogram = shared.histogram;
  BlockTopkStorage& storage = shared.storage;
  unsigned* named = shared.named;
  unsigned& named_count = shared.named_count;
  const SpanCut<kThreads, T> cut(run);
  const TopkKey* keys = span_keys();
  const auto own_span_maxima_at = [&](auto&& visit) {
    for (int s = 0; s < cut.spans; ++s) {
      const TopkKey key = keys[s * kThreads + threadIdx.x];
      if (key != kEmptyKey) visit(s, key);
    }
  };
  const auto own_span_maxima = [&](auto&& visit) { own_span_maxima_at([&](int, TopkKey key) { visit(key); }); };
  // Counts them all, names up to kMaxNamedSpans. The spans that reach are marked in a mask first,
  // by reads that wait on nothing, then named through one atomic a thread: with an atomic and a
  // store among them, each read waited on the one before (16 spans a thread at 1 x 64M fp32,
  // K = 50: ~2,440 -> ~1,920 cycles; 4 spans at 1 x 4M: ~1,060 -> ~790; clock64, H100).
  const auto name_spans_reaching = [&](TopkKey floor) {
    unsigned reaching = 0;  // bit s: span s
    own_span_maxima_at([&](int s, TopkKey key) { reaching |= (key >= floor ? 1u : 0u) << s; });
    if (reaching == 0) return;
    unsigned slot = atomicAdd(&named_count, static_cast<unsigned>(__popc(reaching)));
    for (; reaching != 0 && slot < kMaxNamedSpans; reaching &= reaching - 1, ++slot)
      named[slot] = (__ffs(reaching) - 1) * kThreads + threadIdx.x;
  };
  // Step 1: a floor at or below the K-th largest span maximum, by distance below the run's largest
  // logit. First from each thread's largest key, one histogram add a thread instead of one a span:
  // the K largest of them are K span maxima, so a floor under the K-th of them is under the K-th
  // largest span maximum too. It names about as many spans (K + a few) where the winners are
  // spread; where they crowd a few threads it names too many, and the span maxima decide. The
  // first count takes each thread's largest value from its fold, not from its span maxima in
  // shared memory (a read a span: ~1,230 -> ~360 cycles at 16 spans, ~730 -> ~310 at 4, as above).
  // A thread whose elements are all -inf, or that has none, adds nothing: the k-th then comes
  // from fewer values, so it is no higher.
  const uint32_t top = key_value_bits(fold.total.max);
  const auto own_largest_value = [&](auto&& visit) {
    if (fold.own_max != -CUDART_INF_F) visit(key_value_bits(fold.own_max));
  };
  const auto own_largest = [&](auto&& visit) {
    TopkKey largest = kEmptyKey;
    own_span_maxima([&](TopkKey key) { largest = max(largest, key); });
    if (largest != kEmptyKey) visit(largest);
  };
  // A floor's value half alone: a span key's other half is its slot (span_key).
  if (threadIdx.x == 0) named_count = 0;  // block_bin_prefix_below's threshold starts with a barrier
  TopkKey floor =
      value_half(block_bin_prefix_below(top, k, k + kSpanSlack, own_largest_value, own_largest, histogram).prefix);
  name_spans_reaching(floor);
  __syncthreads();
  if (named_count > kMaxNamedSpans) {  // block-uniform
    __syncthreads();  // every thread has read the count
    histogram.clear();
    if (threadIdx.x == 0) named_count = 0;
    __syncthreads();
    // At most k + kSpanSlack span keys at or above this floor, so as many span maxima above its
    // value and any number at it: where those ties name too many, the caller selects.
    floor = value_half(block_bin_prefix_below(top, k, k + kSpanSlack, own_span_maxima, histogram).prefix);
    name_spans_reaching(floor);
    __syncthreads();
    if (named_count > kMaxNamedSpans) return false;  // block-uniform
  }
  if (threadIdx.x == 0) storage.count = 0;
  __syncthreads();  // the spans are named

  // Step 2: (named span, turn) pairs spread over the block, four loads in flight a thread.
  const unsigned count = named_count;
  const auto span_elements = [&](auto&& visit) {
    constexpr int W = RowSegment<T>::kWidth;
    constexpr int kInFlight = 4;
    const unsigned pairs = count << cut.turns_log2;
    for (unsigned base = threadIdx.x; base < pairs; base += kInFlight * kThreads) {
      RawVector raw[kInFlight];
      int64_t vector[kInFlight];  // -1: none
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const unsigned pair = base + u * kThreads;
        vector[u] = -1;
        if (pair >= pairs) continue;
        const unsigned span_thread = named[pair >> cut.turns_log2];
        const unsigned turn = ((span_thread / kThreads) << cut.turns_log2) + (pair & ((1u << cut.turns_log2) - 1));
        const int64_t v = span_thread % kThreads + int64_t{turn} * kThreads;
        if (v >= run.body_vectors) continue;
        raw[u] = load_vector(run.body() + v);
        vector[u] = v;
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        if (vector[u] < 0) continue;
        float x[W];
        widen<T>(raw[u], x);
        const int64_t first = run.first_index + run.body_offset(vector[u]);
#pragma unroll
        for (int i = 0; i < W; ++i) visit(make_key(x[i], first + i));
      }
    }
    // Span 0 of thread e also holds edge element e.
    for (unsigned n = threadIdx.x; n < count; n += kThreads) {
      const unsigned span_thread = named[n];
      const auto e = static_cast<int>(span_thread % kThreads);
      if (span_thread < kThreads && e < run.edges()) {
        const int64_t offset = run.edge_offset(e);
        visit(make_key(to_float(run.data[offset]), run.first_index + offset));
      }
    }
  };
  append_keys_at_least(floor, span_elements, &storage.count, storage.winners, kMaxFastTopK);
  __syncthreads();
  const unsigned gathered = storage.count;
  if (gathered > kMaxFastTopK) return false;
  // Step 3: the rank sort, keeping the k largest.
  block_rank_sort_descending<kThreads, RankFewBy::warp>(storage.winners, gathered, k, out);
  __syncthreads();
  return true;
}

}  // namespace softk::kernels
