// sampler — sampled tokens for people and scripts: a table, JSON lines or TSV.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "topk_printer.hpp"
#include "vocab.hpp"

namespace sampler {

/// Prints each row's draws as they are made, chunk after chunk:
///  - table: a line a row, its position (batch b, step t) then its tokens (quoted, with a
///    vocabulary);
///  - json: one object a row: {"batch", "step" (as the shape has them), "status", "tokens", and
///    with a vocabulary "texts" (null where it has no token)};
///  - tsv: a header line, then one line a (row, draw): batch, step, draw, token_id, token.
/// A NaN or fully masked row has no token: the table and JSON say so, TSV leaves it out.
class SamplePrinter {
 public:
  /// `shape` is the input's ([V], [B, V] or [B, T, V]); `vocab` may be null (no token text).
  SamplePrinter(std::ostream& out, OutputFormat format, std::vector<int64_t> shape, int64_t draws, const Vocab* vocab);

  /// Rows [first_row, first_row + count): `tokens` [count, draws], `status` [count] RowStatus.
  void print_rows(int64_t first_row, int64_t count, const int32_t* tokens, const int32_t* status);

 private:
  const std::string* text(int32_t token) const;
  void print_table_row(int64_t row, const int32_t* tokens, int32_t status);
  void print_json_row(int64_t row, const int32_t* tokens, int32_t status);
  void print_tsv_row(int64_t row, const int32_t* tokens, int32_t status);

  std::ostream& out_;
  OutputFormat format_;
  std::vector<int64_t> shape_;
  int64_t draws_;
  const Vocab* vocab_;
  bool header_printed_ = false;  ///< TSV: goes out with the first rows, as TopkPrinter's
};

}  // namespace sampler
