// sampler sample FILE: tokens drawn from every row under temperature, top-k, top-p and min-p,
// seeded (softk/sample.hpp), printed or saved as .npy, on the GPU or the CPU.
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>

#include "command_support.hpp"
#include "error.hpp"
#include "output_file.hpp"
#include "sample_printer.hpp"
#include "vocab.hpp"

namespace sampler {
namespace {

struct SampleCommandOptions {
  CommonOptions common;
  int64_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
  int64_t draws = 1;
  OutputFormat format = OutputFormat::table;
  std::string vocab;
  std::string output_prefix;
};

/// The most draws a row: each is one pass over the file's rows.
constexpr int64_t kMaxDraws = 1 << 20;

/// The sampling options against the file, named as the user typed them.
void check_sampling_options(const SampleCommandOptions& options, const LogitsFile& file) {
  if (options.top_k < 0 || options.top_k > file.vocab())
    throw file_error(file.path(), "--top-k " + std::to_string(options.top_k) + " is out of range: must be 0 (no bound) "
                                  "or in [1, " + std::to_string(file.vocab()) + "], the vocabulary size");
  if (!(options.top_p > 0.0f && options.top_p <= 1.0f))
    throw Error("--top-p must be in (0, 1] (got " + shown(options.top_p) + ")");
  if (!(options.min_p >= 0.0f && options.min_p <= 1.0f))
    throw Error("--min-p must be in [0, 1] (got " + shown(options.min_p) + ")");
  if (options.draws < 1 || options.draws > kMaxDraws)
    throw Error("--num-samples must be in [1, " + std::to_string(kMaxDraws) + "] (got " +
                std::to_string(options.draws) + ")");
}

/// Streams `file` through backend.sample: for each chunk, in order, calls sink(first_row,
/// rows, tokens, status) with [rows, draws] tokens and [rows] RowStatus. Each batch entry b is a
/// request of its own, its steps t a decode loop's: draw d of row (b, t) takes seed S + b and
/// offset O + t x draws + d, so no two draws of a file share a (seed, offset).
template <class Sink>
void stream_samples(const LogitsFile& file, Backend& backend, const SampleCommandOptions& options, Sink&& sink) {
  const int64_t draws = options.draws;
  const std::vector<int64_t> shape = file.shape();
  const int64_t steps = shape.size() == 3 ? shape[1] : 1;
  const int64_t chunk_rows = rows_per_chunk(file.row_bytes() + draws * 4 + 24, file.rows(), options.common.chunk_rows);
  std::vector<int32_t> tokens = chunk_buffer<int32_t>(chunk_rows * draws, chunk_rows, "tokens");
  std::vector<int32_t> draw = chunk_buffer<int32_t>(chunk_rows, chunk_rows, "one draw's tokens");
  std::vector<int32_t> status = chunk_buffer<int32_t>(chunk_rows, chunk_rows, "row status");
  std::vector<uint64_t> seeds = chunk_buffer<uint64_t>(chunk_rows, chunk_rows, "seeds");
  std::vector<uint64_t> offsets = chunk_buffer<uint64_t>(chunk_rows, chunk_rows, "offsets");
  softk::SamplingParams params;
  params.temperature = options.common.temperature;
  params.top_k = static_cast<int32_t>(options.top_k);  // <= V < 2^31
  params.top_p = options.top_p;
  params.min_p = options.min_p;
  params.seeds = seeds.data();
  params.offsets = offsets.data();
  for_each_chunk(file, chunk_rows, "sample",
                 [&](const softk::LogitsView& chunk, int64_t first, int64_t rows, Progress& progress) {
                   for (int64_t r = 0; r < rows; ++r)
                     seeds[r] = options.seed + static_cast<uint64_t>((first + r) / steps);
                   for (int64_t d = 0; d < draws; ++d) {
                     for (int64_t r = 0; r < rows; ++r)
                       offsets[r] = options.offset + static_cast<uint64_t>((first + r) % steps * draws + d);
                     backend.sample(chunk, params, draw.data(), status.data());
                     for (int64_t r = 0; r < rows; ++r) tokens[r * draws + d] = draw[r];
                   }
                   progress.suspend();
                   sink(first, rows, tokens.data(), status.data());
                 });
}

void run_sample(const SampleCommandOptions& options) {
  const LogitsFile file = open_input(options.common, TemperatureRule::zero_is_greedy);
  check_sampling_options(options, file);
  const std::unique_ptr<Backend> backend = make_backend(options.common.backend);
  RowStatusTally tally;
  if (!options.output_prefix.empty()) {
    std::vector<int64_t> shape = file.leading_dims();
    shape.push_back(options.draws);
    NpyWriter tokens_file(options.output_prefix + ".tokens.npy", NpyElement::i32, shape);
    stream_samples(file, *backend, options, [&](int64_t, int64_t rows, const int32_t* tokens, const int32_t* status) {
      tokens_file.append(tokens, rows * options.draws);
      tally.add(status, rows);
    });
    tokens_file.commit();
  } else {
    std::optional<Vocab> vocab;
    if (!options.vocab.empty()) vocab = Vocab::load(options.vocab);
    SamplePrinter printer(std::cout, options.format, file.shape(), options.draws, vocab ? &*vocab : nullptr);
    const auto print = [&](int64_t first, int64_t rows, const int32_t* tokens, const int32_t* status) {
      printer.print_rows(first, rows, tokens, status);
      tally.add(status, rows);
    };
    stream_samples(file, *backend, options, print);
  }
  tally.report();
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto options = std::make_shared<SampleCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "sample", "Seeded tokens drawn from every row: temperature (0: greedy), top-k, top-p, min-p");
  add_common_options(*command, options->common);
  command->get_option("--temperature")->description("softmax(logits / T); T >= 0, 0: greedy");
  command->add_option("--top-k", options->top_k, "keep the K most probable tokens; 0: no bound")->default_str("0");
  command
      ->add_option("--top-p", options->top_p, "keep the fewest most probable tokens holding P of the mass, 0 < P <= 1")
      ->default_str("1");
  command->add_option("--min-p", options->min_p, "keep tokens at least P times as probable as the most, 0 <= P <= 1")
      ->default_str("0");
  // CLI11 reads "-1" into an unsigned integer as 2^64 - 1: refused here instead.
  command->add_option("--seed", options->seed, "seed S: batch entry b draws with seed S + b (Philox4x32-10's key)")
      ->check(CLI::NonNegativeNumber)
      ->default_str("0");
  command->add_option("--offset", options->offset, "offset O: draw d of step t is at offset O + t x N + d")
      ->check(CLI::NonNegativeNumber)
      ->default_str("0");
  command->add_option("-n,--num-samples", options->draws, "N draws a row")->default_str("1");
  add_printing_options(*command, options->format, options->vocab, options->output_prefix,
                       "write PREFIX.tokens.npy (int32), [leading dims..., num-samples], instead of printing");
  command->callback([options] { run_sample(*options); });
}

}  // namespace sampler
