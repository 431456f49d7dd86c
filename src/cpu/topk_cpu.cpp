// CPU top-k: exact by construction (a partial sort under the contract's total order).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cpu/row_stats.hpp"
#include "softk/cpu.hpp"
#include "validate.hpp"

namespace softk::cpu {

void topk(const LogitsView& logits, int32_t k, float* probs, int32_t* indices, const TopkOptions& options) {
  detail::validate_topk_call(logits, k, probs, indices, options);

  const int64_t vocab = logits.vocab;
  std::vector<float> row(static_cast<std::size_t>(vocab));
  std::vector<int32_t> order(static_cast<std::size_t>(vocab));
  for (int64_t r = 0; r < logits.rows(); ++r) {
    const auto stats = detail::load_row_and_stats(logits, r, options.temperature, row);
    if (options.row_status) options.row_status[r] = static_cast<int32_t>(stats.status);
    float* row_probs = probs + r * k;
    int32_t* row_indices = indices + r * k;
    if (stats.status == RowStatus::has_nan) {
      std::fill(row_probs, row_probs + k, std::numeric_limits<float>::quiet_NaN());
      std::fill(row_indices, row_indices + k, -1);
      continue;
    }
    std::iota(order.begin(), order.end(), 0);
    // Descending logit, then ascending index: the contract's total order.
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      const float xa = row[static_cast<std::size_t>(a)], xb = row[static_cast<std::size_t>(b)];
      return xa > xb || (xa == xb && a < b);
    });
    for (int32_t j = 0; j < k; ++j) {
      const int32_t index = order[static_cast<std::size_t>(j)];
      const float x = row[static_cast<std::size_t>(index)];
      const bool masked = x == -std::numeric_limits<float>::infinity();
      row_indices[j] = masked ? -1 : index;
      const double p = options.log_probs ? stats.log_probability(x) : stats.probability(x);
      row_probs[j] = static_cast<float>(p);
    }
  }
}

}  // namespace softk::cpu
