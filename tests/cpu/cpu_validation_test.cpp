// Argument validation of the CPU backend (softk::cpu::softmax / topk): every bad argument throws
// softk::Error naming the argument and its value, before any element is read or written (the
// pointers are fake; touching one would crash the test).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/bad_arguments.hpp"
#include "softk/cpu.hpp"

namespace {

using namespace softk_test;
using softk::DType;

void cpu_softmax(const softk::LogitsView& v, void* out, const softk::SoftmaxOptions& o) { softk::cpu::softmax(v, out, o); }

TEST(CpuValidation, SoftmaxRejectsBadLogits) {
  for (const auto& c : bad_logits_cases()) {
    softk::LogitsView v = valid_fake_logits();
    c.mutate(v);
    EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(v, fake_pointer(2), {}); }, c.needles)) << c.name;
  }
}

TEST(CpuValidation, SoftmaxRejectsNullOut) {
  EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(valid_fake_logits(), nullptr, {}); }, {"out", "null"}));
}

TEST(CpuValidation, SoftmaxRejectsMisalignedOutAndRowStatus) {
  EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(valid_fake_logits(), off_alignment(fake_pointer(2)), {}); },
                                  {"out", "aligned"}));
  softk::SoftmaxOptions o;
  o.row_status = off_alignment(static_cast<int32_t*>(fake_pointer(3)));
  EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(valid_fake_logits(), fake_pointer(2), o); }, {"row_status", "aligned"}));
}

TEST(CpuValidation, ConvertToF32RejectsNullPointers) {
  float dst[4];
  const uint16_t src[4] = {};
  EXPECT_TRUE(throws_error_naming([&] { softk::convert_to_f32(nullptr, DType::bf16, dst, 4); }, {"src", "null"}));
  EXPECT_TRUE(throws_error_naming([&] { softk::convert_to_f32(src, DType::bf16, nullptr, 4); }, {"dst", "null"}));
  softk::convert_to_f32(nullptr, DType::bf16, nullptr, 0);  // nothing to convert: no pointer is read
}

TEST(CpuValidation, SoftmaxRejectsBadTemperature) {
  for (const auto& t : bad_temperatures()) {
    softk::SoftmaxOptions o;
    o.temperature = t.value;
    EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(valid_fake_logits(), fake_pointer(2), o); }, {"temperature", t.shown}))
        << t.name;
  }
}

TEST(CpuValidation, SoftmaxRejectsOutDtypeMismatch) {
  for (const auto& c : bad_out_dtypes()) {
    softk::LogitsView v = valid_fake_logits();
    v.dtype = c.input;
    softk::SoftmaxOptions o;
    o.out_dtype = c.out;
    EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(v, fake_pointer(2), o); }, {"out_dtype", c.shown})) << c.name;
  }
}

// An out_dtype outside the enum must be refused with its numeric value in the message (the
// DESIGN.md rule "names the argument and its value"), not a placeholder like "unknown".
TEST(CpuValidation, SoftmaxRejectsOutOfRangeOutDtypeNamingItsValue) {
  softk::SoftmaxOptions o;
  o.out_dtype = static_cast<DType>(9);
  EXPECT_TRUE(throws_error_naming([&] { cpu_softmax(valid_fake_logits(), fake_pointer(2), o); }, {"out_dtype", "9"}));
}

TEST(CpuValidation, TopkRejectsBadLogits) {
  for (const auto& c : bad_logits_cases()) {
    softk::LogitsView v = valid_fake_logits();
    c.mutate(v);
    EXPECT_TRUE(throws_error_naming(
        [&] { softk::cpu::topk(v, 5, static_cast<float*>(fake_pointer(2)), static_cast<int32_t*>(fake_pointer(3)), {}); },
        c.needles))
        << c.name;
  }
}

TEST(CpuValidation, TopkRejectsBadK) {
  // V = 1000: K must be in [1, V].
  for (int32_t k : {0, -3, 1001, INT32_MAX, INT32_MIN}) {
    EXPECT_TRUE(throws_error_naming(
        [&] {
          softk::cpu::topk(valid_fake_logits(), k, static_cast<float*>(fake_pointer(2)), static_cast<int32_t*>(fake_pointer(3)), {});
        },
        {"k", std::to_string(k)}))
        << "k = " << k;
  }
}

TEST(CpuValidation, TopkRejectsNullOutputs) {
  EXPECT_TRUE(throws_error_naming(
      [&] { softk::cpu::topk(valid_fake_logits(), 5, nullptr, static_cast<int32_t*>(fake_pointer(3)), {}); }, {"probs", "null"}));
  EXPECT_TRUE(throws_error_naming(
      [&] { softk::cpu::topk(valid_fake_logits(), 5, static_cast<float*>(fake_pointer(2)), nullptr, {}); }, {"indices", "null"}));
  float* probs = static_cast<float*>(fake_pointer(2));
  int32_t* indices = static_cast<int32_t*>(fake_pointer(3));
  EXPECT_TRUE(throws_error_naming([&] { softk::cpu::topk(valid_fake_logits(), 5, off_alignment(probs), indices, {}); },
                                  {"probs", "aligned"}));
  EXPECT_TRUE(throws_error_naming([&] { softk::cpu::topk(valid_fake_logits(), 5, probs, off_alignment(indices), {}); },
                                  {"indices", "aligned"}));
}

TEST(CpuValidation, TopkRejectsBadTemperature) {
  for (const auto& t : bad_temperatures()) {
    softk::TopkOptions o;
    o.temperature = t.value;
    EXPECT_TRUE(throws_error_naming(
        [&] { softk::cpu::topk(valid_fake_logits(), 5, static_cast<float*>(fake_pointer(2)), static_cast<int32_t*>(fake_pointer(3)), o); },
        {"temperature", t.shown}))
        << t.name;
  }
}

// The helper itself must be able to fail: a call that does not throw, throws the wrong type, or
// names the wrong argument is reported. (Guards against a validation test that always passes.)
TEST(CpuValidation, HelperRejectsWrongOutcomes) {
  EXPECT_FALSE(throws_error_naming([] {}, {"x"}));
  EXPECT_FALSE(throws_error_naming([] { throw std::runtime_error("k"); }, {"k"}));
  EXPECT_FALSE(throws_error_naming([] { throw softk::Error("softk: vocab must be >= 1 (got 10)"); }, {"vocab", "0"}));
  EXPECT_FALSE(throws_error_naming([] { throw softk::Error("softk: out_dtype bad (got bf16)"); }, {"out_dtype", "f16"}));
  EXPECT_TRUE(throws_error_naming([] { throw softk::Error("softk: logits.vocab must be >= 1 (got 0)"); }, {"vocab", "0"}));
  EXPECT_TRUE(throws_error_naming([] { throw softk::Error("softk: temperature bad (got -inf)"); }, {"temperature", "inf"}));
}

}  // namespace
