// Single pictures of a live feed: JPEG, PNG and raw RGB24, made at test time by the ffmpeg CLI,
// converted as the video path converts frames.
#include "media/image_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "media/clip_decoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;

// Mean 0 and std 1: plain RGB in [0, 1].
PreprocessOptions PlainRgb() {
  PreprocessOptions preprocess;
  preprocess.resize_shorter_side = 48;
  preprocess.crop_size = 40;
  preprocess.mean = {0, 0, 0};
  preprocess.std = {1, 1, 1};
  return preprocess;
}

struct Difference {
  float mean;
  float max;
};
Difference Compare(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double sum = 0;
  float max = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float d = std::abs(a[i] - b[i]);
    sum += d;
    max = std::max(max, d);
  }
  return {static_cast<float>(sum / std::max<size_t>(a.size(), 1)), max};
}

class ImageDecoderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::MakeScratchDir("images")); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // One picture of lavfi `source` at `size`, written by ffmpeg with output `options` to `file`
  // (once per suite).
  static std::string Picture(const std::string& file, const std::string& source,
                             const std::string& size, const std::string& options) {
    const std::string path = *dir_ + "/" + file;
    if (!std::filesystem::exists(path)) {
      testing::MakeVideo(
          absl::StrCat("-f lavfi -i ", source, "=size=", size, " -frames:v 1 ", options), path);
    }
    return testing::ReadFile(path);
  }
  static std::string Png(const std::string& size, const std::string& source = "testsrc2") {
    return Picture(source + size + ".png", source, size, "-pix_fmt rgb24");
  }
  static std::string Jpeg(const std::string& size, const std::string& source = "testsrc2") {
    return Picture(source + size + ".jpg", source, size, "-q:v 2");
  }
  static std::string Rgb24(const std::string& size, const std::string& source = "testsrc2") {
    return Picture(source + size + ".rgb", source, size, "-pix_fmt rgb24 -f rawvideo");
  }

  static absl::StatusOr<std::vector<float>> Encoded(ImageFrameDecoder& decoder,
                                                    const std::string& bytes) {
    std::vector<float> out(decoder.output_floats());
    if (auto status = decoder.DecodeEncoded(bytes, out.data()); !status.ok()) return status;
    return out;
  }
  static absl::StatusOr<std::vector<float>> Raw(ImageFrameDecoder& decoder,
                                                const std::string& bytes, int width, int height) {
    std::vector<float> out(decoder.output_floats());
    if (auto status = decoder.ConvertRgb24(bytes, width, height, out.data()); !status.ok()) {
      return status;
    }
    return out;
  }

  static std::string* dir_;
};
std::string* ImageDecoderTest::dir_ = nullptr;

TEST_F(ImageDecoderTest, PngGivesTheFloatsOfTheSameRawPicture) {
  const std::string png = Png("80x60");
  const std::string rgb = Rgb24("80x60");
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(rgb.size(), 80u * 60 * 3);
  ImageFrameDecoder decoder(PlainRgb());
  EXPECT_EQ(decoder.output_floats(), 3 * 40 * 40);
  absl::StatusOr<std::vector<float>> from_png = Encoded(decoder, png);
  absl::StatusOr<std::vector<float>> from_raw = Raw(decoder, rgb, 80, 60);
  ASSERT_TRUE(from_png.ok()) << from_png.status();
  ASSERT_TRUE(from_raw.ok()) << from_raw.status();
  EXPECT_EQ(Compare(*from_png, *from_raw).max, 0);
  // Not a blank picture: testsrc2 spans the range.
  const auto [low, high] = std::minmax_element(from_raw->begin(), from_raw->end());
  EXPECT_LT(*low, 0.1f);
  EXPECT_GT(*high, 0.9f);
}

TEST_F(ImageDecoderTest, JpegIsCloseToItsSource) {
  const std::string jpeg = Jpeg("80x60");
  const std::string rgb = Rgb24("80x60");
  const std::string other = Rgb24("80x60", "smptebars");
  ASSERT_FALSE(HasFatalFailure());
  // No resize, and a crop on even pixels: the chroma of 4:2:0 lines up with the source's pixels.
  PreprocessOptions unscaled = PlainRgb();
  unscaled.resize_shorter_side = 60;
  unscaled.crop_size = 60;
  ImageFrameDecoder decoder(unscaled);
  absl::StatusOr<std::vector<float>> from_jpeg = Encoded(decoder, jpeg);
  absl::StatusOr<std::vector<float>> source = Raw(decoder, rgb, 80, 60);
  absl::StatusOr<std::vector<float>> unrelated = Raw(decoder, other, 80, 60);
  ASSERT_TRUE(from_jpeg.ok()) << from_jpeg.status();
  ASSERT_TRUE(source.ok() && unrelated.ok());
  // Chroma subsampling and quantisation blur the pattern's sharp edges; on average a JPEG at
  // high quality stays within a few levels (the ffmpeg CLI's own decoding: 1.5 levels).
  EXPECT_LT(Compare(*from_jpeg, *source).mean, 0.015f);
  EXPECT_GT(Compare(*from_jpeg, *unrelated).mean, 0.1f);
}

// A picture converts to the floats that the video path makes of it as a one-frame video.
TEST_F(ImageDecoderTest, PicturesConvertAsTheVideoPathConvertsThem) {
  ClipOptions options;
  options.sampling.strategy = SamplingStrategy::kAll;
  options.sampling.num_frames = 0;
  options.preprocess = PlainRgb();
  for (const std::string& bytes : {Png("80x60"), Jpeg("80x60"), Jpeg("61x47", "smptebars")}) {
    ASSERT_FALSE(HasFatalFailure());
    absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
    ASSERT_TRUE(clip.ok()) << clip.status();
    ASSERT_EQ(clip->num_frames, 1);
    ImageFrameDecoder decoder(PlainRgb());
    absl::StatusOr<std::vector<float>> picture = Encoded(decoder, bytes);
    ASSERT_TRUE(picture.ok()) << picture.status();
    EXPECT_LE(Compare(*picture, std::vector<float>(clip->pixels.begin(), clip->pixels.end())).max,
              1e-6f);
  }
}

TEST_F(ImageDecoderTest, OneDecoderTakesPicturesOfChangingSizesAndFormats) {
  struct Input {
    std::string bytes;
    int width = 0;  // raw RGB24 when set
    int height = 0;
  };
  // Two different PNGs of one size back to back: libavcodec takes an unflagged packet of the same
  // size as the previous picture for a delta from it.
  const std::vector<Input> inputs = {
      {Png("80x60")},
      {Png("80x60", "smptebars")},
      {Jpeg("120x90", "smptebars")},
      {Png("33x47", "mandelbrot")},
      {Rgb24("80x60"), 80, 60},
      {Jpeg("80x60")},
      {Rgb24("64x100", "smptebars"), 64, 100},
      {Png("80x60")},
  };
  ASSERT_FALSE(HasFatalFailure());
  ImageFrameDecoder reused(PlainRgb());
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE(i);
    ImageFrameDecoder fresh(PlainRgb());
    const Input& input = inputs[i];
    absl::StatusOr<std::vector<float>> expected =
        input.width > 0 ? Raw(fresh, input.bytes, input.width, input.height)
                        : Encoded(fresh, input.bytes);
    absl::StatusOr<std::vector<float>> got =
        input.width > 0 ? Raw(reused, input.bytes, input.width, input.height)
                        : Encoded(reused, input.bytes);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(Compare(*got, *expected).max, 0);
  }
}

TEST_F(ImageDecoderTest, BadPicturesGetClearErrors) {
  const std::string png = Png("80x60");
  const std::string jpeg = Jpeg("80x60");
  ASSERT_FALSE(HasFatalFailure());
  std::string damaged_png = png;
  for (size_t i = png.size() / 2; i < png.size() / 2 + 16; ++i) damaged_png[i] ^= 0x5A;
  const struct {
    const char* name;
    std::string bytes;
    const char* message;
  } inputs[] = {
      {"empty", "", "empty picture"},
      {"garbage", std::string(5000, '\x5a'), "neither JPEG nor PNG"},
      {"a GIF", "GIF89a" + std::string(100, '\0'), "send JPEG or PNG pictures"},
      {"half a PNG", png.substr(0, png.size() / 2), "PNG picture is damaged or truncated"},
      {"a PNG cut before its header", png.substr(0, 12), "PNG picture is damaged or truncated"},
      {"a damaged PNG", damaged_png, "PNG picture is damaged or truncated"},
      {"half a JPEG", jpeg.substr(0, jpeg.size() / 2), "JPEG picture is damaged or truncated"},
      {"a JPEG cut in its header", jpeg.substr(0, 40), "JPEG picture is damaged or truncated"},
  };
  ImageFrameDecoder decoder(PlainRgb());
  std::vector<float> out(decoder.output_floats());
  for (const auto& input : inputs) {
    SCOPED_TRACE(input.name);
    const absl::Status status = decoder.DecodeEncoded(input.bytes, out.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(input.message));
  }
  // The decoder still works after them.
  EXPECT_TRUE(decoder.DecodeEncoded(png, out.data()).ok());
  EXPECT_TRUE(decoder.DecodeEncoded(jpeg, out.data()).ok());
}

TEST_F(ImageDecoderTest, OversizePicturesAreRefusedBeforeDecoding) {
  const std::string png = Png("80x60");
  const std::string jpeg = Jpeg("80x60");
  ASSERT_FALSE(HasFatalFailure());
  ImageFrameDecoder small(PlainRgb(), /*max_frame_side=*/64);
  std::vector<float> out(small.output_floats());
  for (const std::string& bytes : {png, jpeg}) {
    const absl::Status status = small.DecodeEncoded(bytes, out.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_THAT(status.message(), HasSubstr("80x60"));
  }
  // Headers declaring 60000 pixels a side, and nothing a decoder could use after them: refused
  // for their size, which only the header tells.
  std::string huge_png = png.substr(0, 33);
  huge_png.replace(16, 8, std::string("\x00\x00\xEA\x60\x00\x00\xEA\x60", 8));
  huge_png += std::string(100, '\0');
  const std::string huge_jpeg =
      std::string("\xFF\xD8\xFF\xC0\x00\x11\x08\xEA\x60\xEA\x60", 11) + std::string(100, '\0');
  ImageFrameDecoder decoder(PlainRgb());
  for (const std::string& bytes : {huge_png, huge_jpeg}) {
    const absl::Status status = decoder.DecodeEncoded(bytes, out.data());
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
    EXPECT_THAT(status.message(), HasSubstr("60000x60000"));
  }
}

// The smallest frames, whose rows are shorter than swscale's SIMD loads, take the colour of
// their pixels.
TEST_F(ImageDecoderTest, TinyRawFramesConvert) {
  ImageFrameDecoder decoder(PlainRgb());
  std::vector<float> out(decoder.output_floats());
  for (const auto& [width, height] : {std::pair{1, 1}, std::pair{1, 3}, std::pair{5, 1}}) {
    SCOPED_TRACE(::testing::Message() << width << "x" << height);
    std::string rgb;
    for (int i = 0; i < width * height; ++i) rgb += "\x33\x66\x99";
    ASSERT_TRUE(decoder.ConvertRgb24(rgb, width, height, out.data()).ok());
    const int64_t plane = out.size() / 3;
    for (int c = 0; c < 3; ++c) {
      const float expected = static_cast<float>(0x33 * (c + 1)) / 255;
      for (int64_t i = 0; i < plane; ++i) ASSERT_NEAR(out[c * plane + i], expected, 0.01f);
    }
  }
}

TEST_F(ImageDecoderTest, RawFramesMustMatchTheirSize) {
  const std::string rgb = Rgb24("80x60");
  ASSERT_FALSE(HasFatalFailure());
  ImageFrameDecoder decoder(PlainRgb(), /*max_frame_side=*/100);
  std::vector<float> out(decoder.output_floats());
  absl::Status status = decoder.ConvertRgb24(rgb, 80, 61, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("14640 bytes, not 14400"));
  status = decoder.ConvertRgb24(rgb, 0, 60, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("must be > 0"));
  status = decoder.ConvertRgb24(rgb, 80, -60, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  status = decoder.ConvertRgb24(std::string(3 * 120 * 40, '\0'), 120, 40, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("120x40"));
  EXPECT_TRUE(decoder.ConvertRgb24(rgb, 80, 60, out.data()).ok());
}

}  // namespace
}  // namespace vidclf::media
