// The CPU oracle (softk::cpu, double precision) run over row chunks in parallel, plus
// oracle-free properties of a top-k answer checked straight from the logits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/compare.hpp"
#include "common/inputs.hpp"
#include "softk/cpu.hpp"

namespace softk_test {

/// The view of rows [r0, r1) of `h` as a standalone [r1 - r0, 1, V] tensor (same stride).
inline softk::LogitsView row_slice(const HostLogits& h, int64_t r0, int64_t r1) {
  softk::LogitsView v = h.host_view();
  v.data = static_cast<const unsigned char*>(v.data) + static_cast<std::size_t>(r0 * h.stride()) * h.esize();
  v.batch = r1 - r0;
  v.steps = 1;
  return v;
}

struct SoftmaxOracle {
  std::vector<float> probs;    ///< [rows, V], fp32
  std::vector<int32_t> status;  ///< [rows]
};

/// softk::cpu::softmax with fp32 output. The GPU outputs in f16/bf16 are compared against this
/// fp32 answer (not against the oracle's own f16/bf16 rounding, which could be one ulp off the
/// other way at a rounding midpoint).
inline SoftmaxOracle oracle_softmax(const HostLogits& h, float temperature) {
  SoftmaxOracle o;
  const int64_t rows = h.rows(), V = h.vocab;
  o.probs.resize(static_cast<std::size_t>(rows * V));
  o.status.resize(static_cast<std::size_t>(rows));
  parallel_for(rows, [&](int64_t r0, int64_t r1) {
    softk::SoftmaxOptions opt;
    opt.temperature = temperature;
    opt.out_dtype = softk::DType::f32;
    opt.row_status = o.status.data() + r0;
    softk::cpu::softmax(row_slice(h, r0, r1), o.probs.data() + r0 * V, opt);
  }, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, V)));
  return o;
}

struct TopkOracle {
  std::vector<float> probs;      ///< [rows, K]
  std::vector<int32_t> indices;  ///< [rows, K]
  std::vector<int32_t> status;   ///< [rows]
};

inline TopkOracle oracle_topk(const HostLogits& h, int32_t k, float temperature, bool log_probs) {
  TopkOracle o;
  const int64_t rows = h.rows();
  o.probs.resize(static_cast<std::size_t>(rows * k));
  o.indices.resize(static_cast<std::size_t>(rows * k));
  o.status.resize(static_cast<std::size_t>(rows));
  parallel_for(rows, [&](int64_t r0, int64_t r1) {
    softk::TopkOptions opt;
    opt.temperature = temperature;
    opt.log_probs = log_probs;
    opt.row_status = o.status.data() + r0;
    softk::cpu::topk(row_slice(h, r0, r1), k, o.probs.data() + r0 * k, o.indices.data() + r0 * k, opt);
  }, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, h.vocab)));
  return o;
}

/// Oracle-free checks of a top-k answer against the logits themselves (the contract's total
/// order: logit descending, then index ascending; -inf never selected):
///  - indices are in [0, V) or -1; -1 only as a suffix and only where the row has no unmasked
///    token left; no index twice;
///  - the selected logits are non-increasing, and equal logits have increasing indices;
///  - completeness: no unselected token beats the last selected one under the total order
///    (so the set is exactly the top-K, not merely K large values);
///  - probabilities (or log-probs) are non-increasing along the row.
/// NaN rows (index -1 everywhere, NaN probs) are checked for exactly that.
inline ::testing::AssertionResult topk_properties(const HostLogits& h, int32_t k, const std::vector<float>& probs,
                                                  const std::vector<int32_t>& indices) {
  const int64_t rows = h.rows(), V = h.vocab;
  std::vector<std::string> errors(static_cast<std::size_t>(rows));
  parallel_for(rows, [&](int64_t r0, int64_t r1) {
    std::vector<unsigned char> selected(static_cast<std::size_t>(V));
    for (int64_t r = r0; r < r1; ++r) {
      std::fill(selected.begin(), selected.end(), 0);
      const float* x = h.row(r);
      const int32_t* idx = indices.data() + r * k;
      const float* p = probs.data() + r * k;
      std::string& err = errors[static_cast<std::size_t>(r)];
      bool has_nan = false;
      int64_t unmasked = 0;
      for (int64_t v = 0; v < V; ++v) {
        has_nan |= std::isnan(x[v]);
        unmasked += x[v] != -kInf;
      }
      if (has_nan) {
        for (int32_t j = 0; j < k; ++j)
          if (idx[j] != -1 || !std::isnan(p[j])) {
            err = "NaN row: slot " + std::to_string(j) + " has index " + std::to_string(idx[j]) + " prob " +
                  detail::fmt(p[j]) + " (want -1, NaN)";
            break;
          }
        continue;
      }
      const int64_t expect_valid = std::min<int64_t>(k, unmasked);
      for (int32_t j = 0; j < k && err.empty(); ++j) {
        if (j >= expect_valid) {
          if (idx[j] != -1) err = "slot " + std::to_string(j) + " should be -1 (only " + std::to_string(unmasked) +
                                  " unmasked tokens) but is " + std::to_string(idx[j]);
          continue;
        }
        if (idx[j] < 0 || idx[j] >= V) {
          err = "slot " + std::to_string(j) + " index " + std::to_string(idx[j]) + " outside [0, " + std::to_string(V) + ")";
          break;
        }
        if (selected[static_cast<std::size_t>(idx[j])]) err = "index " + std::to_string(idx[j]) + " appears twice";
        selected[static_cast<std::size_t>(idx[j])] = 1;
        if (j > 0) {
          const float a = x[idx[j - 1]], b = x[idx[j]];
          if (b > a || (b == a && idx[j] < idx[j - 1]))
            err = "order broken at slot " + std::to_string(j) + ": (" + detail::fmt(a) + ", " + std::to_string(idx[j - 1]) +
                  ") then (" + detail::fmt(b) + ", " + std::to_string(idx[j]) + ")";
          if (p[j] > p[j - 1]) err = "probabilities increase at slot " + std::to_string(j);
        }
      }
      if (!err.empty() || expect_valid == 0) continue;
      // Completeness against the last selected (value, index).
      const int32_t last = idx[expect_valid - 1];
      const float last_x = x[last];
      for (int64_t v = 0; v < V; ++v) {
        if (selected[static_cast<std::size_t>(v)]) continue;
        if (x[v] > last_x || (x[v] == last_x && v < last)) {
          err = "token " + std::to_string(v) + " (logit " + detail::fmt(x[v]) + ") beats the last selected token " +
                std::to_string(last) + " (logit " + detail::fmt(last_x) + ") but was not selected";
          break;
        }
      }
    }
  }, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, V)));
  std::ostringstream msg;
  int shown = 0, bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      ++bad;
      if (shown++ < 6) msg << "\n    row " << r << ": " << errors[static_cast<std::size_t>(r)];
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "top-k properties violated in " << bad << " of " << rows << " rows:" << msg.str();
}

}  // namespace softk_test
