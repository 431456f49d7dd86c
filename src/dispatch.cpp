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
// select. Split-k pays for itself once a row is long enough; 32000 is the shortest V measured,
// and split-k wins there except at K > 256 in bf16 in two launches (H200):
//  - from 64000 bytes a row (1 x 32000 bf16, K = 50: split-k 11.1 us vs fused 19.6; K = 256:
//    15.3 vs 28.6; K = 1024 where the row takes one cluster: 14.9 vs 22.8 on an H100);
//  - K > 256 in two launches (no cluster for the row): from 128000 bytes (1 x 32000 f32, K =
//    1024: split-k 26.6 us vs fused 33.8; 1 x 32000 bf16, 64000 bytes: fused 31.7 vs 34.3).
namespace {

/// Whether one row of this (V, dtype, K) runs as one thread-block cluster under split-k.
bool row_takes_a_cluster(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  return kernels::topk_cluster_waves(1, vocab, dtype, k, device, kernels::SplitSizing::per_row) != 0;
}

bool split_k_row_pays(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  const int64_t row_bytes = vocab * static_cast<int64_t>(dtype_size(dtype));
  const bool short_rows_pay = k <= 256 || row_takes_a_cluster(vocab, dtype, k, device);
  return row_bytes >= (short_rows_pay ? 64000 : 128000);
}

/// The most rows split-k may take outside one wave of clusters (in two launches among them).
int64_t split_k_max_rows(const DeviceInfo& device) { return device.sm_count / 4; }

}  // namespace

int64_t max_split_k_topk_rows(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  return k <= kMaxFastTopK && split_k_row_pays(vocab, dtype, k, device) ? split_k_max_rows(device) : 0;
}

// Which rows take split-k, by how its batch runs (H100, one run, fused against split-k under
// `automatic`, V 32000-256000, K 1-1024; bench/RESULTS.md):
//  - up to SMs / 8 rows, always: 1.09-2.65x over fused at 16 rows, in one or two waves of
//    clusters or in two launches;
//  - at any row count, where the batch runs in one wave of clusters: 64 x 32000 f32 K = 50 18.2 ->
//    12.0 us, 64 x 50257 bf16 K = 256 27.3 -> 17.2 (2-CTA clusters; 1.27-1.75x at 64 rows, and
//    128 x 32000 in 1-CTA clusters 1.06-1.31x); in three waves (64 x 128256-256000, 4-CTA
//    clusters) split-k took 1.25-1.7x longer. K = 1, whose kernel has no threshold to agree on,
//    pays in up to three waves up to SMs / 2 rows (H200, against the one-read block argmax of
//    23b3128: 64 x 128256 1.05x f32, 1.18x bf16; 64 x 32000 0.97x / 1.06x), but not past them,
//    where the blocks alone fill the SMs (128 x 32000 in 2-CTA clusters 0.81x f32, 0.78x bf16);
//    in four or five waves 0.54-0.98x (64 x 151936, 128 x 50257 on; H100, against the fused core);
//  - up to SMs / 4 rows otherwise, except 16-bit logits of a row one cluster holds, whose block
//    per row streams half the bytes: 32 x 201088-256000 bf16 K = 50-256 in three waves of
//    clusters 0.88-0.96x, and K = 1024 in two launches 0.64-0.85x (32 x 128256 bf16: 58.2 us vs
//    fused 37.3); fp32 gains 1.02-1.31x there, bf16 in two waves 1.03-1.12x, and rows too long
//    for a cluster gain in two launches (32 x 2^20 bf16 K = 1024: 87.4 us vs fused 146.7).
TopkAlgorithm choose_topk_algorithm(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  if (k > kMaxFastTopK) return TopkAlgorithm::radix_select;
  if (!split_k_row_pays(vocab, dtype, k, device)) return TopkAlgorithm::fused;
  if (rows <= device.sm_count / 8) return TopkAlgorithm::split_k;
  if (k == 1 && rows > device.sm_count / 2) return TopkAlgorithm::fused;
  const int64_t waves = kernels::topk_cluster_waves(rows, vocab, dtype, k, device, kernels::SplitSizing::per_batch);
  const int64_t max_waves = k == 1 ? 3 : 1;
  if (waves != 0 && waves <= max_waves) return TopkAlgorithm::split_k;
  if (rows > split_k_max_rows(device)) return TopkAlgorithm::fused;  // split_k_row_pays held above
  const bool half_bytes_pay = waves == 2 || !row_takes_a_cluster(vocab, dtype, k, device);
  return dtype_size(dtype) == 4 || half_bytes_pay ? TopkAlgorithm::split_k : TopkAlgorithm::fused;
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
