#include "server/engine/picture_source.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "media/feed_sampler.h"
#include "media/image_decoder.h"

namespace vidclf::engine {

absl::Status PictureSource::Run(const FrameHandler& on_frame) {
  media::ImageFrameDecoder decoder(options_.preprocess, options_.max_frame_side);
  std::vector<float> pixels(decoder.output_floats());
  const media::FrameBuffer frame = media::FrameBuffer::HostRgbFloat(
      pixels.data(), options_.preprocess.crop_size, options_.preprocess.crop_size,
      options_.preprocess.channels_last);
  media::FeedSampler sampler(options_.embed_stride, options_.sample_fps);
  for (int64_t index = 0;; ++index) {
    absl::StatusOr<std::optional<Picture>> next = next_(index);
    if (!next.ok()) return next.status();
    if (!next->has_value()) return absl::OkStatus();  // the feed ended
    const Picture& picture = **next;
    const double seconds = picture.timestamp_seconds != 0 || index == 0
                               ? picture.timestamp_seconds
                               : static_cast<double>(index) / kDefaultPictureRate;
    if (!sampler.Takes(seconds, index)) {  // not embedded: not even decoded
      if (auto status = on_frame(SourceFrame{index, seconds, picture.arrived, nullptr});
          !status.ok()) {
        return status;
      }
      continue;
    }
    const absl::Status converted =
        options_.raw_rgb24
            ? decoder.ConvertRgb24(picture.data, options_.width, options_.height, pixels.data())
            : decoder.DecodeEncoded(picture.data, pixels.data());
    if (!converted.ok()) {
      return absl::Status(converted.code(),
                          absl::StrCat("frame ", index, " of the stream: ", converted.message()));
    }
    if (auto status = on_frame(SourceFrame{index, seconds, picture.arrived, &frame});
        !status.ok()) {
      return status;
    }
  }
}

}  // namespace vidclf::engine
