#include "progress.hpp"

#include <unistd.h>

#include <algorithm>

namespace sampler {

Progress::Progress(std::string label, int64_t total, std::FILE* sink, bool enabled, std::chrono::milliseconds delay)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      sink_(sink),
      enabled_(enabled),
      show_after_(Clock::now() + delay) {}

Progress Progress::on_stderr(std::string label, int64_t total) {
  return Progress(std::move(label), total, stderr, ::isatty(STDERR_FILENO) == 1, std::chrono::seconds(1));
}

Progress::~Progress() { suspend(); }

void Progress::advance(int64_t rows) {
  done_ += rows;
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (now < show_after_ || (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_)) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::min(done_, total_) / total_);
  // "\033[K" clears the rest of the line, in case the previous draw was longer.
  std::fprintf(sink_, "\r%s [%s%s] %3d%%  %lld/%lld rows\033[K", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '-').c_str(), static_cast<int>(100 * std::min(done_, total_) / total_),
               static_cast<long long>(done_), static_cast<long long>(total_));
  std::fflush(sink_);
  drawn_ = true;
  last_draw_ = now;
}

void Progress::suspend() {
  if (!drawn_) return;
  std::fputs("\r\033[K", sink_);
  std::fflush(sink_);
  drawn_ = false;
}

}  // namespace sampler
