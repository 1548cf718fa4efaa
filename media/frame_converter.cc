#include "media/frame_converter.h"

#include <cmath>

#include "absl/strings/str_cat.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace vidclf::media {

absl::Status ValidatePreprocessOptions(const PreprocessOptions& options) {
  if (options.crop_size <= 0 || options.resize_shorter_side < options.crop_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("preprocessing needs 0 < crop_size <= resize_shorter_side; got crop_size ",
                     options.crop_size, ", resize_shorter_side ", options.resize_shorter_side));
  }
  for (float s : options.std) {
    if (!(s > 0)) return absl::InvalidArgumentError("preprocessing std values must be positive");
  }
  return absl::OkStatus();
}

FrameConverter::FrameConverter(const PreprocessOptions& options) : options_(options) {
  for (int c = 0; c < 3; ++c) {
    scale_[c] = 1.0f / (255.0f * options_.std[c]);
    offset_[c] = -options_.mean[c] / options_.std[c];
  }
}

FrameConverter::~FrameConverter() { sws_freeContext(scaler_); }

int64_t FrameConverter::output_floats() const {
  return 3LL * options_.crop_size * options_.crop_size;
}

absl::Status FrameConverter::Convert(const AVFrame& frame, float* chw) {
  if (frame.width <= 0 || frame.height <= 0) {
    return absl::InvalidArgumentError("decoded frame has no pixels");
  }
  const int shorter = options_.resize_shorter_side;
  int scaled_width = shorter;
  int scaled_height = shorter;
  if (frame.width < frame.height) {
    scaled_height =
        static_cast<int>(std::lround(static_cast<double>(frame.height) * shorter / frame.width));
  } else {
    scaled_width =
        static_cast<int>(std::lround(static_cast<double>(frame.width) * shorter / frame.height));
  }
  scaler_ = sws_getCachedContext(
      scaler_, frame.width, frame.height, static_cast<AVPixelFormat>(frame.format), scaled_width,
      scaled_height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (scaler_ == nullptr) {
    const char* name = av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame.format));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot convert pixel format ", name ? name : "unknown", " to RGB"));
  }
  const int rgb_stride = 3 * scaled_width;
  rgb_.resize(static_cast<size_t>(rgb_stride) * scaled_height);
  uint8_t* destination[4] = {rgb_.data(), nullptr, nullptr, nullptr};
  int destination_stride[4] = {rgb_stride, 0, 0, 0};
  sws_scale(scaler_, frame.data, frame.linesize, 0, frame.height, destination, destination_stride);

  const int crop = options_.crop_size;
  const int left = (scaled_width - crop) / 2;
  const int top = (scaled_height - crop) / 2;
  const int64_t plane = static_cast<int64_t>(crop) * crop;
  for (int y = 0; y < crop; ++y) {
    const uint8_t* row = rgb_.data() + static_cast<size_t>(top + y) * rgb_stride + 3 * left;
    for (int c = 0; c < 3; ++c) {
      float* out = chw + c * plane + static_cast<int64_t>(y) * crop;
      for (int x = 0; x < crop; ++x) out[x] = row[3 * x + c] * scale_[c] + offset_[c];
    }
  }
  return absl::OkStatus();
}

}  // namespace vidclf::media
