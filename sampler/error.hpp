// sampler — the one error type the CLI reports: a problem with the user's files, options or
// output paths. main() prints what() as a single line and exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace sampler {

/// A user-facing failure. what() is one line that names the file (or option) and the problem.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Error("<path>: <problem>"), the shape of every message about a file.
inline Error file_error(const std::string& path, const std::string& problem) { return Error(path + ": " + problem); }

}  // namespace sampler
