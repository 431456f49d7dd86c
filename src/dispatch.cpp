#include "dispatch.hpp"

#include "kernels/softmax_launch.hpp"
#include "kernels/topk_launch.hpp"

namespace softk::detail {

// Crossovers measured on an H200 (132 SMs), bench/RESULTS.md "Softmax dispatch":
//  - split-k wins up to ~16 rows (8 x 32000: 9.1 us vs 10.5 for a block per row) and loses
//    from 64 rows on (64 x 128256 f32: 42 us two-pass vs 59 split-k);
//  - below ~24K columns a row is too short to repay split-k's second launch (4 x 16K: two-pass);
//  - the register kernel wins only while a row fits 256 threads x 6 vectors and there are
//    enough rows to fill the GPU (2048 x 4K f32: 21.5 us vs 23 two-pass; 128 x 1K: two-pass;
//    2048 x 8K f32, past its capacity: two-pass 38 us vs 50 for the old 512-thread tier);
//  - everything else is two-pass; the register + shared-memory tier never won a measured shape
//    (256 x 128256 bf16: 137 us vs 103 two-pass), so auto does not choose it.
SoftmaxAlgorithm choose_softmax_algorithm(int64_t rows, int64_t vocab, DType dtype, const DeviceInfo& device) {
  const bool few_rows = rows * 8 <= device.sm_count;
  if (few_rows && vocab >= 24576) return SoftmaxAlgorithm::split_k;
  const bool many_rows = rows >= int64_t{2} * device.sm_count;
  if (many_rows && vocab <= kernels::register_capacity(dtype)) return SoftmaxAlgorithm::register_resident;
  return SoftmaxAlgorithm::two_pass;
}

// Top-k (H200, bench/RESULTS.md "Top-k dispatch"): K past the fused path's limit goes to radix
// select. Split-k pays for itself once a row is long enough; 32000 is the shortest V measured,
// and split-k wins there except at K > 256 in bf16 in two launches:
//  - from 64000 bytes a row (1 x 32000 bf16, K = 50: split-k 11.1 us vs fused 19.6; K = 256:
//    15.3 vs 28.6; K = 1024 where the row takes one cluster: 14.9 vs 22.8 on an H100);
//  - K > 256 in two launches (no cluster for the row): from 128000 bytes (1 x 32000 f32, K =
//    1024: split-k 26.6 us vs fused 33.8; 1 x 32000 bf16, 64000 bytes: fused 31.7 vs 34.3);
// and only while the rows alone leave most SMs idle: up to SMs / 4 rows (256 rows: fused). That
// holds for both forms of split-k. The one-cluster form (topk_cluster.cu) runs 7 rows at a time
// when a row takes 16 CTAs, yet at 32 rows it is still about level with a block per row (32 x
// 128256 f32, K = 50: 34.8 us vs fused 36.8; bf16 151936: 44.3 vs 40.5; 32 x 256000 f32:
// 43.4 vs 59.9), and shorter rows take fewer CTAs (32 x 32000 f32: 13.3 vs 20.9). Under
// `automatic` a batch of more rows than that takes narrower clusters, more of them at a time
// (topk_cluster.cu, cluster_plan_for): 32 x 128256 f32 K = 50 in two waves of 6-CTA clusters,
// 20.1 us vs fused 29.3; 32 x 256000 f32 K = 50 in 8-CTA clusters, 34.5 vs 44.4.
int64_t max_split_k_topk_rows(int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  if (k > kMaxFastTopK) return 0;
  const int64_t row_bytes = vocab * static_cast<int64_t>(dtype_size(dtype));
  const bool short_rows_pay =
      k <= 256 || kernels::topk_cluster_fits(1, vocab, dtype, k, device, kernels::SplitSizing::per_row);
  const int64_t min_row_bytes = short_rows_pay ? 64000 : 128000;
  return row_bytes >= min_row_bytes ? device.sm_count / 4 : 0;
}

TopkAlgorithm choose_topk_algorithm(int64_t rows, int64_t vocab, DType dtype, int32_t k, const DeviceInfo& device) {
  if (k > kMaxFastTopK) return TopkAlgorithm::radix_select;
  if (rows <= max_split_k_topk_rows(vocab, dtype, k, device)) return TopkAlgorithm::split_k;
  return TopkAlgorithm::fused;
}

}  // namespace softk::detail
