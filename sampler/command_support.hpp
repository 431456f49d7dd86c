// sampler — what every subcommand shares: the input and backend options, and the chunk loop
// that streams a file through bounded host (and device) buffers.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "chunk_buffer.hpp"
#include "logits_file.hpp"
#include "progress.hpp"
#include "topk_printer.hpp"

namespace sampler {

/// Options of every command that reads logits.
struct CommonOptions {
  std::string path;
  std::string tensor;
  std::string shape;  ///< --shape as typed; parsed by open_input()
  std::string dtype;  ///< --dtype as typed
  BackendKind backend = BackendKind::automatic;
  float temperature = 1.0f;
  int64_t chunk_rows = 0;  ///< 0: as many rows as fit in kChunkBudgetBytes
};

/// Adds FILE, --tensor, --shape, --dtype, --backend, --temperature and --chunk-rows to `command`.
void add_common_options(CLI::App& command, CommonOptions& options);

/// Adds -o,--output PATH to `command`, refusing an empty PATH when parsed (an empty name would
/// fail only at the final rename, after all the work, with no name to show).
CLI::Option* add_output_option(CLI::App& command, std::string& path, const std::string& description);

/// Adds --format, --vocab and -o,--output PREFIX (which excludes the other two: it saves .npy
/// files instead of printing) to a command that prints per-row results.
void add_printing_options(CLI::App& command, OutputFormat& format, std::string& vocab, std::string& output_prefix,
                          const std::string& output_description);

/// Every algorithm of each op, in the order --algorithm lists them.
inline const std::vector<softk::SoftmaxAlgorithm> kSoftmaxAlgorithms = {
    softk::SoftmaxAlgorithm::automatic, softk::SoftmaxAlgorithm::register_resident,
    softk::SoftmaxAlgorithm::shared_memory, softk::SoftmaxAlgorithm::two_pass, softk::SoftmaxAlgorithm::split_k};
inline const std::vector<softk::TopkAlgorithm> kTopkAlgorithms = {
    softk::TopkAlgorithm::automatic, softk::TopkAlgorithm::fused, softk::TopkAlgorithm::radix_select,
    softk::TopkAlgorithm::split_k};

/// Adds option `name` taking one of `choices` by name (CLI11 rejects any other, listing them)
/// and storing the matching value in `target`, which must outlive the parse.
template <class Enum>
CLI::Option* add_choice_option(CLI::App& command, const std::string& name, Enum& target,
                               const std::vector<std::pair<std::string, Enum>>& choices, const std::string& help) {
  std::vector<std::string> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  const auto store = [&target, choices](const std::string& text) {
    for (const auto& choice : choices) {
      if (choice.first == text) target = choice.second;
    }
  };
  return command.add_option_function<std::string>(name, store, help)->check(CLI::IsMember(names));
}

/// Adds --algorithm to `command`, choosing among `values` by their softk::to_string names.
template <class Algorithm>
void add_algorithm_option(CLI::App& command, Algorithm& algorithm, const std::vector<Algorithm>& values) {
  std::vector<std::pair<std::string, Algorithm>> choices;
  for (Algorithm value : values) choices.emplace_back(softk::to_string(value), value);
  add_choice_option(command, "--algorithm", algorithm, choices, "GPU algorithm (ignored by the cpu backend)")
      ->default_str(softk::to_string(algorithm));
}

/// `value` as an error message shows what the user typed ("0.5", "nan", "-1").
std::string shown(float value);

/// How a command reads --temperature: softmax(logits / T) needs T > 0; sampling also takes 0,
/// greedy.
enum class TemperatureRule { positive, zero_is_greedy };

/// Checks the parameters in `options` and opens the input. Throws sampler::Error naming the
/// problem: this runs before any output is created.
LogitsFile open_input(const CommonOptions& options, TemperatureRule rule = TemperatureRule::positive);

/// The softk options for a softmax with `options`' temperature and `algorithm`.
softk::SoftmaxOptions softmax_options(const CommonOptions& options, softk::SoftmaxAlgorithm algorithm);

/// Host memory one chunk may take, input rows and outputs together (a cuda run takes the same on
/// the device): large enough to keep the GPU busy, small enough for any machine.
constexpr int64_t kChunkBudgetBytes = int64_t{256} << 20;

/// Rows per chunk: `requested` when > 0, else as many rows as fit in kChunkBudgetBytes at
/// `bytes_per_row` (input plus outputs), at least one (a row larger than the budget is read
/// whole); never more than `total`, nor than the 2^31 - 1 rows softk takes in one call.
int64_t rows_per_chunk(int64_t bytes_per_row, int64_t total, int64_t requested);

/// Reads `file` in chunks of `chunk_rows` rows into one reused host buffer and calls
/// fn(view, first_row, rows) on each, in order, advancing a progress bar labelled `label`.
template <class Fn>
void for_each_chunk(const LogitsFile& file, int64_t chunk_rows, const char* label, Fn&& fn) {
  Progress progress = Progress::on_stderr(label, file.rows());
  std::vector<unsigned char> buffer = chunk_buffer<unsigned char>(chunk_rows * file.row_bytes(), chunk_rows, "logits");
  for (int64_t first = 0; first < file.rows(); first += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, file.rows() - first);
    file.read_rows(first, rows, buffer.data());
    fn(file.rows_view(buffer.data(), rows), first, rows, progress);
    progress.advance(rows);
  }
}

/// Streams `file` through backend.softmax: for each chunk, in order, calls
/// sink(chunk, first_row, rows, probs, status) with the chunk's input view, its [rows, V] f32
/// probabilities and its [rows] RowStatus. The progress bar is erased before each sink call,
/// so the sink may print. `requested_rows` is --chunk-rows (0: fit the budget).
template <class Sink>
void stream_softmax(const LogitsFile& file, Backend& backend, const softk::SoftmaxOptions& options,
                    int64_t requested_rows, const char* label, Sink&& sink) {
  const int64_t vocab = file.vocab();
  const int64_t chunk_rows = rows_per_chunk(file.row_bytes() + vocab * 4 + 4, file.rows(), requested_rows);
  std::vector<float> probs = chunk_buffer<float>(chunk_rows * vocab, chunk_rows, "probabilities");
  std::vector<int32_t> status = chunk_buffer<int32_t>(chunk_rows, chunk_rows, "row status");
  for_each_chunk(file, chunk_rows, label,
                 [&](const softk::LogitsView& chunk, int64_t first, int64_t rows, Progress& progress) {
                   backend.softmax(chunk, probs.data(), status.data(), options);
                   progress.suspend();
                   sink(chunk, first, rows, probs.data(), status.data());
                 });
}

/// Streams `file` through backend.topk: for each chunk, in order, calls
/// sink(first_row, rows, values, indices, status) with [rows, k] values (probabilities, or
/// log-probs when options.log_probs) and indices, and [rows] RowStatus. As stream_softmax.
template <class Sink>
void stream_topk(const LogitsFile& file, Backend& backend, int32_t k, const softk::TopkOptions& options,
                 int64_t requested_rows, const char* label, Sink&& sink) {
  const int64_t chunk_rows = rows_per_chunk(file.row_bytes() + int64_t{k} * 8 + 4, file.rows(), requested_rows);
  std::vector<float> values = chunk_buffer<float>(chunk_rows * k, chunk_rows, "top-k values");
  std::vector<int32_t> indices = chunk_buffer<int32_t>(chunk_rows * k, chunk_rows, "top-k indices");
  std::vector<int32_t> status = chunk_buffer<int32_t>(chunk_rows, chunk_rows, "row status");
  for_each_chunk(file, chunk_rows, label,
                 [&](const softk::LogitsView& chunk, int64_t first, int64_t rows, Progress& progress) {
                   backend.topk(chunk, k, values.data(), indices.data(), status.data(), options);
                   progress.suspend();
                   sink(first, rows, values.data(), indices.data(), status.data());
                 });
}

/// Counts the rows that were not ok in one run and, at the end, notes them on stderr (NaN rows
/// and fully masked rows give NaN or empty results, which a person should not miss).
class RowStatusTally {
 public:
  void add(const int32_t* status, int64_t rows);
  /// Prints one "sampler: note: ..." line on stderr when any row was not ok.
  void report() const;

 private:
  int64_t all_masked_ = 0;
  int64_t has_nan_ = 0;
};

// The subcommands; each runs its work from its CLI11 callback.
void add_info_command(CLI::App& app);
void add_softmax_command(CLI::App& app);
void add_topk_command(CLI::App& app);
void add_sample_command(CLI::App& app);

}  // namespace sampler
