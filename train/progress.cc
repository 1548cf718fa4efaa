#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace vidclf::train {

Progress::Progress(std::string what, int64_t total, std::FILE* out)
    : what_(std::move(what)),
      total_(total),
      out_(out),
      terminal_(isatty(fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()) {}

std::string Progress::FormatSeconds(double seconds) {
  const auto s = static_cast<int64_t>(std::lround(std::max(0.0, seconds)));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

void Progress::Advance(int64_t n, const std::string& note) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ += n;
  if (terminal_ || done_ >= next_report_ || done_ == total_) {
    Draw(note);
    next_report_ = done_ + std::max<int64_t>(1, total_ / 10);
  }
}

void Progress::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (terminal_) std::fputc('\n', out_);
  std::fflush(out_);
}

void Progress::Draw(const std::string& note) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
  constexpr int kWidth = 24;
  const int filled =
      total_ > 0 ? static_cast<int>(kWidth * std::min<int64_t>(done_, total_) / total_) : kWidth;
  const std::string line =
      absl::StrFormat("[%s%s] %d/%d %s  %.1f/s  elapsed %s  ETA %s%s%s", std::string(filled, '#'),
                      std::string(kWidth - filled, '.'), done_, total_, what_, rate,
                      FormatSeconds(elapsed), FormatSeconds(eta), note.empty() ? "" : "  ", note);
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K", line.c_str());
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace vidclf::train
