#include "media/clip_limits.h"

#include "absl/strings/str_cat.h"
#include "media/frame_sampler.h"

namespace vidclf::media {

double SecondsSince(DecodeClock::time_point start) {
  return std::chrono::duration<double>(DecodeClock::now() - start).count();
}

absl::Status CheckClipOptions(const ClipOptions& options) {
  if (auto status = ValidatePreprocessOptions(options.preprocess); !status.ok()) return status;
  return ValidateSamplingOptions(options.sampling);
}

DecodeClock::time_point DeadlineFrom(DecodeClock::time_point start, const ClipOptions& options) {
  return options.decode_timeout_ms > 0
             ? start + std::chrono::milliseconds(options.decode_timeout_ms)
             : DecodeClock::time_point::max();
}

bool PastBudget(DecodeClock::time_point deadline) { return DecodeClock::now() >= deadline; }

absl::Status BudgetExceeded(const ClipOptions& options, absl::string_view progress) {
  return absl::DeadlineExceededError(absl::StrCat(
      "decoding ran past its budget of ", options.decode_timeout_ms, " ms (", progress, ")"));
}

absl::Status CancellationStatus(const ClipOptions& options) {
  if (options.cancellation == nullptr || !options.cancellation->cancelled()) {
    return absl::OkStatus();
  }
  return options.cancellation->reason();
}

int64_t MaxFragmentSamples(const ClipOptions& options) { return 4 * options.max_total_frames; }

}  // namespace vidclf::media
