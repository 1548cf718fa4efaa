// A progress line for long steps: done/total, rate and ETA. On a terminal it redraws one line;
// into a file or pipe it writes a line at every tenth of the work, so logs stay short.
#ifndef VIDCLF_TRAIN_PROGRESS_H_
#define VIDCLF_TRAIN_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace vidclf::train {

class Progress {
 public:
  // `what` names the unit ("clips"); `out` is where the line goes (stderr by default).
  Progress(std::string what, int64_t total, std::FILE* out = stderr);

  // Counts `n` more units done; `note` (may be empty) is shown after the numbers. Thread-safe.
  void Advance(int64_t n = 1, const std::string& note = "");
  // Ends the line.
  void Finish();

  // "1m05s", "42s", "2h03m".
  static std::string FormatSeconds(double seconds);

 private:
  void Draw(const std::string& note);

  const std::string what_;
  const int64_t total_;
  std::FILE* const out_;
  const bool terminal_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  int64_t done_ = 0;
  int64_t next_report_ = 0;
  bool finished_ = false;
};

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_PROGRESS_H_
