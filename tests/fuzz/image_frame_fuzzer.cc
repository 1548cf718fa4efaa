// libFuzzer target: ImageFrameDecoder over arbitrary bytes. The first byte chooses the path: even
// for an encoded picture (the rest of the input), odd for a raw RGB24 frame whose width and height
// (1 to 64) come from the next two bytes and whose pixels are the rest. Each picture is converted
// twice with the same decoder, as a feed's decoder is reused. Any crash, leak, sanitizer report,
// timeout, or a result outside the decoder's contract (checked below) is a finding. A damaged JPEG
// may decode differently the second time (it may use tables that it defines after its scan, kept
// from the first time), so only raw frames must give the same floats twice. Seeds:
// scripts/media-sanitizer-check.sh.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "media/frame_converter.h"
#include "media/image_decoder.h"
#include "media/libav_settings.h"

extern "C" {
#include <libavutil/log.h>
}

namespace {

using ::vidclf::media::ImageFrameDecoder;
using ::vidclf::media::PreprocessOptions;

constexpr int kMaxFrameSide = 512;

PreprocessOptions SmallFrames() {
  PreprocessOptions preprocess;
  preprocess.resize_shorter_side = 40;
  preprocess.crop_size = 32;
  return preprocess;
}

[[noreturn]] void Violation(const char* what) {
  std::fprintf(stderr, "ImageFrameDecoder broke its contract: %s\n", what);
  std::abort();
}

// A failure must be one of the documented kinds, with a message.
void CheckError(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument &&
      status.code() != absl::StatusCode::kResourceExhausted) {
    Violation("error code other than INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
  }
  if (status.message().empty()) Violation("error without a message");
}

void CheckPixels(const std::vector<float>& pixels) {
  for (float value : pixels) {
    if (!std::isfinite(value)) Violation("pixel value not finite");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // FFmpeg logs every damaged picture; printing that would dominate the run time.
  vidclf::media::LibavSettings settings;
  settings.log_level = AV_LOG_QUIET;
  vidclf::media::ConfigureLibav(settings);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  ImageFrameDecoder decoder(SmallFrames(), kMaxFrameSide);
  std::vector<float> first(decoder.output_floats());
  std::vector<float> second(decoder.output_floats());
  absl::Status status;
  absl::Status again;
  if (data[0] % 2 == 0) {
    const absl::string_view picture = input.substr(1);
    status = decoder.DecodeEncoded(picture, first.data());
    again = decoder.DecodeEncoded(picture, second.data());
  } else {
    if (size < 3) return 0;
    const int width = 1 + data[1] % 64;
    const int height = 1 + data[2] % 64;
    absl::string_view pixels = input.substr(3);
    const auto frame_bytes = static_cast<size_t>(3 * width * height);
    // Enough bytes: exactly one frame's, which must convert. Too few: must be refused.
    const bool whole = pixels.size() >= frame_bytes;
    if (whole) pixels = pixels.substr(0, frame_bytes);
    status = decoder.ConvertRgb24(pixels, width, height, first.data());
    again = decoder.ConvertRgb24(pixels, width, height, second.data());
    if (whole && !status.ok()) Violation("a whole RGB24 frame was refused");
    if (!whole && status.code() != absl::StatusCode::kInvalidArgument) {
      Violation("a short RGB24 frame was not refused as INVALID_ARGUMENT");
    }
  }
  for (const absl::Status* result : {&status, &again}) {
    if (!result->ok()) CheckError(*result);
  }
  if (status.ok()) CheckPixels(first);
  if (again.ok()) CheckPixels(second);
  if (data[0] % 2 == 1 && status.ok() && (!again.ok() || first != second)) {
    Violation("the same RGB24 frame converted to other floats the second time");
  }
  return 0;
}
