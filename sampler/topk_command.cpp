// sampler topk FILE -k K: the K most probable tokens of every row, printed or saved as .npy.
#include <iostream>
#include <memory>
#include <optional>

#include "command_support.hpp"
#include "error.hpp"
#include "output_file.hpp"
#include "topk_printer.hpp"
#include "vocab.hpp"

namespace sampler {
namespace {

struct TopkCommandOptions {
  CommonOptions common;
  softk::TopkAlgorithm algorithm = softk::TopkAlgorithm::automatic;
  int64_t k = 0;
  OutputFormat format = OutputFormat::table;
  std::string vocab;
  std::string output_prefix;
};

softk::TopkOptions topk_options(const TopkCommandOptions& options, bool log_probs) {
  softk::TopkOptions topk;
  topk.temperature = options.common.temperature;
  topk.algorithm = options.algorithm;
  topk.log_probs = log_probs;
  return topk;
}

/// Writes PREFIX.indices.npy (int32) and PREFIX.probs.npy (f32), shaped [leading dims..., K].
void save_topk(const TopkCommandOptions& options, const LogitsFile& file, Backend& backend, int32_t k) {
  std::vector<int64_t> shape = file.leading_dims();
  shape.push_back(k);
  NpyWriter indices_file(options.output_prefix + ".indices.npy", NpyElement::i32, shape);
  NpyWriter probs_file(options.output_prefix + ".probs.npy", NpyElement::f32, shape);
  RowStatusTally tally;
  stream_topk(file, backend, k, topk_options(options, /*log_probs=*/false), options.common.chunk_rows, "topk",
              [&](int64_t, int64_t rows, const float* probs, const int32_t* indices, const int32_t* status) {
                indices_file.append(indices, rows * k);
                probs_file.append(probs, rows * k);
                tally.add(status, rows);
              });
  commit_together(indices_file, probs_file);
  tally.report();
}

/// Prints the top-k of every row on stdout in the chosen format.
void print_topk(const TopkCommandOptions& options, const LogitsFile& file, Backend& backend, int32_t k) {
  std::optional<Vocab> vocab;
  if (!options.vocab.empty()) vocab = Vocab::load(options.vocab);
  TopkPrinter printer(std::cout, options.format, file.shape(), k, vocab ? &*vocab : nullptr);
  // Log-probs carry the tail exactly where probabilities underflow; the printer derives both.
  stream_topk(file, backend, k, topk_options(options, /*log_probs=*/true), options.common.chunk_rows, "topk",
              [&](int64_t first, int64_t rows, const float* log_probs, const int32_t* indices, const int32_t* status) {
                printer.print_rows(first, rows, log_probs, indices, status);
              });
}

void run_topk(const TopkCommandOptions& options) {
  const LogitsFile file = open_input(options.common);
  if (options.k < 1 || options.k > file.vocab()) {
    throw file_error(file.path(), "-k " + std::to_string(options.k) + " is out of range: must be in [1, " +
                                      std::to_string(file.vocab()) + "], the vocabulary size");
  }
  const auto k = static_cast<int32_t>(options.k);  // k <= V < 2^31
  const std::unique_ptr<Backend> backend = make_backend(options.common.backend);
  if (options.output_prefix.empty())
    print_topk(options, file, *backend, k);
  else
    save_topk(options, file, *backend, k);
}

}  // namespace

void add_topk_command(CLI::App& app) {
  auto options = std::make_shared<TopkCommandOptions>();
  CLI::App* command = app.add_subcommand("topk", "The K most probable tokens of every row, exact (ties: smaller id)");
  add_common_options(*command, options->common);
  add_algorithm_option(*command, options->algorithm, kTopkAlgorithms);
  command->add_option("-k", options->k, "how many tokens per row, 1 <= K <= V")->required();
  add_printing_options(*command, options->format, options->vocab, options->output_prefix,
                       "write PREFIX.indices.npy (int32) and PREFIX.probs.npy (f32), [leading dims..., K], instead of "
                       "printing");
  command->callback([options] { run_topk(*options); });
}

}  // namespace sampler
