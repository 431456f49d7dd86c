#include "sample_printer.hpp"

#include <nlohmann/json.hpp>

#include "logits_file.hpp"
#include "softk/types.hpp"

namespace sampler {

using Json = nlohmann::ordered_json;  // keys in the order written

SamplePrinter::SamplePrinter(std::ostream& out, OutputFormat format, std::vector<int64_t> shape, int64_t draws,
                             const Vocab* vocab)
    : out_(out), format_(format), shape_(std::move(shape)), draws_(draws), vocab_(vocab) {}

void SamplePrinter::print_rows(int64_t first_row, int64_t count, const int32_t* tokens, const int32_t* status) {
  if (format_ == OutputFormat::tsv && !header_printed_) {
    out_ << tsv_leading_names(shape_) << "draw\ttoken_id" << (vocab_ ? "\ttoken" : "") << '\n';
    header_printed_ = true;
  }
  for (int64_t i = 0; i < count; ++i) {
    const int32_t* row_tokens = tokens + i * draws_;
    switch (format_) {
      case OutputFormat::table: print_table_row(first_row + i, row_tokens, status[i]); break;
      case OutputFormat::json: print_json_row(first_row + i, row_tokens, status[i]); break;
      case OutputFormat::tsv: print_tsv_row(first_row + i, row_tokens, status[i]); break;
    }
  }
}

const std::string* SamplePrinter::text(int32_t token) const { return vocab_ ? vocab_->token(token) : nullptr; }

void SamplePrinter::print_table_row(int64_t row, const int32_t* tokens, int32_t status) {
  out_ << row_heading(shape_, row) << ':';
  if (status == static_cast<int32_t>(softk::RowStatus::all_masked)) {
    out_ << " every logit is -inf (fully masked row); no token\n";
    return;
  }
  if (status == static_cast<int32_t>(softk::RowStatus::has_nan)) {
    out_ << " holds NaN logits; no token\n";
    return;
  }
  for (int64_t d = 0; d < draws_; ++d) {
    out_ << "  " << tokens[d];
    if (const std::string* token = text(tokens[d])) out_ << ' ' << escape_token(*token, /*quoted=*/true);
  }
  out_ << '\n';
}

void SamplePrinter::print_json_row(int64_t row, const int32_t* tokens, int32_t status) {
  Json line = Json::object();
  const std::vector<int64_t> at = row_position(shape_, row);
  for (std::size_t d = 0; d < at.size(); ++d) line[kLeadingDimNames[d]] = at[d];
  line["status"] = softk::to_string(static_cast<softk::RowStatus>(status));
  Json ids = Json::array(), texts = Json::array();
  if (status == static_cast<int32_t>(softk::RowStatus::ok)) {
    for (int64_t d = 0; d < draws_; ++d) {
      ids.push_back(tokens[d]);
      const std::string* token = text(tokens[d]);
      texts.push_back(token ? Json(*token) : Json(nullptr));
    }
  }
  line["tokens"] = std::move(ids);
  if (vocab_) line["texts"] = std::move(texts);
  // Tokens need not be valid UTF-8 (byte-level vocabularies); replace bad bytes, don't throw.
  out_ << line.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace) << '\n';
}

void SamplePrinter::print_tsv_row(int64_t row, const int32_t* tokens, int32_t status) {
  if (status != static_cast<int32_t>(softk::RowStatus::ok)) return;
  const std::string prefix = tsv_row_prefix(shape_, row);
  for (int64_t d = 0; d < draws_; ++d) {
    out_ << prefix << d << '\t' << tokens[d];
    if (vocab_) {
      const std::string* token = text(tokens[d]);
      out_ << '\t' << (token ? escape_token(*token, /*quoted=*/false) : "");
    }
    out_ << '\n';
  }
}

}  // namespace sampler
