#include "media/frame_converter.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

namespace vidclf::media {
namespace {

// An RGB24 frame whose pixel (x, y) has the colour `colour(x, y)`.
template <typename Colour>
FramePtr MakeRgbFrame(int width, int height, Colour colour) {
  FramePtr frame(av_frame_alloc());
  frame->format = AV_PIX_FMT_RGB24;
  frame->width = width;
  frame->height = height;
  EXPECT_GE(av_frame_get_buffer(frame.get(), 0), 0);
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

using Rgb = std::array<int, 3>;
constexpr Rgb kRed = {255, 0, 0};
constexpr Rgb kBlue = {0, 0, 255};

// Reads crop pixel (x, y) of a mean-0, std-1 conversion back as 0..255 RGB.
Rgb PixelAt(const std::vector<float>& chw, int crop, int x, int y) {
  Rgb rgb;
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
    Rgb top_left, bottom_right;
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
  auto colour = [](int x, int y) { return Rgb{(7 * x) % 256, (5 * y) % 256, (x * y) % 256}; };
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

}  // namespace
}  // namespace vidclf::media
