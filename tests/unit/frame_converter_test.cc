#include "media/frame_converter.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace vidclf::media
