// sampler — top-k results for people and scripts: a table, JSON lines or TSV; and what every
// printer shares (token escaping, a row's heading and TSV columns).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "vocab.hpp"

namespace sampler {

enum class OutputFormat { table, json, tsv };

/// `token` made printable on one line: backslash escapes for '\\', '\n', '\r', '\t' and other
/// control bytes (\xNN), and for '"' when `quoted`, which also wraps the result in quotes.
/// Other bytes (UTF-8 included) pass through.
std::string escape_token(const std::string& token, bool quoted);

/// A table row's heading: "batch b, step t" as the input's `shape` has them, or "logits" for [V].
std::string row_heading(const std::vector<int64_t>& shape, int64_t row);
/// TSV: the leading dims' names, each followed by a tab ("batch\tstep\t"), for the header...
std::string tsv_leading_names(const std::vector<int64_t>& shape);
/// ...and `row`'s coordinates the same way, to start each of its lines.
std::string tsv_row_prefix(const std::vector<int64_t>& shape, int64_t row);

/// Prints the rows of one top-k run as they are computed, chunk after chunk.
///  - table: per row a heading naming its position (batch b, step t), then rank, token id,
///    probability, log-probability and (with a vocabulary) the quoted token.
///  - json: one object per row: {"batch", "step" (as the shape has them), "status", "topk":
///    [{"rank", "id", "prob", "logprob", "token"}]}. Floats print in their shortest exact form.
///  - tsv: a header line, then one line per (row, rank): batch, step, rank, token_id, prob,
///    logprob, token.
/// Slots with no token (index -1: a masked or NaN row, or fewer than K unmasked tokens) are
/// left out; the table and JSON report a row's non-ok status.
class TopkPrinter {
 public:
  /// `shape` is the input's ([V], [B, V] or [B, T, V]); `vocab` may be null (no token column).
  TopkPrinter(std::ostream& out, OutputFormat format, std::vector<int64_t> shape, int32_t k, const Vocab* vocab);

  /// Prints rows [first_row, first_row + count) of the input: `log_probs` and `indices` are
  /// [count, k] as softk::topk writes them with log_probs = true, `status` [count] RowStatus.
  void print_rows(int64_t first_row, int64_t count, const float* log_probs, const int32_t* indices,
                  const int32_t* status);

 private:
  void print_table_row(int64_t row, const float* log_probs, const int32_t* indices, int32_t status);
  void print_json_row(int64_t row, const float* log_probs, const int32_t* indices, int32_t status);
  void print_tsv_row(int64_t row, const float* log_probs, const int32_t* indices);

  std::ostream& out_;
  OutputFormat format_;
  std::vector<int64_t> shape_;
  int32_t k_;
  const Vocab* vocab_;
  int id_width_;
  /// TSV: whether the header line is out. It goes with the first rows, so that an op refused on
  /// the first chunk leaves stdout empty.
  bool header_printed_ = false;
};

}  // namespace sampler
