// Decodes real files made at test time by the ffmpeg CLI.
#include "media/clip_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "media/frame_sampler.h"
#include "media/video_encoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class ClipDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeScratchDir("clips"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Video(const std::string& name, const std::string& ffmpeg_arguments) {
    const std::string path = dir_ + "/" + name;
    testing::MakeVideo(ffmpeg_arguments, path);
    return testing::ReadFile(path);
  }

  ClipOptions SmallFrames(int num_frames) {
    ClipOptions options;
    options.num_frames = num_frames;
    options.preprocess.resize_shorter_side = 40;
    options.preprocess.crop_size = 32;
    return options;
  }

  std::string dir_;
};

TEST_F(ClipDecoderTest, DecodesEveryFrameWithItsSizeAndTime) {
  const std::string bytes =
      Video("all.mp4", "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 30 -c:v mpeg4");
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, SmallFrames(/*num_frames=*/0));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 30);
  EXPECT_EQ(clip->num_frames, 30);
  EXPECT_EQ(clip->source_width, 320);
  EXPECT_EQ(clip->source_height, 240);
  EXPECT_EQ(clip->crop_size, 32);
  EXPECT_EQ(clip->pixels.size(), 30u * 3 * 32 * 32);
  ASSERT_EQ(clip->timestamps_seconds.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(clip->timestamps_seconds[i], i / 10.0, 1e-6);
}

TEST_F(ClipDecoderTest, SamplesUniformlyOverTheDuration) {
  const std::string bytes =
      Video("h264.mkv",
            "-f lavfi -i testsrc2=size=160x90:rate=25 -frames:v 100 -c:v libx264 "
            "-bf 2 -g 12");
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, SmallFrames(/*num_frames=*/8));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 100);
  EXPECT_EQ(clip->num_frames, 8);
  EXPECT_THAT(clip->frame_indices, ElementsAreArray(UniformSampleIndices(100, 8)));
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(clip->timestamps_seconds[i], clip->frame_indices[i] / 25.0, 1e-6);
  }
}

TEST_F(ClipDecoderTest, KeepsTheColourOfAKnownPattern) {
  // A solid colour survives YUV 4:2:0 coding within a few levels.
  const std::string bytes =
      Video("red.mp4",
            "-f lavfi -i color=c=0xC86432:size=64x64:rate=5 -frames:v 5 -c:v mpeg4 "
            "-q:v 2");
  ClipOptions options = SmallFrames(/*num_frames=*/2);
  options.preprocess.mean = {0, 0, 0};
  options.preprocess.std = {1, 1, 1};
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  const int plane = 32 * 32;
  const float expected[3] = {0xC8 / 255.0f, 0x64 / 255.0f, 0x32 / 255.0f};
  for (int c = 0; c < 3; ++c)
    EXPECT_NEAR(clip->pixels[c * plane + 16 * 32 + 16], expected[c], 0.03);
}

TEST_F(ClipDecoderTest, ReadsWhatOurOwnEncoderWrites) {
  std::vector<RgbImage> frames(6, RgbImage{32, 24, std::vector<uint8_t>(32 * 24 * 3, 90)});
  absl::StatusOr<std::string> bytes = EncodeVideo(frames, EncodeOptions{});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<DecodedClip> clip = DecodeClip(*bytes, SmallFrames(/*num_frames=*/0));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 6);
  EXPECT_EQ(clip->source_width, 32);
  EXPECT_EQ(clip->source_height, 24);
}

TEST_F(ClipDecoderTest, RefusesEmptyInput) {
  absl::StatusOr<DecodedClip> clip = DecodeClip("", SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("empty input"));
}

TEST_F(ClipDecoderTest, RefusesRandomBytes) {
  std::mt19937 rng(1);
  std::string bytes(10000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("not a video container"));
}

TEST_F(ClipDecoderTest, NamesWhatAnAudioOnlyInputHolds) {
  const std::string bytes = Video("tone.mp3", "-f lavfi -i sine=frequency=440:duration=1");
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("no video stream in input (format: mp3"));
  EXPECT_THAT(clip.status().message(), HasSubstr("streams: audio"));
}

TEST_F(ClipDecoderTest, RefusesInputOverTheByteLimit) {
  const std::string bytes =
      Video("big.mp4", "-f lavfi -i testsrc2=size=64x64:rate=5 -frames:v 5 -c:v mpeg4");
  ClipOptions options = SmallFrames(8);
  options.max_input_bytes = 100;
  EXPECT_EQ(DecodeClip(bytes, options).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(ClipDecoderTest, RefusesFramesOverTheSizeLimit) {
  const std::string bytes =
      Video("wide.mp4", "-f lavfi -i testsrc2=size=640x64:rate=5 -frames:v 2 -c:v mpeg4");
  ClipOptions options = SmallFrames(8);
  options.max_frame_side = 320;
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes, options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(clip.status().message(), HasSubstr("640x64"));
}

TEST_F(ClipDecoderTest, DecodesAValidPrefixOfATruncatedFile) {
  const std::string bytes =
      Video("cut.ts", "-f lavfi -i testsrc2=size=128x96:rate=10 -frames:v 40 -c:v mpeg2video");
  absl::StatusOr<DecodedClip> clip = DecodeClip(bytes.substr(0, bytes.size() / 2), SmallFrames(0));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_GT(clip->num_frames, 0);
  EXPECT_LT(clip->num_frames, 40);
}

}  // namespace
}  // namespace vidclf::media
