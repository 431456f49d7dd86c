#include "dispatch.hpp"

#include <algorithm>

#include "kernels/softmax_launch.hpp"
#include "kernels/topk_launch.hpp"

namespace softk::detail {

// Crossovers measured on an H200 (132 SMs), bench/RESULTS.md "Softmax dispatch":
//  - split-k wins up to SMs / 8 rows at any V from ~24K (16 x 32000 f32: 8.7 us vs 10.5 two-pass;
//    below, a row is too short to repay split-k's second launch: 4 x 16K, two-pass), up to SMs / 4
//    rows of 128000 bytes or more (32 x 32000 f32 10.3 vs 11.0, 32 x 128256 f32 19.8 vs 33.0,
//    32 x 128256 bf16 29.4 vs 31.1; but 32 x 32000 bf16 12.8 vs 12.0), and up to SMs / 2 rows of
//    128K fp32 tokens or more (64 x 128256-256000 f32 1.01-1.09x; but 64 x 32000 f32 0.88x, 64
//    rows in bf16 0.61-0.68x, 96 x 128256 f32 0.95x; H200, one run of three rounds, 2026-11-25);
//  - the register kernel wins only while a row fits 256 threads x 6 vectors and there are
//    enough rows to fill the GPU (2048 x 4K f32: 21.5 us vs 23 two-pass; 128 x 1K: two-pass;
//    2048 x 8K f32, past its capacity: two-pass 38 us vs 50 for the old 512-thread tier, and
//    37.5 vs 41.8 for a 512 x 4-vector one, H200, 2026-11-23), and
//    only up to kRegisterMaxElements in any dtype: at 2048 x 6144 bf16 it still won (36.5 us vs
//    41.7 two-pass, H200), but 2048 x 8K bf16, inside its 16-bit capacity (12288), ran two-pass
//    in 45.8 us vs 49.5 (H200) and 50.4 vs 58.7 (H100); lengths between are unmeasured;
//  - everything else is two-pass; the register + shared-memory tier never won a measured shape
//    (256 x 128256 bf16: 137 us vs 103 two-pass), so auto does not choose it.
/// The longest row the register kernel takes under `automatic`, in any dtype: a measured length
/// (above), not a capacity, though it equals fp32's today; a wider tier would not move it.
constexpr int64_t kRegisterMaxElements = 6144;

/// The shortest row split-k takes, and the rows of 128000 bytes and of 128K fp32 tokens, with
/// the batch limits in choose_softmax_algorithm.
constexpr int64_t kSplitKMinElements = 24576;
constexpr int64_t kSplitKQuarterSmsMinRowBytes = 128000;
constexpr int64_t kSplitKHalfSmsMinF32Elements = 128000;

SoftmaxAlgorithm choose_softmax_algorithm(int64_t rows, int64_t vocab, DType dtype, const DeviceInfo& device) {
  const int64_t row_bytes = vocab * static_cast<int64_t>(dtype_size(dtype));
  const int64_t sms = device.sm_count;
  const bool split_k_pays =
      (rows * 8 <= sms && vocab >= kSplitKMinElements) ||
      (rows * 4 <= sms && row_bytes >= kSplitKQuarterSmsMinRowBytes) ||
      (rows * 2 <= sms && dtype == DType::f32 && vocab >= kSplitKHalfSmsMinF32Elements);
  if (split_k_pays) return SoftmaxAlgorithm::split_k;
  const bool many_rows = rows >= int64_t{2} * device.sm_count;
  if (many_rows && vocab <= std::min(kernels::register_capacity(dtype), kRegisterMaxElements))
    return SoftmaxAlgorithm::register_resident;
  return SoftmaxAlgorithm::two_pass;
}

// Top-k (bench/RESULTS.md "Top-k dispatch"): K past the fused path's limit goes to radix
// select. Split-k pays for itself once a row is long enough; 32000 is the shortest V measured:
// from 64000 bytes a row (1 x 32000 bf16, K = 50: split-k 11.1 us vs fused 19.6; K = 256: 15.3 vs
// 28.6; K = 1024 where the row takes one cluster: 14.9 vs 22.8 on an H100). Past K = 256 in two
// launches (no cluster for the row) longer rows still: two_launch_max_rows.
namespace {

bool split_k_row_pays(int64_t vocab, DType dtype) {
  return vocab * static_cast<int64_t>(dtype_size(dtype)) >= 64000;
}

/// Past SMs / 8 rows, a batch that takes clusters runs them rather than a block per row where the
/// clusters are wide, or where they run in one wave and the block would take the fused core
/// (H200, one run, 2026-12-02 15:18, auto with the choice forced). Narrow clusters in one wave
/// against a block that reads its row once: 64 x 32000 (2 CTAs) 0.86-0.93x f32, 0.97-1.00x bf16
/// at K 50-1024; 64 x 50257 bf16 0.80-0.94x; 32 x 32000 (3 CTAs) K = 256 0.90x; 128 x 32000 (1 CTA)
/// 0.57-0.85x. Against the fused core: 64 x 50257 f32 K = 256 1.21x (15.27 us against 18.53),
/// K = 1024 1.14x; but in two waves 0.68x (128 x 50257 f32 K = 256: 29.11 us against 19.89; the
/// A/B of 15:36). Clusters of 4 CTAs or more won at 16 rows (16 x 32000 K = 50-1024 1.09-1.20x);
/// rows 17-30, which take them past SMs / 8, were not measured.
constexpr int kWideClusterCtas = 4;
bool clusters_beat_blocks(const kernels::TopkClusterBatch& clusters, int64_t vocab, DType dtype, int32_t k) {
  return clusters.ctas >= kWideClusterCtas ||
         (clusters.waves == 1 && !kernels::topk_fused_reads_row_once(vocab, dtype, k));
}

/// The most rows split-k runs in two launches (chunks over every SM, then a merge: topk_split_k.cu)
/// rather than a block per row, where the batch takes no clusters (H200, one run, 2026-12-02
/// 15:18, auto with the choice forced; block per row / two launches, above 1 the two launches
/// faster):
///  - K = 1, rows of at least kTwoLaunchArgmaxMinTokens, up to SMs / 2 rows: 64 x 50257 1.07x f32,
///    1.10x bf16; 64 x 128256-1M 1.20-1.30x f32, 1.44-1.74x bf16; 32 x 128256-256000 1.23-1.84x.
///    Shorter rows keep the block: 64 x 32000 0.86x f32, 0.97x bf16; 32 x 32000 f32 0.89x.
///  - 1 < K <= 256 up to SMs / 8 rows, whatever the row (16 x 201088-256000 K = 50 1.06-1.56x, 16 x
///    1M 2.36-2.74x); up to SMs / 4 rows, rows of at least kTwoLaunchMinRowBytes (32 x 151936-256000
///    f32 K = 50 1.06-1.30x, 32 x 256000 bf16 1.15x, 32 x 201088-256000 f32 K = 256 1.09-1.22x; but
///    32 x 128256-151936 bf16 K = 50 0.82-0.89x, 32 x 201088 bf16 K = 256 1.00x);
///  - K > 256 up to SMs / 8 rows, rows of at least kTwoLaunchLargeKMinRowBytes (16 x 201088-256000
///    f32 K = 1024 1.11-1.26x; but 16 x 201088-256000 bf16 0.82-0.92x), and a lone row of at least
///    kTwoLaunchLargeKLoneRowBytes (1 x 32000 f32 K = 1024: 26.6 us against 33.8, 1 x 32000 bf16,
///    64000 bytes: 34.3 against 31.7; H100, d983c79, before the clusters took such rows);
///  - any K up to SMs / 2 rows, rows of at least kTwoLaunchAnyRowsMinRowBytes (64 x 1M 1.20-1.29x f32,
///    1.06-1.29x bf16; 32 x 1M K = 1024 1.77x f32, 1.32x bf16; but 32 x 128256-256000 f32 K = 1024
///    0.68-0.92x, 64 x 256000 f32 K = 50 1.00x, K = 1024 0.95x).
constexpr int64_t kTwoLaunchArgmaxMinTokens = 40000;
constexpr int64_t kTwoLaunchMinRowBytes = 480 * 1024;
constexpr int64_t kTwoLaunchLargeKMinRowBytes = 768 * 1024;
constexpr int64_t kTwoLaunchLargeKLoneRowBytes = 128000;
constexpr int64_t kTwoLaunchAnyRowsMinRowBytes = 2 * 1024 * 1024;
constexpr int32_t kTwoLaunchLargeK = 256;
int64_t two_launch_max_rows(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  const int64_t sms = device.sm_count;
  const int64_t row_bytes = vocab * static_cast<int64_t>(dtype_size(dtype));
  if (k == 1) return vocab >= kTwoLaunchArgmaxMinTokens ? sms / 2 : 0;
  if (row_bytes >= kTwoLaunchAnyRowsMinRowBytes) return sms / 2;
  if (k > kTwoLaunchLargeK)
    return row_bytes >= kTwoLaunchLargeKMinRowBytes ? sms / 8 : row_bytes >= kTwoLaunchLargeKLoneRowBytes ? 1 : 0;
  return row_bytes >= kTwoLaunchMinRowBytes ? sms / 4 : sms / 8;
}

}  // namespace

int64_t max_split_k_topk_rows(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  return k <= kMaxFastTopK && split_k_row_pays(vocab, dtype) ? two_launch_max_rows(vocab, dtype, k, device) : 0;
}

// Split-k in clusters where its batch takes them (topk_cluster_batch: its waves by K, its bytes at
// K = 1), up to SMs / 8 rows always (1.09-2.65x over a block per row at 16 rows, H100; at 8 rows
// 0.99-2.39x over the better of a block per row and two launches, H200, 2026-12-02), past it where
// clusters_beat_blocks; else split-k's two launches up to two_launch_max_rows, else a block per
// row. Before 2026-12-02 (bench/RESULTS.md, "Top-k
// dispatch"), clusters took every batch in one wave and K = 1 in up to three, and the two launches
// up to SMs / 4 rows (fp32, or 16-bit rows one cluster holds in two waves): in the run that
// replaced it, 128 x 32000 K = 1024 took 25.78 us in 1-CTA clusters against 14.85 for a block per
// row, 32 x 128256 f32 K = 1024 38.86 us in two launches against 26.47, 32 x 256000 f32 K = 50
// 30.95 us in three waves of clusters against 19.27, and 64 x 256000 bf16 K = 1 22.90 us a block
// per row against 13.10.
TopkAlgorithm choose_topk_algorithm(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  if (k > kMaxFastTopK) return TopkAlgorithm::radix_select;
  if (!split_k_row_pays(vocab, dtype)) return TopkAlgorithm::fused;
  const kernels::TopkClusterBatch clusters =
      kernels::topk_cluster_batch(rows, vocab, dtype, k, device, kernels::SplitSizing::per_batch);
  // Clusters that lose to a block are under 4 CTAs a row, so rows of under ~400 KB, which past
  // SMs / 8 rows take two launches only at K = 1, whose clusters are never that narrow.
  if (clusters.waves != 0) {
    const bool take_clusters = rows <= device.sm_count / 8 || clusters_beat_blocks(clusters, vocab, dtype, k);
    return take_clusters ? TopkAlgorithm::split_k : TopkAlgorithm::fused;
  }
  return rows <= two_launch_max_rows(vocab, dtype, k, device) ? TopkAlgorithm::split_k : TopkAlgorithm::fused;
}

// Short rows (at most 32 KB, K <= 64: topk_warp_row.cu). Block per row / warp per row, H100, K 1
// and 50 only (bench/RESULTS.md, "Bound-and-list warp per row"). Past one wave of blocks (two an
// SM) the warps win: 512 and 1024 rows of 1000-4000 tokens 1.30-4.35x, 2048 and 8192 rows ran the
// first warp design at 1.4-5.9x, and rows of 8000-16000 tokens up to 32 KB 1.24-2.31x
// (topk_launch.hpp). Within one wave a lone warp's row must be as quick as a block's:
// at K > 1 up to ~1000 tokens (64-256 rows of 1000: 1.10-1.91x; of 2000: 0.85-0.97x; of 4000:
// 0.67-0.87x); at K = 1, whose warp reads its row once and keeps no list, up to 8 KB (2000
// tokens 1.35-1.47x with two reads; 4000 bf16 1.03-1.08x; 4000 f32 0.82-0.88x, and 0.90-0.98x
// with one read).
bool warp_rows_pay(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  if (rows > int64_t{2} * device.sm_count) return true;
  return k == 1 ? vocab * static_cast<int64_t>(dtype_size(dtype)) <= 8192 : vocab <= 1024;
}

}  // namespace softk::detail
