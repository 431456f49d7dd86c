// What sampling must produce, worked out from softk::SamplingParams' definition (sample.hpp)
// independently of the samplers: a row's exact truncated distribution, and the check of drawn
// tokens against it (no token outside its support, a chi-square bound on the counts).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "softk/sample.hpp"

namespace softk_test {

/// A named set of sampling bounds, for the tests that sweep them (CPU and GPU alike).
struct SamplingBounds {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;

  /// These bounds as scalar parameters, the top_k at most `largest_top_k` (a row's vocabulary,
  /// say).
  softk::SamplingParams params(int64_t largest_top_k) const {
    softk::SamplingParams p;
    p.temperature = temperature;
    p.top_k = static_cast<int32_t>(std::min<int64_t>(top_k, largest_top_k));
    p.top_p = top_p;
    p.min_p = min_p;
    return p;
  }
};

/// The exact distribution SamplingParams defines for one finite row, from its definition: the
/// tokens in the contract's order, the top-k prefix, the top-p prefix of the renormalised top-k
/// mass, the min-p floor, then the kept probabilities renormalised.
inline std::vector<double> truncated_distribution(const std::vector<float>& row, float temperature, int32_t top_k,
                                                  float top_p, float min_p) {
  const auto n = static_cast<int64_t>(row.size());
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  const double max = row[order[0]];
  std::vector<double> p(row.size());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i] = std::exp((row[i] - max) / temperature);
  for (double& x : p) x /= sum;
  const int64_t kept_k = top_k > 0 ? top_k : n;
  double kept_mass = 0;
  for (int64_t j = 0; j < kept_k; ++j) kept_mass += p[order[j]];
  int64_t kept = 0;
  for (double running = 0; kept < kept_k && running < top_p * kept_mass;) running += p[order[kept++]];
  while (kept > 1 && p[order[kept - 1]] < min_p * p[order[0]]) --kept;
  std::vector<double> q(row.size(), 0.0);
  double kept_sum = 0;
  for (int64_t j = 0; j < kept; ++j) kept_sum += p[order[j]];
  for (int64_t j = 0; j < kept; ++j) q[order[j]] = p[order[j]] / kept_sum;
  return q;
}

/// The chi-square quantile at 1 - 1e-6 for `df` degrees of freedom (Wilson-Hilferty): the draws
/// are seeded, so a test's outcome is fixed, and a correct sampler passes it with room.
inline double chi_square_critical(int df) {
  const double z = 4.753;  // the standard normal's 1 - 1e-6 quantile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

/// "" where `tokens`, each one draw of a row whose exact distribution is `expected`, fit it: none
/// outside its support, and their counts within the chi-square bound. Else what is wrong.
inline std::string distribution_mismatch(const std::vector<int32_t>& tokens, const std::vector<double>& expected) {
  std::vector<int64_t> counts(expected.size(), 0);
  for (int32_t t : tokens) {
    if (t < 0 || t >= static_cast<int32_t>(expected.size())) return "token " + std::to_string(t) + " is out of range";
    ++counts[static_cast<std::size_t>(t)];
  }
  double chi2 = 0;
  int support = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) {
      if (counts[i] != 0)
        return "token " + std::to_string(i) + ", outside the candidates, drawn " + std::to_string(counts[i]) + " times";
      continue;
    }
    ++support;
    const double e = expected[i] * static_cast<double>(tokens.size());
    chi2 += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  if (support > 1 && chi2 >= chi_square_critical(support - 1))
    return "chi-square " + std::to_string(chi2) + " over " + std::to_string(support) + " candidates, past " +
           std::to_string(chi_square_critical(support - 1));
  return "";
}

}  // namespace softk_test
