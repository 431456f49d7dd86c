// sampler — inspect LLM logits files: softmax, exact top-k and seeded sampling, on a CUDA device
// or the CPU.
//
// Exit status: 0 on success, 1 on a bad input, parameter or output path (one line on stderr,
// no output file left behind), 2 on a command-line syntax error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "command_support.hpp"

namespace {

/// Every failure is reported as exactly one line, whatever the message holds.
void print_error(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "sampler: error: %s\n", message.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Inspect LLM logits files ([V], [B, V] or [B, T, V]): softmax, exact top-k and sampling, on the GPU or the CPU",
      "sampler");
  app.require_subcommand(1);
  app.footer("Exit status: 0 on success, 1 on a bad input file, parameter or output path, 2 on a command-line error.");
  // A repeated option takes its last value, so a script or alias can override a default.
  // (Set before the subcommands are added: they copy these defaults.)
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sampler::add_info_command(app);
  sampler::add_softmax_command(app);
  sampler::add_topk_command(app);
  sampler::add_sample_command(app);
  try {
    // The chosen subcommand's callback does its work inside parse().
    app.parse(argc, argv);
    std::cout.flush();
    if (!std::cout) throw std::runtime_error("writing to standard output failed");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    print_error(e.what());
    return 2;
  } catch (const std::bad_alloc&) {  // a chunk's buffers name the chunk themselves (chunk_buffer.hpp)
    print_error("out of memory");
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return 0;
}
