#include "topk_printer.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "logits_file.hpp"
#include "softk/types.hpp"

namespace sampler {
namespace {

// nlohmann::json stores floats as double, and a float widened to double prints as
// 0.6123450994491577; with float storage it prints the float's shortest form, 0.612345.
// ordered_map keeps the keys in the order written (rank, id, prob, ...) rather than sorted.
using FloatJson =
    nlohmann::basic_json<nlohmann::ordered_map, std::vector, std::string, bool, std::int64_t, std::uint64_t, float>;

/// The shortest decimal that reads back as exactly `value`.
std::string shortest(float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

/// Probability from the log-probability softk wrote: exp in double keeps its float rounding
/// to one step, and stays exact (0) for log-probs far below float's range.
float probability(float log_prob) { return static_cast<float>(std::exp(static_cast<double>(log_prob))); }

}  // namespace

std::string escape_token(const std::string& token, bool quoted) {
  std::string out = quoted ? "\"" : "";
  for (const char c : token) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += quoted ? "\\\"" : "\"";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return quoted ? out + "\"" : out;
}

std::string row_heading(const std::vector<int64_t>& shape, int64_t row) {
  const std::vector<int64_t> at = row_position(shape, row);
  std::string heading;
  for (std::size_t d = 0; d < at.size(); ++d)
    heading += (d ? ", " : "") + std::string(kLeadingDimNames[d]) + " " + std::to_string(at[d]);
  return heading.empty() ? "logits" : heading;
}

std::string tsv_leading_names(const std::vector<int64_t>& shape) {
  std::string names;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) names += std::string(kLeadingDimNames[d]) + '\t';
  return names;
}

std::string tsv_row_prefix(const std::vector<int64_t>& shape, int64_t row) {
  std::string prefix;
  for (int64_t coordinate : row_position(shape, row)) prefix += std::to_string(coordinate) + '\t';
  return prefix;
}

TopkPrinter::TopkPrinter(std::ostream& out, OutputFormat format, std::vector<int64_t> shape, int32_t k,
                         const Vocab* vocab)
    : out_(out), format_(format), shape_(std::move(shape)), k_(k), vocab_(vocab) {
  id_width_ = std::max<int>(5, static_cast<int>(std::to_string(shape_.back() - 1).size()));
}

void TopkPrinter::print_rows(int64_t first_row, int64_t count, const float* log_probs, const int32_t* indices,
                             const int32_t* status) {
  if (format_ == OutputFormat::tsv && !header_printed_) {
    out_ << tsv_leading_names(shape_) << "rank\ttoken_id\tprob\tlogprob" << (vocab_ ? "\ttoken" : "") << '\n';
    header_printed_ = true;
  }
  for (int64_t i = 0; i < count; ++i) {
    const float* row_log_probs = log_probs + i * k_;
    const int32_t* row_indices = indices + i * k_;
    switch (format_) {
      case OutputFormat::table:
        print_table_row(first_row + i, row_log_probs, row_indices, status[i]);
        break;
      case OutputFormat::json:
        print_json_row(first_row + i, row_log_probs, row_indices, status[i]);
        break;
      case OutputFormat::tsv:
        print_tsv_row(first_row + i, row_log_probs, row_indices);
        break;
    }
  }
}

void TopkPrinter::print_table_row(int64_t row, const float* log_probs, const int32_t* indices, int32_t status) {
  const std::string heading = row_heading(shape_, row);
  if (row > 0) out_ << '\n';
  const auto row_status = static_cast<softk::RowStatus>(status);
  if (row_status == softk::RowStatus::all_masked) {
    out_ << heading << ": every logit is -inf (fully masked row)\n";
    return;
  }
  if (row_status == softk::RowStatus::has_nan) {
    out_ << heading << ": holds NaN logits; no ranking\n";
    return;
  }
  out_ << heading << ":\n";
  char line[128];
  std::snprintf(line, sizeof(line), "%6s  %*s  %10s  %10s", "rank", id_width_, "id", "prob", "log_prob");
  out_ << line << (vocab_ ? "  token" : "") << '\n';
  for (int32_t j = 0; j < k_ && indices[j] >= 0; ++j) {
    std::snprintf(line, sizeof(line), "%6d  %*d  %10.6f  %10.4f", j + 1, id_width_, indices[j],
                  probability(log_probs[j]), log_probs[j]);
    out_ << line;
    if (vocab_) {
      const std::string* token = vocab_->token(indices[j]);
      if (token) out_ << "  " << escape_token(*token, /*quoted=*/true);
    }
    out_ << '\n';
  }
}

void TopkPrinter::print_json_row(int64_t row, const float* log_probs, const int32_t* indices, int32_t status) {
  FloatJson line = FloatJson::object();
  const std::vector<int64_t> at = row_position(shape_, row);
  for (std::size_t d = 0; d < at.size(); ++d) line[kLeadingDimNames[d]] = at[d];
  line["status"] = softk::to_string(static_cast<softk::RowStatus>(status));
  FloatJson entries = FloatJson::array();
  for (int32_t j = 0; j < k_ && indices[j] >= 0; ++j) {
    FloatJson entry = {
        {"rank", j + 1}, {"id", indices[j]}, {"prob", probability(log_probs[j])}, {"logprob", log_probs[j]}};
    if (vocab_) {
      const std::string* token = vocab_->token(indices[j]);
      entry["token"] = token ? FloatJson(*token) : FloatJson(nullptr);
    }
    entries.push_back(std::move(entry));
  }
  line["topk"] = std::move(entries);
  // Tokens need not be valid UTF-8 (byte-level vocabularies); replace bad bytes, don't throw.
  out_ << line.dump(-1, ' ', /*ensure_ascii=*/false, FloatJson::error_handler_t::replace) << '\n';
}

void TopkPrinter::print_tsv_row(int64_t row, const float* log_probs, const int32_t* indices) {
  const std::string prefix = tsv_row_prefix(shape_, row);
  for (int32_t j = 0; j < k_ && indices[j] >= 0; ++j) {
    out_ << prefix << j + 1 << '\t' << indices[j] << '\t' << shortest(probability(log_probs[j])) << '\t'
         << shortest(log_probs[j]);
    if (vocab_) {
      const std::string* token = vocab_->token(indices[j]);
      out_ << '\t' << (token ? escape_token(*token, /*quoted=*/false) : "");
    }
    out_ << '\n';
  }
}

}  // namespace sampler
