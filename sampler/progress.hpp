// sampler — a progress bar for long runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace sampler {

/// A one-line bar "label [#####-----]  45%  123/456 rows", redrawn in place with '\r'.
/// It is drawn only once `delay` has passed since construction, so short runs print nothing,
/// and at most ten times a second. The destructor erases it.
class Progress {
 public:
  /// A bar on `sink` (not owned) for `total` rows; `enabled` = false makes every call a no-op.
  Progress(std::string label, int64_t total, std::FILE* sink, bool enabled, std::chrono::milliseconds delay);
  /// The usual bar: on stderr, only when stderr is a terminal, after one second.
  static Progress on_stderr(std::string label, int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Counts `rows` more rows done and redraws if due.
  void advance(int64_t rows);
  /// Erases the bar so other output to the same terminal starts on a clean line; the next
  /// advance() draws it again.
  void suspend();

 private:
  using Clock = std::chrono::steady_clock;

  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  std::FILE* sink_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point show_after_;
  Clock::time_point last_draw_;
};

}  // namespace sampler
