// The dispatcher's rules at their boundaries, on a described device: no GPU needed. The short-row
// gate (warp_rows_pay) is measured in bench/RESULTS.md ("Bound-and-list warp per row"), the
// softmax register kernel's row limit in "Softmax dispatch".
#include <gtest/gtest.h>

#include "dispatch.hpp"
#include "kernels/topk_launch.hpp"

namespace {

using softk::DType;
using softk::SoftmaxAlgorithm;
using softk::detail::choose_softmax_algorithm;
using softk::detail::warp_rows_pay;

const softk::DeviceInfo kH100{132, 227 * 1024, 50 * 1024 * 1024, 9, 65535};

TEST(WarpRowsPay, PastOneWaveOfBlocksAtAnyShortRow) {
  EXPECT_FALSE(warp_rows_pay(264, 4096, DType::f32, 50, kH100));
  EXPECT_TRUE(warp_rows_pay(265, 4096, DType::f32, 50, kH100));
  EXPECT_TRUE(warp_rows_pay(265, 4096, DType::f32, 1, kH100));
}

TEST(WarpRowsPay, WithinOneWaveOnlyRowsAsQuickAsABlocks) {
  EXPECT_TRUE(warp_rows_pay(1, 1024, DType::f32, 50, kH100));
  EXPECT_FALSE(warp_rows_pay(1, 1025, DType::bf16, 50, kH100));
  // K = 1 by bytes: 2048 fp32 or 4096 16-bit tokens.
  EXPECT_TRUE(warp_rows_pay(8, 2048, DType::f32, 1, kH100));
  EXPECT_FALSE(warp_rows_pay(8, 2049, DType::f32, 1, kH100));
  EXPECT_TRUE(warp_rows_pay(8, 4096, DType::bf16, 1, kH100));
  EXPECT_TRUE(warp_rows_pay(8, 4096, DType::f16, 1, kH100));
  EXPECT_FALSE(warp_rows_pay(8, 2049, DType::f32, 2, kH100));
}

TEST(WarpRowFits, RowsOfAtMost32KBAtKUpTo64) {
  using softk::kernels::topk_warp_row_fits;
  EXPECT_TRUE(topk_warp_row_fits(8192, DType::f32, 64));
  EXPECT_FALSE(topk_warp_row_fits(8193, DType::f32, 50));
  EXPECT_TRUE(topk_warp_row_fits(16384, DType::bf16, 50));
  EXPECT_FALSE(topk_warp_row_fits(16385, DType::f16, 50));
  EXPECT_FALSE(topk_warp_row_fits(1000, DType::f32, 65));
}

TEST(SoftmaxDispatch, RegisterKernelOnlyForManyRowsOfAtMost6144Tokens) {
  EXPECT_EQ(choose_softmax_algorithm(2048, 6144, DType::f32, kH100), SoftmaxAlgorithm::register_resident);
  EXPECT_EQ(choose_softmax_algorithm(2048, 6144, DType::bf16, kH100), SoftmaxAlgorithm::register_resident);
  // 16-bit rows past it still fit the register kernel, but two-pass measured faster at 8192.
  EXPECT_EQ(choose_softmax_algorithm(2048, 6145, DType::bf16, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(2048, 8192, DType::f16, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(2048, 6145, DType::f32, kH100), SoftmaxAlgorithm::two_pass);
  // Too few rows to fill the GPU: two-pass at any length.
  EXPECT_EQ(choose_softmax_algorithm(263, 4096, DType::f32, kH100), SoftmaxAlgorithm::two_pass);
}

TEST(SoftmaxDispatch, SplitKForFewerRowsTheLongerTheRow) {
  // Up to SMs / 8 rows from 24576 tokens.
  EXPECT_EQ(choose_softmax_algorithm(16, 24576, DType::bf16, kH100), SoftmaxAlgorithm::split_k);
  EXPECT_EQ(choose_softmax_algorithm(16, 24575, DType::bf16, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(17, 24576, DType::bf16, kH100), SoftmaxAlgorithm::two_pass);
  // Up to SMs / 4 rows from 128000 bytes.
  EXPECT_EQ(choose_softmax_algorithm(33, 32000, DType::f32, kH100), SoftmaxAlgorithm::split_k);
  EXPECT_EQ(choose_softmax_algorithm(33, 32000, DType::bf16, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(33, 64000, DType::f16, kH100), SoftmaxAlgorithm::split_k);
  EXPECT_EQ(choose_softmax_algorithm(34, 64000, DType::f16, kH100), SoftmaxAlgorithm::two_pass);
  // Up to SMs / 2 rows of 128000 fp32 tokens or more; never so in 16 bits.
  EXPECT_EQ(choose_softmax_algorithm(66, 128000, DType::f32, kH100), SoftmaxAlgorithm::split_k);
  EXPECT_EQ(choose_softmax_algorithm(66, 127999, DType::f32, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(67, 256000, DType::f32, kH100), SoftmaxAlgorithm::two_pass);
  EXPECT_EQ(choose_softmax_algorithm(64, 256000, DType::bf16, kH100), SoftmaxAlgorithm::two_pass);
}

}  // namespace
