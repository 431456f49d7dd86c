// CPU sampling: softk/sample.hpp's definition step by step in double precision, the oracle for
// sampling and the no-GPU fallback. A row is ordered by a partial sort, as far as its bounds
// need: simple and obviously right rather than fast.
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

/// Where top_p alone bounds a row, the tokens sorted first (then 8 times as many, until the
/// prefix reaching top_p is among them).
constexpr int64_t kFirstSortedTokens = 1024;

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
/// and min_p allow. `order` holds the first `sorted` tokens in the contract's order (all of the
/// first `bounded`, the top_k, where top_k is non-zero); `kept` is the weight of the first
/// `bounded`, of which top_p takes its share; weight[i] is token i's unnormalised probability.
/// 0 where the top_p prefix runs past `sorted`: more of the row must be sorted.
int64_t candidate_count(const std::vector<int32_t>& order, int64_t sorted, int64_t bounded, double kept,
                        const std::vector<double>& weight, const RowParams& p) {
  const auto weight_at = [&](int64_t rank) {
    return weight[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])];
  };
  const int64_t limit = std::min(sorted, bounded);
  const double nucleus = static_cast<double>(p.top_p) * kept;
  int64_t by_p = 0;
  double running = 0.0;
  while (by_p < limit && running < nucleus) running += weight_at(by_p++);  // nucleus > 0: takes one at least
  if (running < nucleus && limit < bounded) return 0;
  // The first token's weight is the largest.
  const double floor = static_cast<double>(p.min_p) * weight_at(0);
  int64_t by_min = 1;
  while (by_min < limit && weight_at(by_min) >= floor) ++by_min;
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
    // Descending logit, then ascending index: the contract's total order.
    const auto before = [&](int32_t a, int32_t b) {
      const float xa = row[static_cast<std::size_t>(a)], xb = row[static_cast<std::size_t>(b)];
      return xa > xb || (xa == xb && a < b);
    };
    if (greedy) {  // the first token in that order: the largest logit, the smallest index among ties
      int32_t best = 0;
      for (int32_t i = 1; i < static_cast<int32_t>(vocab); ++i) best = before(i, best) ? i : best;
      tokens[r] = best;
      continue;
    }
    for (std::size_t i = 0; i < row.size(); ++i) weight[i] = stats.weight(row[i]);
    candidates.clear();
    if (p.top_k == 0 && p.top_p >= 1.0f) {
      // Only min_p bounds the row, and its prefix is every token at least min_p of the largest
      // weight (1), so no order is needed.
      for (int32_t i = 0; i < static_cast<int32_t>(vocab); ++i)
        if (weight[static_cast<std::size_t>(i)] >= static_cast<double>(p.min_p)) candidates.push_back(i);
    } else {
      // Sorted only as far as the bounds reach: the top_k, or past the top_p prefix (a sort of
      // the whole row took ~10 ms a draw at 128K tokens; LLM rows reach top_p within a few).
      const int64_t bounded = p.top_k > 0 ? p.top_k : vocab;
      int64_t sorted = p.top_k > 0 ? bounded : std::min<int64_t>(vocab, kFirstSortedTokens);
      int64_t count = 0;
      for (; count == 0; sorted = std::min(vocab, sorted * 8)) {
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + sorted, order.end(), before);
        double kept = p.top_k > 0 ? 0.0 : stats.sum;  // the top_k's weight, or every token's
        for (int64_t j = 0; p.top_k > 0 && j < bounded; ++j) kept += weight[static_cast<std::size_t>(order[j])];
        count = candidate_count(order, sorted, bounded, kept, weight, p);
      }
      candidates.assign(order.begin(), order.begin() + count);
      std::sort(candidates.begin(), candidates.end());
    }
    tokens[r] = draw(candidates, weight, detail::sampling_uniform(p.seed, p.offset));
  }
}

}  // namespace softk::cpu
