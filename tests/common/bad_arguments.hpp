// Shared table of bad arguments for the validation tests of every op (cpu::, the GPU ops and
// reference::). Each case breaks exactly one argument of an otherwise valid call; the op must
// throw softk::Error whose message names that argument and its value.
//
// Pointers are fake: small non-null addresses inside the never-mapped first page range, so an op
// that touched one (host read, or a launch on a real device) would crash or fault instead of
// passing. Validation must reject the call before it gets that far.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "softk/softmax.hpp"
#include "softk/topk.hpp"
#include "softk/types.hpp"

namespace softk_test {

inline void* fake_pointer(int tag) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 + 0x100 * tag)); }
/// `pointer` moved `bytes` on: off the alignment of any element wider than `bytes`.
template <class T>
T* off_alignment(T* pointer, int bytes = 2) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(pointer) + bytes);
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// True when `token` occurs in `text` (case-insensitive) as a whole word: not glued to letters,
/// digits or '_' on either side, and for a numeric token not continuing a number ('-' or '.'
/// before it, ".digit" after it). So "0" is not found inside "1000" or "1.0", "-1" not inside
/// "-10", "f16" not inside "bf16", while "data" is found in "logits.data".
inline bool contains_token(const std::string& text, const std::string& token) {
  const std::string t = lower(text), k = lower(token);
  if (k.empty()) return true;
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  const bool numeric = digit(k[0]) || (k.size() > 1 && k[0] == '-' && digit(k[1]));
  for (std::size_t at = t.find(k); at != std::string::npos; at = t.find(k, at + 1)) {
    const char before = at == 0 ? ' ' : t[at - 1];
    const std::size_t end = at + k.size();
    const char after = end >= t.size() ? ' ' : t[end];
    const char after2 = end + 1 >= t.size() ? ' ' : t[end + 1];
    const bool left_ok = !alnum(before) && !(numeric && (before == '-' || before == '.'));
    const bool right_ok = !alnum(after) && !(numeric && after == '.' && digit(after2));
    if (left_ok && right_ok) return true;
  }
  return false;
}

/// `call` must throw softk::Error whose message contains every needle (each as a token).
template <class F>
::testing::AssertionResult throws_error_naming(F&& call, const std::vector<std::string>& needles) {
  try {
    call();
  } catch (const softk::Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles)
      if (!contains_token(msg, n))
        return ::testing::AssertionFailure() << "softk::Error message \"" << msg << "\" does not name \"" << n << "\"";
    return ::testing::AssertionSuccess();
  } catch (const softk::CudaError& e) {
    return ::testing::AssertionFailure() << "threw softk::CudaError instead of softk::Error (validation must come "
                                            "before any CUDA call): "
                                         << e.what();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-softk::Error exception: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw something that is not a std::exception";
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// A valid [2, 3, 1000] f32 view on a fake pointer.
inline softk::LogitsView valid_fake_logits() {
  softk::LogitsView v;
  v.data = fake_pointer(1);
  v.dtype = softk::DType::f32;
  v.batch = 2;
  v.steps = 3;
  v.vocab = 1000;
  v.row_stride = 0;
  return v;
}

struct BadLogitsCase {
  std::string name;
  std::function<void(softk::LogitsView&)> mutate;
  std::vector<std::string> needles;
};

inline std::vector<BadLogitsCase> bad_logits_cases() {
  using V = softk::LogitsView;
  return {
      {"null_data", [](V& v) { v.data = nullptr; }, {"data"}},
      {"dtype_7", [](V& v) { v.dtype = static_cast<softk::DType>(7); }, {"dtype", "7"}},
      {"dtype_minus_1", [](V& v) { v.dtype = static_cast<softk::DType>(-1); }, {"dtype", "-1"}},
      {"batch_0", [](V& v) { v.batch = 0; }, {"batch", "0"}},
      {"batch_minus_2", [](V& v) { v.batch = -2; }, {"batch", "-2"}},
      {"steps_0", [](V& v) { v.steps = 0; }, {"steps", "0"}},
      {"steps_minus_1", [](V& v) { v.steps = -1; }, {"steps", "-1"}},
      {"vocab_0", [](V& v) { v.vocab = 0; }, {"vocab", "0"}},
      {"vocab_minus_5", [](V& v) { v.vocab = -5; }, {"vocab", "-5"}},
      {"vocab_2pow31", [](V& v) { v.vocab = int64_t{1} << 31; }, {"vocab", "2147483648"}},
      {"vocab_2pow40", [](V& v) { v.vocab = int64_t{1} << 40; }, {"vocab", "1099511627776"}},
      {"row_stride_below_vocab", [](V& v) { v.row_stride = 999; }, {"row_stride", "999"}},
      {"row_stride_negative", [](V& v) { v.row_stride = -1; }, {"row_stride", "-1"}},
      {"rows_overflow", [](V& v) { v.batch = v.steps = int64_t{1} << 40; }, {"batch"}},
      // 6 rows of 2^59: byte offsets past int64_t.
      {"row_stride_overflow", [](V& v) { v.row_stride = int64_t{1} << 59; }, {"row_stride", "576460752303423488"}},
      // An f32 view two bytes off its element alignment: the kernels' scalar loads would fault.
      {"misaligned_data", [](V& v) { v.data = static_cast<const char*>(v.data) + 2; }, {"data", "aligned"}},
  };
}

struct BadTemperatureCase {
  std::string name;
  float value;
  std::string shown;  ///< how the value must appear in the message
};

inline std::vector<BadTemperatureCase> bad_temperatures() {
  return {{"zero", 0.0f, "0"},
          {"negative_zero", -0.0f, ""},  // printed as "-0" or "-0.0" or "0": only the name is checked
          {"negative", -1.0f, "-1"},
          {"nan", std::numeric_limits<float>::quiet_NaN(), "nan"},
          {"plus_inf", std::numeric_limits<float>::infinity(), "inf"},
          {"minus_inf", -std::numeric_limits<float>::infinity(), "inf"},
          // Subnormal: log2(e) / T overflows fp32, which would turn every row into a NaN row.
          {"subnormal", std::numeric_limits<float>::denorm_min(), "1.4013e-45"}};
}

/// (input dtype, out_dtype) pairs that are neither f32 output nor the input's own dtype; `shown`
/// is how the bad value must appear. (An out-of-range enum value has its own tests.)
struct BadOutDtypeCase {
  std::string name;
  softk::DType input, out;
  std::string shown;
};

inline std::vector<BadOutDtypeCase> bad_out_dtypes() {
  using D = softk::DType;
  return {{"f32_to_f16", D::f32, D::f16, "f16"},
          {"f32_to_bf16", D::f32, D::bf16, "bf16"},
          {"f16_to_bf16", D::f16, D::bf16, "bf16"},
          {"bf16_to_f16", D::bf16, D::f16, "f16"}};
}

}  // namespace softk_test
