#include "command_support.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "error.hpp"

namespace sampler {

void add_common_options(CLI::App& command, CommonOptions& options) {
  command.add_option("FILE", options.path, "logits: .npy (<f4, <f2), .safetensors (F32, F16, BF16) or raw binary")
      ->required();
  command.add_option("--tensor", options.tensor, "safetensors: the tensor to read when the file holds several");
  command.add_option("--shape", options.shape, "raw input: V, B,V or B,T,V (for .npy/.safetensors: must match)");
  command.add_option("--dtype", options.dtype, "raw input: f32, f16 or bf16 (for .npy/.safetensors: must match)");
  add_choice_option(command, "--backend", options.backend,
                    {{"auto", BackendKind::automatic}, {"cuda", BackendKind::cuda}, {"cpu", BackendKind::cpu}},
                    "auto: cuda when a CUDA device is present, else cpu")
      ->default_str("auto");
  command.add_option("--temperature", options.temperature, "softmax(logits / T); T > 0")->default_str("1");
  command.add_option("--chunk-rows", options.chunk_rows, "rows read per chunk (default: as many as fit in 256 MiB)");
}

CLI::Option* add_output_option(CLI::App& command, std::string& path, const std::string& description) {
  const CLI::Validator not_empty(
      [](std::string& value) { return value.empty() ? std::string("the path must not be empty") : std::string(); },
      "PATH");
  return command.add_option("-o,--output", path, description)->check(not_empty);
}

void add_printing_options(CLI::App& command, OutputFormat& format, std::string& vocab, std::string& output_prefix,
                          const std::string& output_description) {
  CLI::Option* format_option =
      add_choice_option(command, "--format", format,
                        {{"table", OutputFormat::table}, {"json", OutputFormat::json}, {"tsv", OutputFormat::tsv}},
                        "table, json (JSON lines, one object per row) or tsv")
          ->default_str("table");
  CLI::Option* vocab_option =
      command.add_option("--vocab", vocab, "token strings: tokenizer.json, vocab.json or one token per line");
  add_output_option(command, output_prefix, output_description)->excludes(format_option)->excludes(vocab_option);
}

std::string shown(float value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

LogitsFile open_input(const CommonOptions& options, TemperatureRule rule) {
  const float t = options.temperature;
  const bool greedy = rule == TemperatureRule::zero_is_greedy && t == 0.0f;
  if (!(std::isfinite(t) && (t > 0.0f || greedy))) {
    throw Error(std::string("--temperature must be finite and ") +
                (rule == TemperatureRule::zero_is_greedy ? ">= 0 (0: greedy)" : "> 0") + " (got " + shown(t) + ")");
  }
  if (options.chunk_rows < 0) throw Error("--chunk-rows must be >= 1 (got " + std::to_string(options.chunk_rows) + ")");
  InputSpec spec;
  spec.path = options.path;
  spec.tensor = options.tensor;
  if (!options.shape.empty()) spec.shape = parse_shape(options.shape);
  if (!options.dtype.empty()) spec.dtype = parse_dtype(options.dtype);
  return LogitsFile::open(spec);
}

softk::SoftmaxOptions softmax_options(const CommonOptions& options, softk::SoftmaxAlgorithm algorithm) {
  softk::SoftmaxOptions softmax;
  softmax.temperature = options.temperature;
  softmax.algorithm = algorithm;
  return softmax;
}

int64_t rows_per_chunk(int64_t bytes_per_row, int64_t total, int64_t requested) {
  const int64_t rows = requested > 0 ? requested : std::max<int64_t>(1, kChunkBudgetBytes / bytes_per_row);
  return std::min({rows, total, int64_t{INT32_MAX}});
}

void RowStatusTally::add(const int32_t* status, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    all_masked_ += status[r] == static_cast<int32_t>(softk::RowStatus::all_masked);
    has_nan_ += status[r] == static_cast<int32_t>(softk::RowStatus::has_nan);
  }
}

void RowStatusTally::report() const {
  std::string note;
  if (has_nan_ > 0) note += std::to_string(has_nan_) + " row(s) hold NaN logits (NaN results)";
  if (all_masked_ > 0) {
    note += (note.empty() ? "" : "; ") + std::to_string(all_masked_) +
            " row(s) are all -inf (zero probabilities, index -1)";
  }
  if (!note.empty()) std::fprintf(stderr, "sampler: note: %s\n", note.c_str());
}

}  // namespace sampler
