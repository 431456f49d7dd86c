// One row's softmax statistics in double precision, shared by the CPU softmax and top-k.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "softk/types.hpp"

namespace softk::detail {

struct RowStats {
  RowStatus status = RowStatus::ok;
  double max = -std::numeric_limits<double>::infinity();  ///< raw logit max (NaN ignored)
  double sum = 0.0;                                      ///< sum of exp((x - max) / T), or the +inf count
  double inv_temperature = 1.0;

  /// One logit's share of `sum`, on a row with status ok: exp((x - max) / T), or where the max is
  /// +inf, 1 for each +inf and 0 for the rest.
  double weight(float x) const {
    if (std::isinf(max)) return x == max ? 1.0 : 0.0;
    return std::exp((x - max) * inv_temperature);
  }
  /// softmax(x / T) for one logit of the row, per the contract (see RowStatus, +inf sharing).
  double probability(float x) const {
    if (status == RowStatus::has_nan) return std::numeric_limits<double>::quiet_NaN();
    if (status == RowStatus::all_masked) return 0.0;
    return weight(x) / sum;
  }
  double log_probability(float x) const {
    if (status == RowStatus::has_nan) return std::numeric_limits<double>::quiet_NaN();
    const double minus_inf = -std::numeric_limits<double>::infinity();
    if (status == RowStatus::all_masked) return minus_inf;
    if (std::isinf(max)) return x == max ? -std::log(sum) : minus_inf;
    return (x - max) * inv_temperature - std::log(sum);
  }
};

/// Converts row r of `logits` to fp32 into `row` (size vocab) and computes its statistics.
inline RowStats load_row_and_stats(const LogitsView& logits, int64_t r, float temperature, std::vector<float>& row) {
  const std::size_t element = dtype_size(logits.dtype);
  const auto* base = static_cast<const unsigned char*>(logits.data) + static_cast<std::size_t>(r * logits.stride()) * element;
  convert_to_f32(base, logits.dtype, row.data(), row.size());

  RowStats stats;
  stats.inv_temperature = 1.0 / static_cast<double>(temperature);
  bool has_nan = false;
  for (float x : row) {
    if (std::isnan(x)) has_nan = true;
    else if (x > stats.max) stats.max = x;
  }
  if (has_nan) {
    stats.status = RowStatus::has_nan;
  } else if (stats.max == -std::numeric_limits<double>::infinity()) {
    stats.status = RowStatus::all_masked;
  } else {
    for (float x : row) stats.sum += stats.weight(x);
  }
  return stats;
}

}  // namespace softk::detail
