// sampler softmax FILE -o OUT.npy: the full probabilities, f32, shaped like the input.
#include <memory>

#include "command_support.hpp"
#include "output_file.hpp"

namespace sampler {
namespace {

struct SoftmaxCommandOptions {
  CommonOptions common;
  softk::SoftmaxAlgorithm algorithm = softk::SoftmaxAlgorithm::automatic;
  std::string output;
};

void run_softmax(const SoftmaxCommandOptions& options) {
  const LogitsFile file = open_input(options.common);
  const std::unique_ptr<Backend> backend = make_backend(options.common.backend);
  NpyWriter output(options.output, NpyElement::f32, file.shape());
  RowStatusTally tally;
  stream_softmax(file, *backend, softmax_options(options.common, options.algorithm), options.common.chunk_rows,
                 "softmax",
                 [&](const softk::LogitsView&, int64_t, int64_t rows, const float* probs, const int32_t* status) {
                   output.append(probs, rows * file.vocab());
                   tally.add(status, rows);
                 });
  output.commit();
  tally.report();
}

}  // namespace

void add_softmax_command(CLI::App& app) {
  auto options = std::make_shared<SoftmaxCommandOptions>();
  CLI::App* command = app.add_subcommand("softmax", "softmax(logits / T) over the vocabulary, written as f32 .npy");
  add_common_options(*command, options->common);
  add_algorithm_option(*command, options->algorithm, kSoftmaxAlgorithms);
  add_output_option(*command, options->output, "output .npy, shaped like the input")->required();
  command->callback([options] { run_softmax(*options); });
}

}  // namespace sampler
