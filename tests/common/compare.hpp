// Comparisons with an explicit tolerance |got - want| <= abs + rel * |want|, chosen per output
// type from the error analysis below (not tuned until green), and exact comparisons.
//
// Why these numbers (fp32 arithmetic on the GPU against a double oracle):
//  - A probability is exp(y) / d with y = (x - m) / T. In fp32, y carries a rounding error of at
//    most |y| * 2^-24, and exp (even __expf: 2 + 1.17 |y| ulp) adds a few ulp; for the |y| <= 87
//    that matter before underflow that is <= 1e-5 relative. d sums positive terms by a tree:
//    log2(V) * 2^-24 <= 1.5e-6 for V = 2^24. So fp32 output: rel 1e-4 (about 6x margin).
//    abs 1e-37 only covers underflow: below FLT_MIN (1.2e-38) an fp32 kernel may flush to 0 or
//    keep a denormal with few bits. It deliberately does *not* cover small probabilities: at
//    V = 256000 every p is ~4e-6, and an abs of 1e-6 would hide a 25% error.
//  - f16 output: the fp32 value above rounded to nearest: half an ulp is <= 2^-11 of the value,
//    plus the fp32 error: rel 2^-11 + 1e-4. Below 2^-14 f16 is subnormal with a fixed ulp of
//    2^-24, so abs is half of that, 2^-25.
//  - bf16 output: 8 bits of precision: rel 2^-8 + 1e-4; the exponent range is fp32's.
//  - log-probs: y - log d is an absolute quantity: the relative error of d (<= 1e-5, above)
//    becomes an absolute error of log d; y's own rounding is relative to |y|. abs 5e-5, rel 1e-5.
// A dropped or double-counted element changes every probability of its row by its own share;
// the spikes, constant and adversarial inputs make that share large, so such bugs are caught by
// the relative bound even at huge V.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/inputs.hpp"
#include "softk/types.hpp"

namespace softk_test {

struct Tolerance {
  double abs;
  double rel;
};

inline Tolerance prob_tolerance(softk::DType out_dtype) {
  switch (out_dtype) {
    case softk::DType::f32: return {1e-37, 1e-4};
    case softk::DType::f16: return {2.9802322387695312e-08 /* 2^-25 */, 4.8828125e-4 /* 2^-11 */ + 1e-4};
    case softk::DType::bf16: return {1e-37, 3.90625e-3 /* 2^-8 */ + 1e-4};
  }
  return {0.0, 0.0};
}

inline Tolerance log_prob_tolerance() { return {5e-5, 1e-5}; }

/// got vs want under the contract's non-finite rules: a NaN must stay NaN, an infinity must be
/// the same infinity, and a finite want needs a finite got within tolerance.
inline bool within(double got, double want, Tolerance t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!std::isfinite(got)) return false;
  return std::fabs(got - want) <= t.abs + t.rel * std::fabs(want);
}

/// Decodes `count` output elements of `dtype` to fp32.
inline std::vector<float> decode(softk::DType dtype, const void* src, std::size_t count) {
  std::vector<float> out(count);
  parallel_for(static_cast<int64_t>(count), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[static_cast<std::size_t>(i)] = load_as(dtype, src, i);
  }, int64_t{1} << 20);
  return out;
}

namespace detail {

/// Scans [0, n) in parallel with `bad(i) -> bool` and returns the number of bad elements and the
/// first few (lowest index) descriptions from `describe(i)`.
template <class Bad, class Describe>
::testing::AssertionResult scan(int64_t n, Bad bad, Describe describe, const std::string& what) {
  std::mutex mu;
  int64_t total = 0;
  std::vector<int64_t> first;
  constexpr std::size_t kShow = 8;
  parallel_for(n, [&](int64_t b, int64_t e) {
    int64_t count = 0;
    std::vector<int64_t> mine;
    for (int64_t i = b; i < e; ++i)
      if (bad(i)) {
        ++count;
        if (mine.size() < kShow) mine.push_back(i);
      }
    std::lock_guard<std::mutex> lock(mu);
    total += count;
    first.insert(first.end(), mine.begin(), mine.end());
  }, int64_t{1} << 18);
  if (total == 0) return ::testing::AssertionSuccess();
  std::sort(first.begin(), first.end());
  if (first.size() > kShow) first.resize(kShow);
  std::ostringstream msg;
  msg << what << ": " << total << " of " << n << " elements wrong; first:";
  for (int64_t i : first) msg << "\n    " << describe(i);
  return ::testing::AssertionFailure() << msg.str();
}

inline std::string fmt(double x) {
  std::ostringstream s;
  s.precision(9);
  s << x;
  return s.str();
}

}  // namespace detail

/// Element-wise got vs want ([rows, cols] dense) within `tol`.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                                            int64_t cols, Tolerance tol, const std::string& what) {
  const int64_t n = rows * cols;
  if (static_cast<int64_t>(got.size()) < n || static_cast<int64_t>(want.size()) < n)
    return ::testing::AssertionFailure() << what << ": size mismatch (" << got.size() << " / " << want.size() << " for "
                                         << n << ")";
  return detail::scan(
      n, [&](int64_t i) { return !within(got[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)], tol); },
      [&](int64_t i) {
        const double g = got[static_cast<std::size_t>(i)], w = want[static_cast<std::size_t>(i)];
        return "[row " + std::to_string(i / cols) + ", col " + std::to_string(i % cols) + "] got " + detail::fmt(g) +
               ", want " + detail::fmt(w) + " (|diff| " + detail::fmt(std::fabs(g - w)) + ", allowed " +
               detail::fmt(tol.abs + tol.rel * std::fabs(w)) + ")";
      },
      what);
}

/// Exact equality of two int32 arrays ([rows, cols]); used for top-k indices and row status.
inline ::testing::AssertionResult all_equal(const std::vector<int32_t>& got, const std::vector<int32_t>& want, int64_t rows,
                                            int64_t cols, const std::string& what) {
  const int64_t n = rows * cols;
  if (static_cast<int64_t>(got.size()) < n || static_cast<int64_t>(want.size()) < n)
    return ::testing::AssertionFailure() << what << ": size mismatch";
  return detail::scan(
      n, [&](int64_t i) { return got[static_cast<std::size_t>(i)] != want[static_cast<std::size_t>(i)]; },
      [&](int64_t i) {
        return "[row " + std::to_string(i / cols) + ", slot " + std::to_string(i % cols) + "] got " +
               std::to_string(got[static_cast<std::size_t>(i)]) + ", want " +
               std::to_string(want[static_cast<std::size_t>(i)]);
      },
      what);
}

/// Bitwise equality of two byte arrays (determinism, graph replay).
inline ::testing::AssertionResult bitwise_equal(const void* a, const void* b, std::size_t bytes, const std::string& what) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  if (std::memcmp(x, y, bytes) == 0) return ::testing::AssertionSuccess();
  std::size_t first = 0;
  while (x[first] == y[first]) ++first;
  std::size_t count = 0;
  for (std::size_t i = 0; i < bytes; ++i) count += x[i] != y[i];
  return ::testing::AssertionFailure() << what << ": " << count << " of " << bytes << " bytes differ, first at byte "
                                       << first;
}

/// Every row of a dense [rows, cols] probability array sums to 1, except rows whose oracle
/// status says otherwise: all_masked rows sum to 0 and has_nan rows are all NaN. The bound is
/// the sum of the element bounds, rel + cols * abs (the oracle's own sum is 1 to 1e-15).
inline ::testing::AssertionResult rows_sum_to_one(const std::vector<float>& got, int64_t rows, int64_t cols,
                                                  const std::vector<int32_t>& oracle_status, Tolerance tol,
                                                  const std::string& what) {
  std::vector<double> sums(static_cast<std::size_t>(rows));
  parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < cols; ++c) s += got[static_cast<std::size_t>(r * cols + c)];
      sums[static_cast<std::size_t>(r)] = s;
    }
  }, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, cols)));
  const double bound = tol.rel + static_cast<double>(cols) * tol.abs;
  return detail::scan(
      rows,
      [&](int64_t r) {
        const double s = sums[static_cast<std::size_t>(r)];
        switch (static_cast<softk::RowStatus>(oracle_status[static_cast<std::size_t>(r)])) {
          case softk::RowStatus::has_nan: return !std::isnan(s);
          case softk::RowStatus::all_masked: return s != 0.0;
          case softk::RowStatus::ok: break;
        }
        return !(std::fabs(s - 1.0) <= bound);
      },
      [&](int64_t r) {
        return "row " + std::to_string(r) + " sums to " + detail::fmt(sums[static_cast<std::size_t>(r)]) + " (status " +
               std::to_string(oracle_status[static_cast<std::size_t>(r)]) + ", bound " + detail::fmt(bound) + ")";
      },
      what);
}

}  // namespace softk_test
