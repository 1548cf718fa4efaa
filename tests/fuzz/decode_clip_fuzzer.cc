// libFuzzer target: DecodeClip over arbitrary bytes, with small limits so that each input runs in
// milliseconds. Any crash, leak, sanitizer report, timeout, or a result outside DecodeClip's
// contract (checked below) is a finding. Seeds: scripts/media-sanitizer-check.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "media/clip_decoder.h"
#include "media/libav_settings.h"

extern "C" {
#include <libavutil/log.h>
}

namespace {

using ::vidclf::media::ClipOptions;
using ::vidclf::media::DecodeClip;
using ::vidclf::media::DecodedClip;
using ::vidclf::media::VideoSource;

ClipOptions SmallLimits() {
  ClipOptions options;
  options.sampling.num_frames = 4;
  options.preprocess.resize_shorter_side = 40;
  options.preprocess.crop_size = 32;
  options.max_input_bytes = 1 << 20;
  options.max_frame_side = 512;
  options.max_total_frames = 64;
  // One thread: deterministic runs, and no thread start-up per input.
  options.decoder_threads = 1;
  return options;
}

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "DecodeClip broke its contract: %s\n", what);
  std::abort();
}

void CheckClip(const DecodedClip& clip, const ClipOptions& options) {
  const int crop = options.preprocess.crop_size;
  if (clip.num_frames < 1 || clip.num_frames > options.sampling.num_frames)
    Violation("frame count");
  if (clip.crop_size != crop) Violation("crop size");
  if (clip.pixels.size() != static_cast<size_t>(clip.num_frames) * 3 * crop * crop) {
    Violation("pixel count");
  }
  if (clip.frame_indices.size() != static_cast<size_t>(clip.num_frames) ||
      clip.timestamps_seconds.size() != static_cast<size_t>(clip.num_frames)) {
    Violation("index or timestamp count");
  }
  if (clip.total_frames < clip.num_frames || clip.total_frames > options.max_total_frames) {
    Violation("total frame count");
  }
  for (float value : clip.pixels) {
    if (!std::isfinite(value)) Violation("pixel value not finite");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // FFmpeg logs every damaged packet; printing that would dominate the run time.
  vidclf::media::LibavSettings settings;
  settings.log_level = AV_LOG_QUIET;
  vidclf::media::ConfigureLibav(settings);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ClipOptions options = SmallLimits();
  const absl::StatusOr<DecodedClip> clip = DecodeClip(
      VideoSource::Bytes(absl::string_view(reinterpret_cast<const char*>(data), size)), options);
  if (clip.ok()) {
    CheckClip(*clip, options);
  } else if (clip.status().code() != absl::StatusCode::kInvalidArgument &&
             clip.status().code() != absl::StatusCode::kResourceExhausted) {
    Violation("error code other than INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
  } else if (clip.status().message().empty()) {
    Violation("error without a message");
  }
  return 0;
}
