// Encodes RGB images into a video file held in memory. Used to make synthetic training and demo
// videos that go through exactly the decoding path real uploads take.
#ifndef VIDCLF_MEDIA_VIDEO_ENCODER_H_
#define VIDCLF_MEDIA_VIDEO_ENCODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::media {

// A packed RGB24 image: rgb.size() == 3 * width * height.
struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;
};

struct EncodeOptions {
  // Container short name, as `ffmpeg -f` takes it.
  std::string container = "mp4";
  // Encoder name, as `ffmpeg -c:v` takes it. MPEG-4 part 2 is built into every libavcodec.
  // MJPEG is coded full-range, as JPEG is; libx264 without macroblock-tree rate control, whose
  // output was not repeatable within one process.
  std::string codec = "mpeg4";
  int frames_per_second = 12;
  // Fixed quantiser for codecs that take one (2 = near-lossless, 31 = worst).
  int quantizer = 3;
};

// Encodes `frames` (all of one even width and height) and returns the bytes of the whole file.
// Deterministic: the same frames and options give the same bytes.
absl::StatusOr<std::string> EncodeVideo(const std::vector<RgbImage>& frames,
                                        const EncodeOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_VIDEO_ENCODER_H_
