// CPU sampling: softk/sample.hpp's definition step by step in double precision, the oracle for
// sampling and the no-GPU fallback. A row is ordered by a (partial) sort, which is simple and
// obviously right rather than fast.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cpu/row_stats.hpp"
#include "philox.hpp"
#include "softk/cpu.hpp"
#include "validate.hpp"

namespace softk::cpu {
namespace {

/// One row's parameters: its arrays' entries where given, else the scalars.
struct RowParams {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  uint64_t seed;
  uint64_t offset;
};

/// A row's top_k, 0 where it has no bound: with per-row values, the scalar bounds them (sample.hpp).
int32_t row_top_k(const SamplingParams& p, int64_t r) {
  if (p.top_ks == nullptr) return p.top_k;
  const int32_t k = p.top_ks[r];
  return p.top_k > 0 && (k == 0 || k > p.top_k) ? p.top_k : k;
}

RowParams row_params(const SamplingParams& p, int64_t r) {
  return {p.temperatures ? p.temperatures[r] : p.temperature, row_top_k(p, r),
          p.top_ps ? p.top_ps[r] : p.top_p,                    p.min_ps ? p.min_ps[r] : p.min_p,
          p.seeds ? p.seeds[r] : p.seed,                       p.offsets ? p.offsets[r] : p.offset};
}

/// How many of the first tokens of `order` are candidates: the shortest prefix that top_k, top_p
/// and min_p allow. `order` holds at least the first `bounded` tokens in the contract's order;
/// weight[i] is token i's unnormalised probability.
int64_t candidate_count(const std::vector<int32_t>& order, int64_t bounded, const std::vector<double>& weight,
                        const RowParams& p) {
  const auto weight_at = [&](int64_t rank) {
    return weight[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])];
  };
  double kept = 0.0;
  for (int64_t j = 0; j < bounded; ++j) kept += weight_at(j);
  // The same sum in the same order, so that top_p = 1 reaches `kept` exactly at `bounded`.
  const double nucleus = static_cast<double>(p.top_p) * kept;
  int64_t by_p = 0;
  double running = 0.0;
  while (by_p < bounded && running < nucleus) running += weight_at(by_p++);  // nucleus > 0: takes one at least
  // The first token's weight is the largest.
  const double floor = static_cast<double>(p.min_p) * weight_at(0);
  int64_t by_min = 1;
  while (by_min < bounded && weight_at(by_min) >= floor) ++by_min;
  return std::min(by_p, by_min);
}

/// Inverse CDF over `candidates` (sorted by token) at u: the first whose running sum of weight
/// passes u x their total. A candidate of zero weight never passes; the total is positive, as
/// the row's largest token (weight 1) is always a candidate.
int32_t draw(const std::vector<int32_t>& candidates, const std::vector<double>& weight, double u) {
  double total = 0.0;
  for (int32_t c : candidates) total += weight[static_cast<std::size_t>(c)];
  const double target = u * total;  // < total: u < 1
  double running = 0.0;
  int32_t last_weighted = candidates.front();
  for (int32_t c : candidates) {
    const double w = weight[static_cast<std::size_t>(c)];
    if (w == 0.0) continue;
    running += w;
    last_weighted = c;
    if (running > target) return c;
  }
  return last_weighted;  // only where rounding kept the running sum at or below the target
}

}  // namespace

void sample(const LogitsView& logits, const SamplingParams& params, int32_t* tokens, int32_t* row_status) {
  detail::validate_logits(logits);
  detail::validate_not_null(tokens, "tokens");
  detail::validate_aligned(tokens, "tokens", sizeof(int32_t));
  if (row_status != nullptr) detail::validate_aligned(row_status, "row_status", sizeof(int32_t));
  detail::validate_sampling_params(params, logits.rows(), logits.vocab, /*per_row_on_host=*/true);

  const int64_t vocab = logits.vocab;
  std::vector<float> row(static_cast<std::size_t>(vocab));
  std::vector<double> weight(row.size());
  std::vector<int32_t> order(row.size());
  std::vector<int32_t> candidates;
  for (int64_t r = 0; r < logits.rows(); ++r) {
    const RowParams p = row_params(params, r);
    const bool greedy = p.temperature == 0.0f;
    const auto stats = detail::load_row_and_stats(logits, r, greedy ? 1.0f : p.temperature, row);
    if (row_status) row_status[r] = static_cast<int32_t>(stats.status);
    if (stats.status != RowStatus::ok) {
      tokens[r] = -1;
      continue;
    }
    // Descending logit, then ascending index: the contract's total order. Only the first
    // `bounded` tokens can be candidates, so only they are sorted.
    const int64_t bounded = greedy ? 1 : p.top_k > 0 ? p.top_k : vocab;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + bounded, order.end(), [&](int32_t a, int32_t b) {
      const float xa = row[static_cast<std::size_t>(a)], xb = row[static_cast<std::size_t>(b)];
      return xa > xb || (xa == xb && a < b);
    });
    if (greedy) {
      tokens[r] = order[0];
      continue;
    }
    for (std::size_t i = 0; i < row.size(); ++i) weight[i] = stats.weight(row[i]);
    const int64_t count = candidate_count(order, bounded, weight, p);
    candidates.assign(order.begin(), order.begin() + count);
    std::sort(candidates.begin(), candidates.end());
    tokens[r] = draw(candidates, weight, detail::sampling_uniform(p.seed, p.offset));
  }
}

}  // namespace softk::cpu
