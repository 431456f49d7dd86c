// The dispatcher's short-row gate (dispatch.cpp, warp_rows_pay) at its boundaries, on a described
// device: no GPU needed. The rule's measurements are in bench/RESULTS.md ("Bound-and-list warp
// per row").
#include <gtest/gtest.h>

#include "dispatch.hpp"

namespace {

using softk::DType;
using softk::detail::warp_rows_pay;

const softk::DeviceInfo kH100{132, 227 * 1024, 50 * 1024 * 1024, 9};

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

}  // namespace
