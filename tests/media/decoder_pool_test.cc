// Decoders kept open between clips (DecoderPool), exercised with libavcodec's CPU decoders: the
// H.264 decoder that a pooled NVDEC decoder runs is the same code, which hands frames out and
// reads new parameter sets the same way; only its slices decode elsewhere.
#include "media/decoder_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/cancellation.h"
#include "media/clip_decoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

class DecoderPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeScratchDir("pool"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Video(const std::string& name, const std::string& ffmpeg_arguments) {
    const std::string path = dir_ + "/" + name;
    testing::MakeVideo(ffmpeg_arguments, path);
    return testing::ReadFile(path);
  }

  static ClipOptions Sampling(int num_frames, DecoderPool* pool) {
    ClipOptions options;
    options.sampling.num_frames = num_frames;
    options.preprocess.resize_shorter_side = 40;
    options.preprocess.crop_size = 32;
    options.decoder_threads = 1;
    options.decoder_pool = pool;
    return options;
  }

  std::string dir_;
};

// Clips of different content, reordering depth, GOP and container, one after the other through
// the same decoders, with every frame and with seeks to keyframes between a few: each the frames
// a decoder of its own gives. MPEG-TS's H.264 (start codes, not MP4's length prefixes) takes a
// decoder of its own.
TEST_F(DecoderPoolTest, AReusedDecoderGivesTheFramesOfANewOne) {
  const std::string pattern = "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 150 ";
  const std::vector<std::string> videos = {
      Video("b3.mp4", pattern + "-c:v libx264 -bf 3 -g 25"),
      Video("b2.mp4", pattern + "-vf hue=h=120 -c:v libx264 -bf 2 -g 40 -crf 30"),
      Video("b0.mkv", pattern + "-vf negate -c:v libx264 -bf 0 -g 30"),
      Video("hevc.mp4", pattern + "-c:v libx265 -x265-params log-level=0 -g 25"),
      Video("pyramid.mp4", pattern + "-vf hflip -c:v libx264 -bf 4 -b-pyramid normal -g 50"),
      Video("annexb.ts", pattern + "-vf vflip -c:v libx264 -bf 2 -g 25"),
  };
  DecoderPool pool(/*max_idle=*/4);
  int clips = 0;
  for (int round = 0; round < 2; ++round) {
    for (const std::string& bytes : videos) {
      for (const int num_frames : {0, 6, 1}) {
        SCOPED_TRACE(::testing::Message() << "video " << clips % videos.size() << ", " << num_frames
                                          << " frames, round " << round);
        absl::StatusOr<DecodedClip> own =
            DecodeClip(VideoSource::Bytes(bytes), Sampling(num_frames, nullptr));
        absl::StatusOr<DecodedClip> pooled =
            DecodeClip(VideoSource::Bytes(bytes), Sampling(num_frames, &pool));
        ASSERT_TRUE(own.ok() && pooled.ok()) << own.status() << pooled.status();
        EXPECT_EQ(pooled->frame_indices, own->frame_indices);
        EXPECT_EQ(pooled->timestamps_seconds, own->timestamps_seconds);
        EXPECT_TRUE(pooled->pixels == own->pixels);
        EXPECT_EQ(pooled->seeks, own->seeks);
        if (num_frames == 6 && clips % videos.size() == 0) {
          EXPECT_GT(pooled->seeks, 0);
        }
      }
      ++clips;
    }
  }
  // One decoder for H.264 in MP4 and Matroska, one for HEVC and one for MPEG-TS's H.264, each
  // opened once.
  EXPECT_EQ(pool.idle(), 3);
  EXPECT_EQ(pool.reuses(), 3 * 2 * static_cast<int64_t>(videos.size()) - 3);
}

TEST_F(DecoderPoolTest, DecodersOfAnotherSizeAreNotTaken) {
  DecoderPool pool(/*max_idle=*/1);
  const std::string small =
      Video("small.mp4", "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 20 -c:v libx264");
  const std::string large =
      Video("large.mp4", "-f lavfi -i testsrc2=size=128x96:rate=25 -frames:v 20 -c:v libx264");
  ASSERT_TRUE(DecodeClip(VideoSource::Bytes(small), Sampling(4, &pool)).ok());
  ASSERT_TRUE(DecodeClip(VideoSource::Bytes(large), Sampling(4, &pool)).ok());
  EXPECT_EQ(pool.reuses(), 0);
  // At most one idle: the small one's decoder was freed for the large one's.
  EXPECT_EQ(pool.idle(), 1);
  ASSERT_TRUE(DecodeClip(VideoSource::Bytes(small), Sampling(4, &pool)).ok());
  EXPECT_EQ(pool.reuses(), 0);
  ASSERT_TRUE(DecodeClip(VideoSource::Bytes(small), Sampling(4, &pool)).ok());
  EXPECT_EQ(pool.reuses(), 1);
}

// A clip that stops part way (cancelled here) does not give its decoder back, with frames held in
// it; the next clip decodes as with a decoder of its own.
TEST_F(DecoderPoolTest, AClipThatStopsDoesNotGiveItsDecoderBack) {
  DecoderPool pool(/*max_idle=*/2);
  const std::string bytes =
      Video("clip.mp4", "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 100 -c:v libx264 -bf 3");
  ASSERT_TRUE(DecodeClip(VideoSource::Bytes(bytes), Sampling(0, &pool)).ok());
  ASSERT_EQ(pool.idle(), 1);
  class CancelAtFirstFrame : public FrameSink {
   public:
    void StartPass(int64_t /*frames*/) override {}
    absl::Status Frame(int64_t /*slot*/, const FrameBuffer& /*frame*/,
                       double /*timestamp_seconds*/) override {
      token.Cancel(absl::CancelledError("the caller went away"));
      return absl::OkStatus();
    }
    CancellationToken token;
  } sink;
  ClipOptions cancelled = Sampling(0, &pool);
  cancelled.cancellation = &sink.token;
  cancelled.frame_sink = &sink;
  EXPECT_EQ(DecodeClip(VideoSource::Bytes(bytes), cancelled).status().code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(pool.idle(), 0);
  absl::StatusOr<DecodedClip> own = DecodeClip(VideoSource::Bytes(bytes), Sampling(5, nullptr));
  absl::StatusOr<DecodedClip> pooled = DecodeClip(VideoSource::Bytes(bytes), Sampling(5, &pool));
  ASSERT_TRUE(own.ok() && pooled.ok()) << own.status() << pooled.status();
  EXPECT_EQ(pooled->frame_indices, own->frame_indices);
  EXPECT_TRUE(pooled->pixels == own->pixels);
  EXPECT_EQ(pool.idle(), 1);
}

}  // namespace
}  // namespace vidclf::media
