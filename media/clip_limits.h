// The limits and the time budget of one DecodeClip call, as the steps of a decode check them.
// Internal to the clip decoder.
#ifndef VIDCLF_MEDIA_CLIP_LIMITS_H_
#define VIDCLF_MEDIA_CLIP_LIMITS_H_

#include <chrono>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "media/clip_options.h"

namespace vidclf::media {

using DecodeClock = std::chrono::steady_clock;

double SecondsSince(DecodeClock::time_point start);

// INVALID_ARGUMENT naming the option that cannot be used.
absl::Status CheckClipOptions(const ClipOptions& options);

// When the decode budget ends; never without one.
DecodeClock::time_point DeadlineFrom(DecodeClock::time_point start, const ClipOptions& options);
bool PastBudget(DecodeClock::time_point deadline);
// The DEADLINE_EXCEEDED error; `progress` says how far decoding got.
absl::Status BudgetExceeded(const ClipOptions& options, absl::string_view progress);

// The cancellation's reason once the call is cancelled; OK otherwise.
absl::Status CancellationStatus(const ClipOptions& options);

// The most samples the movie fragments of an MP4 may declare, over all tracks: 4 per frame that
// max_total_frames allows, room for an audio track (AAC at 48 kHz has 1.6 packets per frame of
// 30 fps video) and a few more.
int64_t MaxFragmentSamples(const ClipOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_CLIP_LIMITS_H_
