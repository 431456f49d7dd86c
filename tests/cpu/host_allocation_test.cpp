// An op's checks of a valid call allocate nothing on the host: a decode loop runs them on every
// call, and a message built whether or not the check fails is a heap allocation or more a check
// (SOFTK_REQUIRE, src/validate.hpp). The pointers are fake: the checks never touch memory. The
// GPU ops' whole host path is counted in tests/gpu/host_allocation_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>

#include "common/bad_arguments.hpp"
#include "common/counting_new.hpp"
#include "softk/softmax.hpp"
#include "softk/topk.hpp"
#include "validate.hpp"

namespace {

using namespace softk_test;

TEST(HostAllocation, ValidTopkAndSoftmaxChecksAllocateNothing) {
  const softk::LogitsView logits = valid_fake_logits();
  softk::TopkOptions topk_options;
  topk_options.row_status = static_cast<int32_t*>(fake_pointer(4));
  topk_options.temperature = 0.7f;
  softk::SoftmaxOptions softmax_options;
  softmax_options.row_status = static_cast<int32_t*>(fake_pointer(4));
  const auto* probs = static_cast<const float*>(fake_pointer(2));
  const auto* indices = static_cast<const int32_t*>(fake_pointer(3));
  EXPECT_EQ(heap_allocations_during([&] {
              softk::detail::validate_topk_call(logits, 50, probs, indices, topk_options);
              softk::detail::validate_workspace(fake_pointer(5), 4096, 1024);
              softk::detail::validate_softmax_outputs(fake_pointer(2), softmax_options);
              softk::detail::validate_out_dtype(logits, softk::DType::f32);
              softk::detail::validate_temperature(softmax_options.temperature);
            }),
            0);
}

TEST(HostAllocation, DeviceFreeWorkspaceQueriesAllocateNothing) {
  // A forced fused top-k and a forced two-pass softmax are settled without the device.
  softk::TopkOptions topk_options;
  topk_options.algorithm = softk::TopkAlgorithm::fused;
  softk::SoftmaxOptions softmax_options;
  softmax_options.algorithm = softk::SoftmaxAlgorithm::two_pass;
  EXPECT_EQ(heap_allocations_during([&] {
              (void)softk::topk_workspace_size(valid_fake_logits(), 50, topk_options);
              (void)softk::softmax_workspace_size(valid_fake_logits(), softmax_options);
            }),
            0);
}

// The count sees the allocations a check makes: a failing one builds its message.
TEST(HostAllocation, AFailingCheckIsCounted) {
  EXPECT_GT(heap_allocations_during([] {
              try {
                softk::detail::validate_k(valid_fake_logits(), 0);
              } catch (const softk::Error&) {
              }
            }),
            0);
}

}  // namespace
