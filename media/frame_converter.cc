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

void FrameConverter::set_rotation(double clockwise_degrees) {
  const long quarter_turns = std::lround(clockwise_degrees / 90.0);
  quarter_turns_ = static_cast<int>(((quarter_turns % 4) + 4) % 4);
}

void FrameConverter::SetColourspace(const AVFrame& frame) {
  // swscale assumes BT.601 limited range unless told; BT.709 (most HD video) and full-range
  // streams would come out with shifted colours. Untagged frames keep swscale's BT.601 default,
  // as the ffmpeg CLI does. RGB and grey sources have no YUV matrix and keep swscale's handling.
  const auto format = static_cast<AVPixelFormat>(frame.format);
  const AVPixFmtDescriptor* descriptor = av_pix_fmt_desc_get(format);
  if (descriptor == nullptr || descriptor->nb_components < 3 ||
      (descriptor->flags & AV_PIX_FMT_FLAG_RGB) != 0) {
    return;
  }
  const bool jpeg_format = format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_YUVJ422P ||
                           format == AV_PIX_FMT_YUVJ444P || format == AV_PIX_FMT_YUVJ440P ||
                           format == AV_PIX_FMT_YUVJ411P;
  const int full_range = frame.color_range == AVCOL_RANGE_JPEG || jpeg_format ? 1 : 0;
  const int colourspace = frame.colorspace == AVCOL_SPC_UNSPECIFIED
                              ? SWS_CS_DEFAULT
                              : static_cast<int>(frame.colorspace);
  const int* coefficients = sws_getCoefficients(colourspace);
  // Set on every frame: sws_getCachedContext may have replaced the context, losing the details.
  sws_setColorspaceDetails(scaler_, coefficients, full_range, coefficients, /*dstRange=*/1,
                           /*brightness=*/0, /*contrast=*/1 << 16, /*saturation=*/1 << 16);
}

int64_t FrameConverter::output_floats() const {
  return 3LL * options_.crop_size * options_.crop_size;
}

absl::Status FrameConverter::Convert(const AVFrame& frame, float* out) {
  if (frame.width <= 0 || frame.height <= 0) {
    return absl::InvalidArgumentError("decoded frame has no pixels");
  }
  // The picture as displayed: stretched by the sample aspect ratio, then rotated.
  double display_width = frame.width;
  const AVRational sar = frame.sample_aspect_ratio;
  if (sar.num > 0 && sar.den > 0) display_width *= av_q2d(sar);
  const bool sideways = quarter_turns_ % 2 == 1;
  const double shown_width = sideways ? frame.height : display_width;
  const double shown_height = sideways ? display_width : frame.height;
  const int shorter = options_.resize_shorter_side;
  int shown_scaled_width = shorter;
  int shown_scaled_height = shorter;
  if (shown_width < shown_height) {
    shown_scaled_height = static_cast<int>(std::lround(shown_height * shorter / shown_width));
  } else {
    shown_scaled_width = static_cast<int>(std::lround(shown_width * shorter / shown_height));
  }
  // swscale resizes the unrotated picture; the crop below reads it through the rotation.
  const int scaled_width = sideways ? shown_scaled_height : shown_scaled_width;
  const int scaled_height = sideways ? shown_scaled_width : shown_scaled_height;
  scaler_ = sws_getCachedContext(
      scaler_, frame.width, frame.height, static_cast<AVPixelFormat>(frame.format), scaled_width,
      scaled_height, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (scaler_ == nullptr) {
    const char* name = av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame.format));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot convert pixel format ", name ? name : "unknown", " to RGB"));
  }
  SetColourspace(frame);
  const int rgb_stride = 3 * scaled_width;
  rgb_.resize(static_cast<size_t>(rgb_stride) * scaled_height);
  uint8_t* destination[4] = {rgb_.data(), nullptr, nullptr, nullptr};
  int destination_stride[4] = {rgb_stride, 0, 0, 0};
  sws_scale(scaler_, frame.data, frame.linesize, 0, frame.height, destination, destination_stride);

  const int crop = options_.crop_size;
  const int left = (shown_scaled_width - crop) / 2;
  const int top = (shown_scaled_height - crop) / 2;
  // Where channel c of crop pixel (x, y) goes.
  const int64_t plane = static_cast<int64_t>(crop) * crop;
  const int64_t channel_step = options_.channels_last ? 1 : plane;
  const int64_t pixel_step = options_.channels_last ? 3 : 1;
  for (int y = 0; y < crop; ++y) {
    for (int x = 0; x < crop; ++x) {
      // Shown pixel (sx, sy) comes from pixel (u, v) of the unrotated, resized picture.
      const int sx = left + x, sy = top + y;
      int u = sx, v = sy;
      if (quarter_turns_ == 1) {
        u = sy;
        v = scaled_height - 1 - sx;
      } else if (quarter_turns_ == 2) {
        u = scaled_width - 1 - sx;
        v = scaled_height - 1 - sy;
      } else if (quarter_turns_ == 3) {
        u = scaled_width - 1 - sy;
        v = sx;
      }
      const uint8_t* pixel = rgb_.data() + static_cast<size_t>(v) * rgb_stride + 3 * u;
      float* destination = out + (static_cast<int64_t>(y) * crop + x) * pixel_step;
      for (int c = 0; c < 3; ++c) {
        destination[c * channel_step] = pixel[c] * scale_[c] + offset_[c];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace vidclf::media
