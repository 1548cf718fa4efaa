#include "media/frame_converter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace vidclf::media {
namespace {

// A frame of `format` with its pixel buffers allocated, contents undefined.
FramePtr AllocateFrame(AVPixelFormat format, int width, int height) {
  FramePtr frame(av_frame_alloc());
  frame->format = format;
  frame->width = width;
  frame->height = height;
  EXPECT_GE(av_frame_get_buffer(frame.get(), 0), 0);
  return frame;
}

// An RGB24 frame whose pixel (x, y) has the colour `colour(x, y)`.
template <typename Colour>
FramePtr MakeRgbFrame(int width, int height, Colour colour) {
  FramePtr frame = AllocateFrame(AV_PIX_FMT_RGB24, width, height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const auto [r, g, b] = colour(x, y);
      uint8_t* pixel = frame->data[0] + y * frame->linesize[0] + 3 * x;
      pixel[0] = r;
      pixel[1] = g;
      pixel[2] = b;
    }
  }
  return frame;
}

TEST(FrameConverter, NormalisesAUniformColourWithImageNetStatistics) {
  FramePtr frame = MakeRgbFrame(64, 48, [](int, int) { return std::array<int, 3>{200, 100, 50}; });
  PreprocessOptions options;
  options.resize_shorter_side = 32;
  options.crop_size = 24;
  FrameConverter converter(options);
  std::vector<float> out(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*frame, out.data()).ok());

  // Worked by hand: (200 / 255 - 0.485) / 0.229 = 1.30713..., and likewise for G and B.
  const float expected[3] = {(200 / 255.0f - 0.485f) / 0.229f, (100 / 255.0f - 0.456f) / 0.224f,
                             (50 / 255.0f - 0.406f) / 0.225f};
  EXPECT_NEAR(expected[0], 1.30713f, 1e-4);
  const int plane = 24 * 24;
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < plane; i += 37) EXPECT_NEAR(out[c * plane + i], expected[c], 1e-5);
  }
}

TEST(FrameConverter, CropsTheCentreAndWritesPlanarRgb) {
  // 40x30 with the shorter side already 30: no resampling, the crop drops 5 columns each side.
  auto colour = [](int x, int y) { return std::array<int, 3>{6 * x, 8 * y, 100}; };
  FramePtr frame = MakeRgbFrame(40, 30, colour);
  PreprocessOptions options;
  options.resize_shorter_side = 30;
  options.crop_size = 30;
  options.mean = {0, 0, 0};
  options.std = {1, 1, 1};
  FrameConverter converter(options);
  std::vector<float> out(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*frame, out.data()).ok());
  const int plane = 30 * 30;
  for (int y : {0, 7, 29}) {
    for (int x : {0, 13, 29}) {
      const auto rgb = colour(x + 5, y);
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(out[c * plane + y * 30 + x], rgb[c] / 255.0f, 1e-6)
            << "channel " << c << " at (" << x << ", " << y << ")";
      }
    }
  }
}

TEST(FrameConverter, RejectsACropLargerThanTheResize) {
  PreprocessOptions options;
  options.resize_shorter_side = 100;
  options.crop_size = 112;
  const absl::Status status = ValidatePreprocessOptions(options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("crop_size"), std::string::npos);
}

using PixelRgb = std::array<int, 3>;
constexpr PixelRgb kRed = {255, 0, 0};
constexpr PixelRgb kBlue = {0, 0, 255};

// Reads crop pixel (x, y) of a mean-0, std-1 conversion back as 0..255 RGB.
PixelRgb PixelAt(const std::vector<float>& chw, int crop, int x, int y) {
  PixelRgb rgb;
  for (int c = 0; c < 3; ++c)
    rgb[c] = static_cast<int>(std::lround(255 * chw[(c * crop + y) * crop + x]));
  return rgb;
}

PreprocessOptions PlainRgb(int shorter, int crop) {
  PreprocessOptions options;
  options.resize_shorter_side = shorter;
  options.crop_size = crop;
  options.mean = {0, 0, 0};
  options.std = {1, 1, 1};
  return options;
}

TEST(FrameConverter, RotatesAsTheDisplayMatrixAsks) {
  // 64x32, red left half, blue right half. Shown upright after a quarter turn it is 32x64;
  // resized to 32 wide and cropped to the centre 16x16 (rows 24..39), its top half and bottom
  // half differ.
  FramePtr frame = MakeRgbFrame(64, 32, [](int x, int) { return x < 32 ? kRed : kBlue; });
  std::vector<float> out(3 * 16 * 16);
  struct Case {
    double clockwise;
    PixelRgb top_left, bottom_right;
  };
  for (const Case& turn : {Case{90, kRed, kBlue}, Case{-90, kBlue, kRed}, Case{270, kBlue, kRed},
                           Case{180, kBlue, kRed}, Case{0, kRed, kBlue}}) {
    FrameConverter converter(PlainRgb(32, 16));
    converter.set_rotation(turn.clockwise);
    ASSERT_TRUE(converter.Convert(*frame, out.data()).ok());
    EXPECT_EQ(PixelAt(out, 16, 2, 2), turn.top_left) << turn.clockwise;
    EXPECT_EQ(PixelAt(out, 16, 13, 13), turn.bottom_right) << turn.clockwise;
  }
}

TEST(FrameConverter, StretchesNonSquarePixelsToTheDisplayAspect) {
  // 32x32 stored with pixels twice as wide as tall: shown 64x32. The red band at stored columns
  // 12..19 is shown at 24..39, exactly the centre 16 columns the crop keeps.
  FramePtr frame =
      MakeRgbFrame(32, 32, [](int x, int) { return x >= 12 && x < 20 ? kRed : kBlue; });
  frame->sample_aspect_ratio = AVRational{2, 1};
  FrameConverter converter(PlainRgb(32, 16));
  std::vector<float> out(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*frame, out.data()).ok());
  EXPECT_EQ(PixelAt(out, 16, 1, 8), kRed);
  EXPECT_EQ(PixelAt(out, 16, 14, 8), kRed);
}

TEST(FrameConverter, InterleavedOutputIsThePlanarOneTransposed) {
  auto colour = [](int x, int y) { return PixelRgb{(7 * x) % 256, (5 * y) % 256, (x * y) % 256}; };
  FramePtr frame = MakeRgbFrame(50, 36, colour);
  frame->sample_aspect_ratio = AVRational{4, 3};
  for (double rotation : {0.0, 90.0}) {
    PreprocessOptions options = PlainRgb(24, 20);
    FrameConverter planar(options);
    options.channels_last = true;
    FrameConverter interleaved(options);
    planar.set_rotation(rotation);
    interleaved.set_rotation(rotation);
    std::vector<float> chw(planar.output_floats()), hwc(interleaved.output_floats());
    ASSERT_TRUE(planar.Convert(*frame, chw.data()).ok());
    ASSERT_TRUE(interleaved.Convert(*frame, hwc.data()).ok());
    for (int y = 0; y < 20; ++y) {
      for (int x = 0; x < 20; ++x) {
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(hwc[(y * 20 + x) * 3 + c], chw[(c * 20 + y) * 20 + x])
              << "rotation " << rotation << ", pixel " << x << "," << y << ", channel " << c;
        }
      }
    }
  }
}

// A frame of `format` whose every component is a gentle gradient across the picture, in the
// legal range of that component (for YUV, luma 48..208 and chroma 96..160 of 255).
FramePtr MakeGradientFrame(AVPixelFormat format, int width, int height) {
  FramePtr frame = AllocateFrame(format, width, height);
  // av_write_image_line ORs bits into the line, so it wants zeroed memory.
  for (AVBufferRef* buffer : frame->buf) {
    if (buffer != nullptr) std::fill(buffer->data, buffer->data + buffer->size, 0);
  }
  const AVPixFmtDescriptor* descriptor = av_pix_fmt_desc_get(format);
  const bool yuv = (descriptor->flags & AV_PIX_FMT_FLAG_RGB) == 0;
  std::vector<uint16_t> line(width);
  for (int c = 0; c < descriptor->nb_components; ++c) {
    const bool chroma = yuv && (c == 1 || c == 2);
    const int w = chroma ? AV_CEIL_RSHIFT(width, descriptor->log2_chroma_w) : width;
    const int h = chroma ? AV_CEIL_RSHIFT(height, descriptor->log2_chroma_h) : height;
    const double low = chroma ? 96 : 48, span = chroma ? 64 : 160;
    const double max_level = (1 << descriptor->comp[c].depth) - 1;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const double across = (x + 0.5) / w, down = (y + 0.5) / h;
        const double mix = c == 0   ? 0.7 * across + 0.3 * down
                           : c == 1 ? 0.5 * (1 - across) + 0.5 * down
                                    : 0.4 * across + 0.6 * (1 - down);
        line[x] = static_cast<uint16_t>(std::lround((low + span * mix) / 255 * max_level));
      }
      av_write_image_line(line.data(), frame->data, frame->linesize, descriptor, 0, y, c, w);
    }
  }
  return frame;
}

// Found by decode_clip_fuzzer: a damaged stream left a colour space of 65 and the converter read
// it as an AVColorSpace (undefined behaviour, which the sanitizer run reports). Values outside the
// enums must be treated as untagged.
TEST(FrameConverter, TreatsColourTagsOutsideTheEnumsAsUntagged) {
  PreprocessOptions options;
  options.resize_shorter_side = 32;
  options.crop_size = 32;
  FramePtr untagged = MakeGradientFrame(AV_PIX_FMT_YUV420P, 48, 32);
  FrameConverter converter(options);
  std::vector<float> expected(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*untagged, expected.data()).ok());

  FramePtr damaged = MakeGradientFrame(AV_PIX_FMT_YUV420P, 48, 32);
  const int colour_space = 65, colour_range = 77;
  std::memcpy(&damaged->colorspace, &colour_space, sizeof colour_space);
  std::memcpy(&damaged->color_range, &colour_range, sizeof colour_range);
  std::vector<float> converted(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*damaged, converted.data()).ok());
  EXPECT_EQ(converted, expected);
}

// Largest and mean absolute difference, in levels of 255, of two mean-0, std-1 conversions.
std::pair<double, double> LevelDifference(const std::vector<float>& a,
                                          const std::vector<float>& b) {
  double largest = 0, sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double difference = 255 * std::abs(a[i] - b[i]);
    largest = std::max(largest, difference);
    sum += difference;
  }
  return {largest, sum / a.size()};
}

// Width of the whole-frame path's resized, unrotated picture, as FrameConverter computes it.
int WholeFrameResizedWidth(int width, int height, AVRational aspect, int resize, int turns) {
  const double display_width = width * av_q2d(aspect);
  const bool sideways = turns % 2 == 1;
  const double shown_width = sideways ? height : display_width;
  const double shown_height = sideways ? display_width : height;
  if (shown_width < shown_height) {
    return sideways ? static_cast<int>(std::lround(shown_height * resize / shown_width)) : resize;
  }
  return sideways ? resize : static_cast<int>(std::lround(shown_width * resize / shown_height));
}

// Resizing only the region the crop shows gives the picture that resizing the whole frame and
// cropping gives, moved by at most one stored pixel: on these gentle gradients (about 2 levels
// of RGB per stored pixel at most) that is at most 5 levels and 1.25 on average.
// Where the whole frame resizes to an odd width, swscale switches that path to full-resolution
// chroma (it does so for every odd output width), which comes out about a level brighter on
// average than the half-resolution chroma it uses for even widths, such as the crop's; those cases
// get 8 and 3.
TEST(FrameConverter, ResizingTheCropRegionMatchesResizingTheWholeFrame) {
  const AVPixelFormat formats[] = {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV422P, AV_PIX_FMT_YUV444P,
                                   AV_PIX_FMT_GRAY8,   AV_PIX_FMT_RGB24,   AV_PIX_FMT_YUV420P10LE};
  const std::array<int, 2> sizes[] = {{97, 61}, {61, 97}, {640, 360}, {320, 240}};
  const AVRational aspects[] = {{1, 1}, {2, 1}, {8, 9}};
  const std::array<int, 2> resize_and_crop[] = {{128, 112}, {64, 56}};
  double worst[2] = {0, 0}, worst_mean[2] = {0, 0};  // same chroma mode, different
  for (AVPixelFormat format : formats) {
    for (const auto& [width, height] : sizes) {
      FramePtr frame = MakeGradientFrame(format, width, height);
      for (AVRational aspect : aspects) {
        frame->sample_aspect_ratio = aspect;
        for (const auto& [resize, crop] : resize_and_crop) {
          for (int turns = 0; turns < 4; ++turns) {
            FrameConverter region(PlainRgb(resize, crop));
            FrameConverter whole(PlainRgb(resize, crop));
            whole.set_whole_frame_resize(true);
            region.set_rotation(90 * turns);
            whole.set_rotation(90 * turns);
            std::vector<float> from_region(region.output_floats());
            std::vector<float> from_whole(whole.output_floats());
            ASSERT_TRUE(region.Convert(*frame, from_region.data()).ok());
            ASSERT_TRUE(whole.Convert(*frame, from_whole.data()).ok());
            const auto [largest, mean] = LevelDifference(from_region, from_whole);
            const bool chroma_mode_differs =
                WholeFrameResizedWidth(width, height, aspect, resize, turns) % 2 != crop % 2;
            EXPECT_LE(largest, chroma_mode_differs ? 8 : 5)
                << av_get_pix_fmt_name(format) << " " << width << "x" << height << " SAR "
                << aspect.num << ":" << aspect.den << ", " << resize << "/" << crop << ", "
                << 90 * turns << " degrees";
            EXPECT_LE(mean, chroma_mode_differs ? 3 : 1.25)
                << av_get_pix_fmt_name(format) << " " << width << "x" << height << " SAR "
                << aspect.num << ":" << aspect.den << ", " << resize << "/" << crop << ", "
                << 90 * turns << " degrees";
            worst[chroma_mode_differs] = std::max(worst[chroma_mode_differs], largest);
            worst_mean[chroma_mode_differs] = std::max(worst_mean[chroma_mode_differs], mean);
          }
        }
      }
    }
  }
  RecordProperty("largest_difference_levels", absl::StrCat(worst[0], ", ", worst[1]));
  RecordProperty("largest_mean_difference_levels",
                 absl::StrCat(worst_mean[0], ", ", worst_mean[1]));
}

// The region path reads nothing outside the region the crop shows: scribbling over the rest of
// the frame changes no output pixel. 640x360 at 128 / 112 shows stored columns 162.8..477.2 and
// rows 22.5..337.5; the region's edges lie within 2 pixels of those.
TEST(FrameConverter, ReadsOnlyTheStoredPixelsTheCropShows) {
  FramePtr frame = MakeGradientFrame(AV_PIX_FMT_YUV420P, 640, 360);
  FrameConverter converter(PlainRgb(128, 112));
  std::vector<float> before(converter.output_floats()), after(converter.output_floats());
  ASSERT_TRUE(converter.Convert(*frame, before.data()).ok());
  for (int y = 0; y < 360; ++y) {
    for (int x = 0; x < 640; ++x) {
      if (x >= 160 && x < 480 && y >= 20 && y < 340) continue;
      frame->data[0][y * frame->linesize[0] + x] = (x * 37 + y * 91) % 220 + 16;
      if (x % 2 == 0 && y % 2 == 0) {
        frame->data[1][y / 2 * frame->linesize[1] + x / 2] = 16;
        frame->data[2][y / 2 * frame->linesize[2] + x / 2] = 240;
      }
    }
  }
  ASSERT_TRUE(converter.Convert(*frame, after.data()).ok());
  EXPECT_EQ(before, after);
  // The whole-frame path does read there: its crop's edge pixels change.
  FrameConverter whole(PlainRgb(128, 112));
  whole.set_whole_frame_resize(true);
  ASSERT_TRUE(whole.Convert(*frame, after.data()).ok());
  EXPECT_GT(LevelDifference(before, after).first, 3);
}

}  // namespace
}  // namespace vidclf::media
