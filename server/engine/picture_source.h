// Pictures sent one by one (JPEG or PNG, or raw RGB24 of a size the stream's settings give),
// each decoded and converted on its own.
#ifndef VIDCLF_SERVER_ENGINE_PICTURE_SOURCE_H_
#define VIDCLF_SERVER_ENGINE_PICTURE_SOURCE_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "media/frame_converter.h"
#include "server/engine/frame_source.h"

namespace vidclf::engine {

struct Picture {
  std::string data;
  // 0 for a picture after the first: spaced at kDefaultPictureRate.
  double timestamp_seconds = 0;
  std::chrono::steady_clock::time_point arrived;
};

class PictureSource : public FrameSource {
 public:
  struct Options {
    media::PreprocessOptions preprocess;
    int max_frame_side = 8192;
    // Raw RGB24 of width x height, else JPEG or PNG.
    bool raw_rgb24 = false;
    int width = 0;
    int height = 0;
    // Converts the pictures media::FeedSampler takes; the others are handed on unconverted.
    int embed_stride = 1;
    double sample_fps = 0;
  };
  // Blocks until picture `index` (0, 1, ...) arrives; nullopt once the feed has ended.
  using NextPicture = std::function<absl::StatusOr<std::optional<Picture>>(int64_t index)>;

  PictureSource(const Options& options, NextPicture next)
      : options_(options), next_(std::move(next)) {}

  // A picture that does not decode ends the source: its error names the picture.
  absl::Status Run(const FrameHandler& on_frame) override;

 private:
  const Options options_;
  const NextPicture next_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_PICTURE_SOURCE_H_
