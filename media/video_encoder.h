// Encodes RGB images into a video file held in memory. Used to make synthetic training, demo and
// timeline videos that go through exactly the decoding path real uploads take.
#ifndef VIDCLF_MEDIA_VIDEO_ENCODER_H_
#define VIDCLF_MEDIA_VIDEO_ENCODER_H_

#include <cstdint>
#include <memory>
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
  // Units of the timestamps VideoWriter::Add takes, per second; 0: frames_per_second (a frame
  // per unit). A finer unit (600 divides into 10, 12, 15, 24 and 25) lets the rate change.
  int timestamps_per_second = 0;
  // Frames from one keyframe to the next; 0: frames_per_second (a keyframe a second).
  int keyframe_interval = 0;
  // Whether the encoder may also start a keyframe where the picture changes completely; without,
  // keyframes come every keyframe_interval frames only, as many cameras place them.
  bool keyframes_at_scene_cuts = true;
  // Fixed quantiser for codecs that take one (2 = near-lossless, 31 = worst).
  int quantizer = 3;
};

// Encodes images one at a time, so that a long video never holds its frames at once (the file's
// bytes are held until Finish).
class VideoWriter {
 public:
  // A video of `width` x `height` (even, positive). INVALID_ARGUMENT for an odd size or an
  // unknown codec or container.
  static absl::StatusOr<VideoWriter> Open(int width, int height, const EncodeOptions& options);
  VideoWriter(VideoWriter&&) noexcept;
  VideoWriter& operator=(VideoWriter&&) noexcept;
  ~VideoWriter();

  // Adds `image`, shown from `timestamp` (in 1/timestamps_per_second units; each later than the
  // last). An image of another size is scaled to the video's.
  absl::Status Add(const RgbImage& image, int64_t timestamp);
  // Flushes the encoder and returns the whole file; the writer takes no more images.
  absl::StatusOr<std::string> Finish();

 private:
  struct State;
  explicit VideoWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Encodes `frames` (all of one even width and height) and returns the bytes of the whole file.
// Deterministic: the same frames and options give the same bytes. Frame i is shown at i units.
absl::StatusOr<std::string> EncodeVideo(const std::vector<RgbImage>& frames,
                                        const EncodeOptions& options);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_VIDEO_ENCODER_H_
