#include "media/frame_converter.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "media/crop_geometry.h"

extern "C" {
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>
}

namespace vidclf::media {
namespace {

// What swscale writes. RGBA rather than RGB24 because on x86 swscale's vertical filter and
// YUV-to-RGB step have SIMD code for 32-bit RGB but only C for RGB24: on 300 decoded 640x360 frames
// resized to 112x112 that made the conversion about 1.6 times faster (RGBA 131, RGB24 208 us per
// frame, same run). The SIMD code rounds differently from the C code, by at most 5 levels (mean
// 0.8) on those frames, and is no further from exact BT.601 on flat colours (mean error 0.9 levels,
// against 1.3 for the C code).
constexpr AVPixelFormat kRgbFormat = AV_PIX_FMT_RGBA;
constexpr int kRgbBytes = 4;

// The bits of an enum field of a decoded frame. A decoder may copy any value from a damaged
// bitstream into one (the fuzzer found a colour space of 65); loading that as the enum type is
// undefined behaviour.
template <typename Enum>
int RawValue(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

// The stored pixels that the crop shows, and plane pointers that address them inside the frame.
struct SourceRegion {
  int width = 0;
  int height = 0;
  const uint8_t* data[4] = {nullptr, nullptr, nullptr, nullptr};
  int linesize[4] = {0, 0, 0, 0};
};

// Finds the stored pixels under the crop that `geometry` places, and points `region` at them. False
// for formats whose planes cannot be addressed from an offset pointer: bitstream, paletted, Bayer
// and hardware formats keep the whole-frame path.
//
// Why the geometry changes slightly: the region's edges are whole stored pixels, and its left and
// top edges lie on the chroma grid (even columns and rows for 4:2:0) so that every plane can be
// addressed by pointer. Each edge is therefore within half a pixel (right, bottom) or half a
// chroma step (left, top: at most 1 pixel for 4:2:0) of where resizing the whole frame would put
// it; for 4:2:0 the picture moves by at most one stored pixel and each axis's scale changes by at
// most 1.5 pixels over the region (315 pixels at 640x360 to 128/112: under 0.5%), width and height
// each taken from their own axis's scale so that non-square pixels stay stretched as before.
// The filter also no longer sees pixels outside the region, which only the outermost output pixels
// would have felt. tests/media/frame_converter_test.cc bounds the difference.
bool FindSourceRegion(const AVFrame& frame, const CropGeometry& geometry, int crop,
                      SourceRegion& region) {
  const auto format = static_cast<AVPixelFormat>(frame.format);
  const AVPixFmtDescriptor* descriptor = av_pix_fmt_desc_get(format);
  constexpr uint64_t kNotAddressable = AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_PAL |
                                       AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BAYER;
  if (descriptor == nullptr || (descriptor->flags & kNotAddressable) != 0) return false;
  const int planes = av_pix_fmt_count_planes(format);
  if (planes <= 0 || planes > 4) return false;
  const StoredRegion stored =
      PlaceStoredRegion(frame.width, frame.height, geometry, crop, descriptor->log2_chroma_w,
                        descriptor->log2_chroma_h);
  const int x = stored.x, y = stored.y;
  region.width = stored.width;
  region.height = stored.height;
  for (int plane = 0; plane < planes; ++plane) {
    // The first component stored in the plane gives its bytes per pixel and its subsampling.
    int component = 0;
    while (component < descriptor->nb_components && descriptor->comp[component].plane != plane) {
      ++component;
    }
    if (component == descriptor->nb_components || frame.data[plane] == nullptr) return false;
    const bool chroma = component == 1 || component == 2;
    const int plane_x = chroma ? x >> descriptor->log2_chroma_w : x;
    const int plane_y = chroma ? y >> descriptor->log2_chroma_h : y;
    region.data[plane] = frame.data[plane] +
                         static_cast<std::ptrdiff_t>(plane_y) * frame.linesize[plane] +
                         static_cast<std::ptrdiff_t>(plane_x) * descriptor->comp[component].step;
    region.linesize[plane] = frame.linesize[plane];
  }
  return true;
}

// Normalises the crop x crop RGBA pixels at `window` (rows `stride` bytes apart), unrotated.
// Written as plain loops over each row with fixed offsets so that the compiler vectorises them.
void WriteUpright(const uint8_t* window, int stride, int crop, const std::array<float, 3>& scale,
                  const std::array<float, 3>& offset, bool channels_last, float* out) {
  const int64_t plane = static_cast<int64_t>(crop) * crop;
  const float r_scale = scale[0], g_scale = scale[1], b_scale = scale[2];
  const float r_offset = offset[0], g_offset = offset[1], b_offset = offset[2];
  for (int y = 0; y < crop; ++y) {
    const uint8_t* __restrict row = window + static_cast<std::ptrdiff_t>(y) * stride;
    if (channels_last) {
      float* __restrict pixels = out + static_cast<int64_t>(y) * crop * 3;
      for (int x = 0; x < crop; ++x) {
        pixels[3 * x] = row[kRgbBytes * x] * r_scale + r_offset;
        pixels[3 * x + 1] = row[kRgbBytes * x + 1] * g_scale + g_offset;
        pixels[3 * x + 2] = row[kRgbBytes * x + 2] * b_scale + b_offset;
      }
    } else {
      float* __restrict red = out + static_cast<int64_t>(y) * crop;
      float* __restrict green = red + plane;
      float* __restrict blue = green + plane;
      for (int x = 0; x < crop; ++x) {
        red[x] = row[kRgbBytes * x] * r_scale + r_offset;
        green[x] = row[kRgbBytes * x + 1] * g_scale + g_offset;
        blue[x] = row[kRgbBytes * x + 2] * b_scale + b_offset;
      }
    }
  }
}

}  // namespace

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
  const int full_range = RawValue(frame.color_range) == AVCOL_RANGE_JPEG || jpeg_format ? 1 : 0;
  const int tagged = RawValue(frame.colorspace);
  const int colourspace = tagged == AVCOL_SPC_UNSPECIFIED || tagged < 0 || tagged >= AVCOL_SPC_NB
                              ? SWS_CS_DEFAULT
                              : tagged;
  const int* coefficients = sws_getCoefficients(colourspace);
  // Set on every frame: sws_getCachedContext may have replaced the context, losing the details.
  sws_setColorspaceDetails(scaler_, coefficients, full_range, coefficients, /*dstRange=*/1,
                           /*brightness=*/0, /*contrast=*/1 << 16, /*saturation=*/1 << 16);
}

int64_t FrameConverter::output_floats() const {
  return 3LL * options_.crop_size * options_.crop_size;
}

FrameBuffer FrameConverter::Output(const float* out) const {
  return FrameBuffer::HostRgbFloat(out, options_.crop_size, options_.crop_size,
                                   options_.channels_last);
}

absl::Status FrameConverter::Convert(const AVFrame& frame, float* out) {
  if (frame.hw_frames_ctx == nullptr) return ConvertHostFrame(frame, out);
  if (!downloaded_) downloaded_.reset(av_frame_alloc());
  if (!downloaded_) return absl::ResourceExhaustedError("out of memory");
  av_frame_unref(downloaded_.get());
  const int copied = av_hwframe_transfer_data(downloaded_.get(), &frame, 0);
  if (copied < 0) {
    return AvError(absl::StatusCode::kInternal, "cannot copy a decoded frame from the GPU", copied);
  }
  if (const int result = av_frame_copy_props(downloaded_.get(), &frame); result < 0) {
    return AvError(absl::StatusCode::kResourceExhausted, "cannot copy a frame's details", result);
  }
  return ConvertHostFrame(*downloaded_, out);
}

absl::Status FrameConverter::ConvertHostFrame(const AVFrame& frame, float* out) {
  if (frame.width <= 0 || frame.height <= 0) {
    return absl::InvalidArgumentError("decoded frame has no pixels");
  }
  const CropGeometry geometry =
      PlaceCrop(frame.width, frame.height, frame.sample_aspect_ratio, quarter_turns_,
                options_.resize_shorter_side, options_.crop_size);
  const int crop = options_.crop_size;

  // Resize only the stored pixels the crop shows, straight to the crop's size, where the format
  // allows; otherwise the whole frame, then crop. One more difference between the two: swscale
  // computes chroma at full horizontal resolution for odd output widths and at half resolution for
  // even ones, which comes out about a level darker (0.9 to 1.35 levels on average over flat
  // colours). The whole-frame path took half resolution for even resized widths (16:9 pictures:
  // 228 at 128); the region path takes it for every even crop size.
  SourceRegion region;
  const bool region_only = !whole_frame_resize_ && FindSourceRegion(frame, geometry, crop, region);
  if (!region_only) {
    region.width = frame.width;
    region.height = frame.height;
    std::copy(frame.data, frame.data + 4, region.data);
    std::copy(frame.linesize, frame.linesize + 4, region.linesize);
  }
  const int rgb_width = region_only ? crop : geometry.scaled_width;
  const int rgb_height = region_only ? crop : geometry.scaled_height;
  scaler_ = sws_getCachedContext(scaler_, region.width, region.height,
                                 static_cast<AVPixelFormat>(frame.format), rgb_width, rgb_height,
                                 kRgbFormat, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (scaler_ == nullptr) {
    const char* name = av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame.format));
    return absl::InvalidArgumentError(
        absl::StrCat("cannot convert pixel format ", name ? name : "unknown", " to RGB"));
  }
  SetColourspace(frame);
  // Rows padded to 16 pixels: where no resize is needed (a picture already the crop's size),
  // swscale's unscaled SIMD YUV-to-RGB writes whole blocks of 8 pixels, past the end of a row
  // whose width is not a multiple of 8, and past the buffer on the last row.
  const int rgb_stride = kRgbBytes * ((rgb_width + 15) / 16 * 16);
  rgb_.resize(static_cast<size_t>(rgb_stride) * rgb_height);
  uint8_t* destination[4] = {rgb_.data(), nullptr, nullptr, nullptr};
  int destination_stride[4] = {rgb_stride, 0, 0, 0};
  sws_scale(scaler_, region.data, region.linesize, 0, region.height, destination,
            destination_stride);

  const uint8_t* window = rgb_.data();
  if (!region_only) {
    window += static_cast<size_t>(geometry.crop_v) * rgb_stride +
              static_cast<size_t>(kRgbBytes) * geometry.crop_u;
  }
  if (quarter_turns_ == 0) {
    WriteUpright(window, rgb_stride, crop, scale_, offset_, options_.channels_last, out);
    return absl::OkStatus();
  }
  // Shown pixel (x, y) of the crop is at window + x * x_step + y * y_step.
  const std::ptrdiff_t last = crop - 1;
  std::ptrdiff_t x_step = 0, y_step = 0;
  const uint8_t* origin = window;
  if (quarter_turns_ == 1) {
    origin += last * rgb_stride;
    x_step = -rgb_stride;
    y_step = kRgbBytes;
  } else if (quarter_turns_ == 2) {
    origin += last * rgb_stride + last * kRgbBytes;
    x_step = -kRgbBytes;
    y_step = -rgb_stride;
  } else {
    origin += last * kRgbBytes;
    x_step = rgb_stride;
    y_step = -kRgbBytes;
  }
  const int64_t plane = static_cast<int64_t>(crop) * crop;
  const int64_t channel_step = options_.channels_last ? 1 : plane;
  const int64_t pixel_step = options_.channels_last ? 3 : 1;
  for (int y = 0; y < crop; ++y) {
    const uint8_t* pixel = origin + y * y_step;
    float* destination = out + static_cast<int64_t>(y) * crop * pixel_step;
    for (int x = 0; x < crop; ++x, pixel += x_step, destination += pixel_step) {
      for (int c = 0; c < 3; ++c) {
        destination[c * channel_step] = pixel[c] * scale_[c] + offset_[c];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace vidclf::media
