// sampler info FILE: what a logits file holds, and per row how peaked its distribution is.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "command_support.hpp"
#include "topk_printer.hpp"
#include "vocab.hpp"

namespace sampler {
namespace {

struct InfoOptions {
  CommonOptions common;
  softk::SoftmaxAlgorithm algorithm = softk::SoftmaxAlgorithm::automatic;
  std::string vocab;
};

struct RowSummary {
  float max_logit = -std::numeric_limits<float>::infinity();
  double entropy = 0.0;  ///< nats
  float top1_prob = 0.0f;
  int64_t top1_id = -1;
};

/// The summary of one ok row: `logits` its values in f32, `probs` its softmax.
RowSummary summarize(const std::vector<float>& logits, const float* probs) {
  RowSummary summary;
  for (float x : logits) {
    if (x > summary.max_logit) summary.max_logit = x;
  }
  for (std::size_t v = 0; v < logits.size(); ++v) {
    const float p = probs[v];
    if (p > 0.0f) summary.entropy -= static_cast<double>(p) * std::log(static_cast<double>(p));
    if (p > summary.top1_prob) {  // strict: equal probabilities keep the smaller id
      summary.top1_prob = p;
      summary.top1_id = static_cast<int64_t>(v);
    }
  }
  return summary;
}

void print_file_summary(const LogitsFile& file, const Backend& backend, float temperature, bool with_tokens) {
  std::string format = to_string(file.format());
  if (!file.tensor().empty()) format += ", tensor '" + file.tensor() + "'";
  static const char* const kDimLetters[] = {"V", "B, V", "B, T, V"};
  std::printf("file         %s\nformat       %s\ndtype        %s\nshape        %s  [%s]\nrows         %lld\n",
              file.path().c_str(), format.c_str(), softk::to_string(file.dtype()), format_shape(file.shape()).c_str(),
              kDimLetters[file.shape().size() - 1], static_cast<long long>(file.rows()));
  std::printf("backend      %s\ntemperature  %g\n\n", backend.name(), temperature);
  for (std::size_t d = 0; d + 1 < file.shape().size(); ++d) std::printf("%6s", kLeadingDimNames[d]);
  std::printf("%12s  %10s  %10s  %8s%s\n", "max_logit", "entropy", "top1_prob", "top1_id",
              with_tokens ? "  top1_token" : "");
}

/// Prints the table line of row `row`: its position, then its summary or why it has none.
/// `logits` points at the row's input (the file's dtype), `probs` at its softmax; `scratch`
/// holds V floats.
void print_row(const LogitsFile& file, int64_t row, softk::RowStatus status, const void* logits, const float* probs,
               const Vocab* vocab, std::vector<float>& scratch) {
  for (int64_t coordinate : row_position(file.shape(), row)) std::printf("%6lld", static_cast<long long>(coordinate));
  if (status != softk::RowStatus::ok) {
    std::printf("  %s\n", status == softk::RowStatus::has_nan ? "holds NaN logits" : "every logit is -inf");
    return;
  }
  softk::convert_to_f32(logits, file.dtype(), scratch.data(), scratch.size());
  const RowSummary summary = summarize(scratch, probs);
  std::printf("%12.4f  %10.4f  %10.6f  %8lld", summary.max_logit, summary.entropy, summary.top1_prob,
              static_cast<long long>(summary.top1_id));
  const std::string* token = vocab ? vocab->token(summary.top1_id) : nullptr;
  std::printf("%s%s\n", token ? "  " : "", token ? escape_token(*token, /*quoted=*/true).c_str() : "");
}

void run_info(const InfoOptions& options) {
  const LogitsFile file = open_input(options.common);
  std::optional<Vocab> vocab;
  if (!options.vocab.empty()) vocab = Vocab::load(options.vocab);
  const std::unique_ptr<Backend> backend = make_backend(options.common.backend);

  std::vector<float> scratch(static_cast<std::size_t>(file.vocab()));
  stream_softmax(
      file, *backend, softmax_options(options.common, options.algorithm), options.common.chunk_rows, "info",
      [&](const softk::LogitsView& chunk, int64_t first, int64_t rows, const float* probs, const int32_t* status) {
        // With the first chunk's rows, so that an op refused on it (a temperature the library
        // rejects, a forced algorithm that cannot hold V) leaves stdout empty.
        if (first == 0) print_file_summary(file, *backend, options.common.temperature, vocab.has_value());
        for (int64_t r = 0; r < rows; ++r) {
          print_row(file, first + r, static_cast<softk::RowStatus>(status[r]),
                    static_cast<const unsigned char*>(chunk.data) + r * file.row_bytes(), probs + r * file.vocab(),
                    vocab ? &*vocab : nullptr, scratch);
        }
      });
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command =
      app.add_subcommand("info", "Shape, dtype and a per-row summary: max logit, entropy (nats) and top-1 probability");
  add_common_options(*command, options->common);
  add_algorithm_option(*command, options->algorithm, kSoftmaxAlgorithms);
  command->add_option("--vocab", options->vocab, "token strings: tokenizer.json, vocab.json or one token per line");
  command->callback([options] { run_info(*options); });
}

}  // namespace sampler
