// Decodes real files made at test time by the ffmpeg CLI.
#include "media/clip_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>

#include "media/frame_sampler.h"
#include "media/video_encoder.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::ElementsAre;
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
    options.sampling.num_frames = num_frames;
    options.preprocess.resize_shorter_side = 40;
    options.preprocess.crop_size = 32;
    return options;
  }

  std::string dir_;
};

TEST_F(ClipDecoderTest, DecodesEveryFrameWithItsSizeAndTime) {
  const std::string bytes =
      Video("all.mp4", "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 30 -c:v mpeg4");
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(bytes), SmallFrames(/*num_frames=*/0));
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
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(bytes), SmallFrames(/*num_frames=*/8));
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
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
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
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(*bytes), SmallFrames(/*num_frames=*/0));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 6);
  EXPECT_EQ(clip->source_width, 32);
  EXPECT_EQ(clip->source_height, 24);
}

TEST_F(ClipDecoderTest, RefusesEmptyInput) {
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(""), SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("empty input"));
}

TEST_F(ClipDecoderTest, RefusesRandomBytes) {
  std::mt19937 rng(1);
  std::string bytes(10000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("not a video container"));
}

TEST_F(ClipDecoderTest, NamesWhatAnAudioOnlyInputHolds) {
  const std::string bytes = Video("tone.mp3", "-f lavfi -i sine=frequency=440:duration=1");
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), SmallFrames(8));
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("no video stream in input (format: mp3"));
  EXPECT_THAT(clip.status().message(), HasSubstr("streams: audio"));
}

// MPEG program streams have no header: their streams appear as their packets are read, on every
// opening of the input. Sparse sampling seeks in the second pass.
TEST_F(ClipDecoderTest, DecodesMpegProgramStreamsWithAndWithoutAudio) {
  const std::string video = "-f lavfi -i testsrc2=size=96x64:rate=25 ";
  const std::string audio = "-f lavfi -i sine=frequency=440:sample_rate=48000:duration=2 ";
  const std::string bytes[] = {
      Video("mpeg2.vob", video + "-frames:v 50 -c:v mpeg2video -g 10 -bf 2 -f vob"),
      Video("mpeg2_audio.vob",
            video + audio + "-frames:v 50 -c:v mpeg2video -g 10 -bf 2 -c:a mp2 -f vob"),
      Video("mpeg1_audio.mpg",
            video + audio + "-frames:v 50 -c:v mpeg1video -g 10 -c:a mp2 -f mpeg"),
  };
  for (const std::string& input : bytes) {
    for (const int num_frames : {0, 3}) {
      SCOPED_TRACE(num_frames);
      absl::StatusOr<DecodedClip> clip =
          DecodeClip(VideoSource::Bytes(input), SmallFrames(num_frames));
      ASSERT_TRUE(clip.ok()) << clip.status();
      EXPECT_EQ(clip->total_frames, 50);
      EXPECT_THAT(clip->frame_indices, ElementsAreArray(UniformSampleIndices(50, num_frames)));
    }
    // The first frame wanted lies past a keyframe: the second pass seeks before it has read
    // anything, so before the stream has appeared.
    ClipOptions window = SmallFrames(3);
    window.sampling.strategy = SamplingStrategy::kWindow;
    window.sampling.start_seconds = 1.0;
    absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(input), window);
    ASSERT_TRUE(clip.ok()) << clip.status();
    EXPECT_THAT(clip->frame_indices, ElementsAreArray({25, 26, 27}));
  }
}

TEST_F(ClipDecoderTest, RefusesInputOverTheByteLimit) {
  const std::string bytes =
      Video("big.mp4", "-f lavfi -i testsrc2=size=64x64:rate=5 -frames:v 5 -c:v mpeg4");
  ClipOptions options = SmallFrames(8);
  options.max_input_bytes = 100;
  EXPECT_EQ(DecodeClip(VideoSource::Bytes(bytes), options).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(ClipDecoderTest, RefusesFramesOverTheSizeLimit) {
  const std::string bytes =
      Video("wide.mp4", "-f lavfi -i testsrc2=size=640x64:rate=5 -frames:v 2 -c:v mpeg4");
  ClipOptions options = SmallFrames(8);
  options.max_frame_side = 320;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(clip.status().message(), HasSubstr("640x64"));
}

TEST_F(ClipDecoderTest, RefusesVideosOverTheDurationLimit) {
  const std::string bytes =
      Video("long.mp4", "-f lavfi -i testsrc2=size=64x48:rate=10 -frames:v 30 -c:v mpeg4");
  ClipOptions options = SmallFrames(8);
  options.max_duration_seconds = 2.5;  // the last frame shows at 2.9 s
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(clip.status().message(), HasSubstr("video lasts 2.9 s; the limit is 2.5 s"));
}

TEST_F(ClipDecoderTest, DecodesAValidPrefixOfATruncatedFile) {
  const std::string bytes =
      Video("cut.ts", "-f lavfi -i testsrc2=size=128x96:rate=10 -frames:v 40 -c:v mpeg2video");
  absl::StatusOr<DecodedClip> clip =
      DecodeClip(VideoSource::Bytes(bytes.substr(0, bytes.size() / 2)), SmallFrames(0));
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_GT(clip->num_frames, 0);
  EXPECT_LT(clip->num_frames, 40);
}

// Keeps what a FrameSink is given.
class RecordingSink : public FrameSink {
 public:
  explicit RecordingSink(int64_t frame_floats, CancellationToken* cancel_after_first = nullptr)
      : frame_floats_(frame_floats), cancel_after_first_(cancel_after_first) {}

  void StartPass(int64_t frames_announced) override {
    ++passes;
    announced = frames_announced;
    frames.clear();
  }
  absl::Status Frame(int64_t slot, const FrameBuffer& frame, double timestamp_seconds) override {
    const float* pixels = frame.host_rgb_floats();
    slots.push_back(slot);
    times.push_back(timestamp_seconds);
    frames.emplace_back(pixels, pixels + frame_floats_);
    if (cancel_after_first_ != nullptr) {
      cancel_after_first_->Cancel(absl::CancelledError("the caller went away"));
    }
    return absl::OkStatus();
  }

  int passes = 0;
  int64_t announced = -1;
  std::vector<int64_t> slots;
  std::vector<double> times;
  std::vector<std::vector<float>> frames;

  // The frames' pixels, in the order of their slots.
  std::vector<float> PixelsBySlot() const {
    std::vector<size_t> order(slots.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [this](size_t a, size_t b) { return slots[a] < slots[b]; });
    std::vector<float> pixels;
    for (size_t i : order) pixels.insert(pixels.end(), frames[i].begin(), frames[i].end());
    return pixels;
  }

 private:
  const int64_t frame_floats_;
  CancellationToken* const cancel_after_first_;
};

// Sparse sampling of a long video with short GOPs: seeking to keyframes and skipping unwanted
// non-reference frames must give exactly the frames a decode of everything gives, and for
// containers that index their keyframes, for much less decoding.
struct SparseCase {
  std::string file;
  std::string codec;
  bool saves;  // false: no usable timestamps (AVI) or index (MPEG-TS), so it decodes through
  // A second decoder can seek from the start: the container has an index (MP4's comes with its
  // header, Matroska's cues are read by seeking to the start).
  bool splits;
};

class SparseDecodeTest : public ClipDecoderTest,
                         public ::testing::WithParamInterface<SparseCase> {};

TEST_P(SparseDecodeTest, SeekingAndSkippingKeepTheSameFrames) {
  const SparseCase& param = GetParam();
  const std::string bytes =
      Video(param.file,
            "-f lavfi -i testsrc2=size=96x64:rate=30 -frames:v 300 " + param.codec + " -g 30");
  ClipOptions sparse = SmallFrames(/*num_frames=*/6);
  ClipOptions dense = sparse;
  dense.seek_to_keyframes = false;
  dense.skip_unwanted_non_reference_frames = false;
  // Two decoders side by side, each from a keyframe, to a frame sink as the engine decodes.
  ClipOptions split = sparse;
  split.decoder_threads = 4;
  RecordingSink sink(3 * 32 * 32);
  split.frame_sink = &sink;
  absl::StatusOr<DecodedClip> fast = DecodeClip(VideoSource::Bytes(bytes), sparse);
  absl::StatusOr<DecodedClip> slow = DecodeClip(VideoSource::Bytes(bytes), dense);
  absl::StatusOr<DecodedClip> side_by_side = DecodeClip(VideoSource::Bytes(bytes), split);
  ClipOptions one_decoder = split;
  one_decoder.split_at_keyframes = false;
  one_decoder.frame_sink = nullptr;
  absl::StatusOr<DecodedClip> threaded = DecodeClip(VideoSource::Bytes(bytes), one_decoder);
  ASSERT_TRUE(fast.ok() && slow.ok() && side_by_side.ok() && threaded.ok())
      << fast.status() << slow.status() << side_by_side.status() << threaded.status();
  EXPECT_THAT(fast->frame_indices, ElementsAreArray(UniformSampleIndices(300, 6)));
  EXPECT_EQ(fast->frame_indices, slow->frame_indices);
  EXPECT_EQ(fast->timestamps_seconds, slow->timestamps_seconds);
  EXPECT_EQ(fast->pixels, slow->pixels);
  EXPECT_EQ(side_by_side->frame_indices, slow->frame_indices);
  EXPECT_EQ(side_by_side->timestamps_seconds, slow->timestamps_seconds);
  EXPECT_EQ(sink.PixelsBySlot(), std::vector<float>(slow->pixels.begin(), slow->pixels.end()));
  if (param.saves) {
    EXPECT_GT(fast->seeks, 0);
    EXPECT_LT(fast->frames_decoded, slow->frames_decoded / 2);
  }
  EXPECT_EQ(fast->decoders, 1);
  EXPECT_EQ(side_by_side->decoders, param.splits ? 2 : 1);
  EXPECT_EQ(sink.passes, 1);
  // The second decoder decodes from its keyframe, not from the start: no more frames than one
  // decoder with as many threads, give or take a frame in flight at each of the 6 wanted frames.
  EXPECT_LE(side_by_side->frames_decoded, threaded->frames_decoded + 6);
}

INSTANTIATE_TEST_SUITE_P(
    ClipDecoder, SparseDecodeTest,
    ::testing::Values(SparseCase{"h264.mp4", "-c:v libx264 -bf 3", true, true},
                      SparseCase{"h264.mkv", "-c:v libx264 -bf 3", true, true},
                      SparseCase{"vp9.webm", "-c:v libvpx-vp9 -deadline realtime -cpu-used 8", true,
                                 true},
                      // Written live: no cues, as a browser's MediaRecorder writes WebM.
                      SparseCase{"h264_live.mkv", "-c:v libx264 -bf 3 -live 1", true, true},
                      SparseCase{"mpeg4.avi", "-c:v mpeg4 -bf 2", false, false},
                      SparseCase{"h264.ts", "-c:v libx264 -bf 3", false, false}),
    [](const auto& info) {
      std::string name = info.param.file;
      std::replace(name.begin(), name.end(), '.', '_');
      return name;
    });

// A second decoder that starts at a later keyframe gives the frames one decoder gives. The sample
// is H.264 4:4:4 from an old x264, whose bugs libavcodec works around once the first frame has
// told it the version: without that frame, the second decoder's frames come out damaged.
TEST_F(ClipDecoderTest, TwoDecodersSideBySideGiveTheFramesOfOne) {
  const std::string path = "/usr/lib/python3/dist-packages/imageio/resources/images/cockatoo.mp4";
  std::ifstream file(path, std::ios::binary);
  ASSERT_TRUE(file) << path << " is missing; scripts/install-deps.sh installs python3-imageio";
  std::ostringstream bytes;
  bytes << file.rdbuf();
  ClipOptions one = SmallFrames(/*num_frames=*/16);
  one.decoder_threads = 1;
  ClipOptions two = one;
  two.decoder_threads = 4;  // as the engine gives a call decoding alone on 2 cores
  ClipOptions unsplit = two;
  unsplit.split_at_keyframes = false;
  absl::StatusOr<DecodedClip> single = DecodeClip(VideoSource::Bytes(bytes.str()), one);
  absl::StatusOr<DecodedClip> split = DecodeClip(VideoSource::Bytes(bytes.str()), two);
  absl::StatusOr<DecodedClip> threaded = DecodeClip(VideoSource::Bytes(bytes.str()), unsplit);
  ASSERT_TRUE(single.ok() && split.ok() && threaded.ok())
      << single.status() << split.status() << threaded.status();
  EXPECT_EQ(split->decoders, 2);  // keyframes at 0, 77 and 146 of 280 frames
  EXPECT_EQ(threaded->decoders, 1);
  EXPECT_EQ(split->frame_indices, single->frame_indices);
  EXPECT_EQ(split->timestamps_seconds, single->timestamps_seconds);
  EXPECT_EQ(split->pixels, single->pixels);
  EXPECT_EQ(threaded->pixels, single->pixels);
}

// A streamed upload's kept packets seek exactly, so its frames split between two decoders too.
TEST_F(ClipDecoderTest, TwoDecodersSplitAStreamedUpload) {
  const std::string bytes =
      Video("faststart.mp4",
            "-f lavfi -i testsrc2=size=96x64:rate=30 -frames:v 300 -c:v libx264 -bf 3 -g 30 "
            "-movflags +faststart");
  ClipOptions one = SmallFrames(/*num_frames=*/6);
  one.decoder_threads = 1;
  ClipOptions two = one;
  two.decoder_threads = 4;
  absl::StatusOr<DecodedClip> single = DecodeClip(VideoSource::Bytes(bytes), one);
  absl::StatusOr<DecodedClip> streamed = testing::DecodeInChunks(bytes, 4096, two);
  ASSERT_TRUE(single.ok() && streamed.ok()) << single.status() << streamed.status();
  EXPECT_EQ(streamed->decoders, 2);
  EXPECT_EQ(streamed->frame_indices, single->frame_indices);
  EXPECT_EQ(streamed->pixels, single->pixels);
}

// Cancelling a call stops both decoders of a split decode, with the cancellation's reason.
TEST_F(ClipDecoderTest, CancellingStopsBothDecoders) {
  const std::string bytes =
      Video("split-cancel.mp4",
            "-f lavfi -i testsrc2=size=320x240:rate=30 -frames:v 600 -c:v libx264 -g 30");
  CancellationToken cancellation;
  RecordingSink sink(3 * 32 * 32, &cancellation);
  ClipOptions options = SmallFrames(/*num_frames=*/20);
  options.decoder_threads = 4;
  options.cancellation = &cancellation;
  options.frame_sink = &sink;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(clip.status().message(), HasSubstr("the caller went away"));
  EXPECT_LT(sink.frames.size(), 20u);
}

// Snapping to keyframes takes the keyframe nearest each segment's centre, decodes less than the
// exact sampling, and gives the same pixels for those frames as decoding every frame does.
TEST_F(ClipDecoderTest, SnappingToKeyframesDecodesKeyframes) {
  const std::string bytes =
      Video("snap.mp4",
            "-f lavfi -i testsrc2=size=96x64:rate=30 -frames:v 300 -c:v libx264 "
            "-bf 3 -g 20");
  ClipOptions exact = SmallFrames(/*num_frames=*/6);
  exact.decoder_threads = 1;
  ClipOptions snapped = exact;
  snapped.sampling.snap_to_keyframes = true;
  absl::StatusOr<DecodedClip> fast = DecodeClip(VideoSource::Bytes(bytes), snapped);
  absl::StatusOr<DecodedClip> slow = DecodeClip(VideoSource::Bytes(bytes), exact);
  ASSERT_TRUE(fast.ok() && slow.ok()) << fast.status() << slow.status();
  // Segments of 50 frames with centres 25, 75, ...; keyframes every 20 frames.
  EXPECT_THAT(fast->frame_indices, ElementsAre(20, 80, 120, 180, 220, 280));
  // Each is a keyframe whose GOP holds no other wanted frame: the decoder is drained right after
  // it, so nothing else is decoded.
  EXPECT_EQ(fast->frames_decoded, 6);
  EXPECT_LT(fast->frames_decoded, slow->frames_decoded);

  ClipOptions every_frame = exact;
  every_frame.sampling.strategy = SamplingStrategy::kAll;
  every_frame.sampling.num_frames = 0;
  absl::StatusOr<DecodedClip> all = DecodeClip(VideoSource::Bytes(bytes), every_frame);
  ASSERT_TRUE(all.ok()) << all.status();
  const int64_t floats = static_cast<int64_t>(fast->pixels.size()) / 6;
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_TRUE(std::equal(fast->pixels.begin() + i * floats,
                           fast->pixels.begin() + (i + 1) * floats,
                           all->pixels.begin() + fast->frame_indices[i] * floats))
        << "frame " << fast->frame_indices[i];
  }
}

// Skipping the loop filter changes the pixels a little, and only when asked for.
TEST_F(ClipDecoderTest, SkippingTheLoopFilterIsOptInAndClose) {
  const std::string bytes =
      Video("deblock.mp4",
            "-f lavfi -i testsrc2=size=160x96:rate=30 -frames:v 60 -c:v libx264 "
            "-crf 40 -g 60");
  ClipOptions exact = SmallFrames(/*num_frames=*/4);
  ClipOptions skipped = exact;
  skipped.sampling.skip_loop_filter = true;
  absl::StatusOr<DecodedClip> filtered = DecodeClip(VideoSource::Bytes(bytes), exact);
  absl::StatusOr<DecodedClip> again = DecodeClip(VideoSource::Bytes(bytes), exact);
  absl::StatusOr<DecodedClip> unfiltered = DecodeClip(VideoSource::Bytes(bytes), skipped);
  ASSERT_TRUE(filtered.ok() && again.ok() && unfiltered.ok());
  EXPECT_EQ(filtered->pixels, again->pixels);
  EXPECT_EQ(unfiltered->frame_indices, filtered->frame_indices);
  ASSERT_EQ(unfiltered->pixels.size(), filtered->pixels.size());
  double total_difference = 0;
  for (size_t i = 0; i < filtered->pixels.size(); ++i) {
    total_difference += std::abs(unfiltered->pixels[i] - filtered->pixels[i]);
  }
  const double mean_difference = total_difference / filtered->pixels.size();
  EXPECT_GT(mean_difference, 0);
  // Normalised pixels span about 4 units; deblocking moves them by a small fraction of it.
  EXPECT_LT(mean_difference, 0.1);
}

// Converting on a thread of its own while decoding goes on must keep every frame as converting
// on the decoding thread does, with frame threads and without.
TEST_F(ClipDecoderTest, ConvertingWhileDecodingKeepsTheSameFrames) {
  const std::string bytes = Video(
      "pipelined.mp4", "-f lavfi -i testsrc2=size=96x64:rate=30 -frames:v 90 -c:v libx264 -bf 3");
  for (const int threads : {1, 3}) {
    ClipOptions pipelined = SmallFrames(/*num_frames=*/0);
    pipelined.sampling.strategy = SamplingStrategy::kAll;
    pipelined.decoder_threads = threads;
    ClipOptions inline_conversion = pipelined;
    inline_conversion.convert_while_decoding = false;
    absl::StatusOr<DecodedClip> fast = DecodeClip(VideoSource::Bytes(bytes), pipelined);
    absl::StatusOr<DecodedClip> slow = DecodeClip(VideoSource::Bytes(bytes), inline_conversion);
    ASSERT_TRUE(fast.ok() && slow.ok()) << fast.status() << slow.status();
    EXPECT_EQ(fast->num_frames, 90);
    EXPECT_EQ(fast->frame_indices, slow->frame_indices);
    EXPECT_EQ(fast->timestamps_seconds, slow->timestamps_seconds);
    EXPECT_EQ(fast->pixels, slow->pixels) << threads << " decoder threads";
    EXPECT_GT(fast->preprocess_seconds, 0);
    EXPECT_GT(fast->decode_seconds, 0);
  }
}

TEST_F(ClipDecoderTest, SamplesFramesPerSecondOfPresentationTime) {
  const std::string bytes =
      Video("fps.mp4", "-f lavfi -i testsrc2=size=64x48:rate=10 -frames:v 30 -c:v libx264");
  ClipOptions options = SmallFrames(/*num_frames=*/0);
  options.sampling.strategy = SamplingStrategy::kFps;
  options.sampling.frames_per_second = 2;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_THAT(clip->frame_indices, ElementsAreArray({0, 5, 10, 15, 20, 25}));
  EXPECT_THAT(clip->timestamps_seconds, ElementsAreArray({0.0, 0.5, 1.0, 1.5, 2.0, 2.5}));
}

TEST_F(ClipDecoderTest, SamplesAWindowFromAStartTime) {
  const std::string bytes =
      Video("window.mkv", "-f lavfi -i testsrc2=size=64x48:rate=10 -frames:v 40 -c:v libx264");
  ClipOptions options = SmallFrames(/*num_frames=*/4);
  options.sampling.strategy = SamplingStrategy::kWindow;
  options.sampling.start_seconds = 1.0;
  options.sampling.stride_frames = 3;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_THAT(clip->frame_indices, ElementsAreArray({10, 13, 16, 19}));

  options.sampling.start_seconds = 60;
  clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("no frame matches the sampling"));
}

TEST_F(ClipDecoderTest, AllFramesStopAtTheCap) {
  const std::string bytes =
      Video("cap.mp4", "-f lavfi -i testsrc2=size=64x48:rate=10 -frames:v 20 -c:v mpeg4");
  ClipOptions options = SmallFrames(/*num_frames=*/7);
  options.sampling.strategy = SamplingStrategy::kAll;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_THAT(clip->frame_indices, ElementsAreArray({0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(clip->total_frames, 20);
}

TEST_F(ClipDecoderTest, RefusesBadSamplingOptions) {
  const std::string bytes =
      Video("opts.mp4", "-f lavfi -i testsrc2=size=64x48:rate=10 -frames:v 5 -c:v mpeg4");
  ClipOptions options = SmallFrames(/*num_frames=*/4);
  options.sampling.strategy = SamplingStrategy::kFps;
  options.sampling.frames_per_second = 0;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(clip.status().message(), HasSubstr("frames_per_second > 0"));
}

TEST_F(ClipDecoderTest, StopsAtTheDecodeBudget) {
  const std::string bytes =
      Video("slow.mp4", "-f lavfi -i testsrc2=size=320x240:rate=30 -frames:v 300 -c:v libx264");
  ClipOptions options = SmallFrames(/*num_frames=*/0);
  options.decode_timeout_ms = 1;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(clip.status().message(), HasSubstr("budget of 1 ms"));
}

TEST_F(ClipDecoderTest, ShowsFramesUprightAsTheContainerSays) {
  // Red left half, blue right half, stored 64x32 with a display matrix of a quarter turn
  // counter-clockwise (what `rotate=90` writes; the ffmpeg CLI shows it 32x64, blue on top).
  Video("flat.mp4",
        "-f lavfi -i color=c=red:s=64x32:r=5 -frames:v 3 "
        "-vf drawbox=x=32:y=0:w=32:h=32:color=blue:t=fill -c:v libx264 -pix_fmt yuv444p");
  const std::string bytes =
      Video("turned.mp4", "-i " + dir_ + "/flat.mp4 -c copy -metadata:s:v:0 rotate=90");
  ClipOptions options = SmallFrames(/*num_frames=*/1);
  options.preprocess.resize_shorter_side = 32;
  options.preprocess.crop_size = 16;
  options.preprocess.mean = {0, 0, 0};
  options.preprocess.std = {1, 1, 1};
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  const int plane = 16 * 16;
  auto red_and_blue = [&](int x, int y) {
    return std::make_pair(clip->pixels[y * 16 + x], clip->pixels[2 * plane + y * 16 + x]);
  };
  EXPECT_LT(red_and_blue(8, 2).first, 0.1f);  // top: blue
  EXPECT_GT(red_and_blue(8, 2).second, 0.9f);
  EXPECT_GT(red_and_blue(8, 13).first, 0.9f);  // bottom: red
  EXPECT_LT(red_and_blue(8, 13).second, 0.1f);
}

}  // namespace
}  // namespace vidclf::media

namespace vidclf::media {
namespace {

// Frames handed to a sink as they are converted are those of the clip, in order, and the clip
// keeps no pixels of its own.
TEST_F(ClipDecoderTest, HandsFramesToASinkAsTheyAreConverted) {
  const std::string bytes =
      Video("sink.mp4", "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 40 -c:v libx264");
  const ClipOptions options = SmallFrames(/*num_frames=*/8);
  absl::StatusOr<DecodedClip> whole = DecodeClip(VideoSource::Bytes(bytes), options);
  ASSERT_TRUE(whole.ok()) << whole.status();

  const int64_t frame_floats = 3 * 32 * 32;
  RecordingSink sink(frame_floats);
  ClipOptions with_sink = options;
  with_sink.frame_sink = &sink;
  absl::StatusOr<DecodedClip> streamed = DecodeClip(VideoSource::Bytes(bytes), with_sink);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_TRUE(streamed->pixels.empty());
  EXPECT_EQ(streamed->num_frames, 8);
  EXPECT_EQ(sink.passes, 1);
  EXPECT_EQ(sink.announced, 8);
  EXPECT_THAT(sink.slots, ElementsAreArray({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_THAT(sink.times, ElementsAreArray(whole->timestamps_seconds));
  ASSERT_EQ(sink.frames.size(), 8u);
  for (int64_t i = 0; i < 8; ++i) {
    const std::vector<float> expected(whole->pixels.begin() + i * frame_floats,
                                      whole->pixels.begin() + (i + 1) * frame_floats);
    EXPECT_EQ(sink.frames[i], expected) << "frame " << i;
  }
}

// A cancelled decode stops at the next packet with the cancellation's reason.
TEST_F(ClipDecoderTest, StopsOnceCancelled) {
  const std::string bytes =
      Video("cancel.mp4", "-f lavfi -i testsrc2=size=320x240:rate=10 -frames:v 200 -c:v libx264");
  CancellationToken cancellation;
  RecordingSink sink(3 * 32 * 32, &cancellation);
  ClipOptions options = SmallFrames(/*num_frames=*/0);  // every frame
  options.cancellation = &cancellation;
  options.frame_sink = &sink;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(bytes), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(clip.status().message(), HasSubstr("the caller went away"));
  EXPECT_LT(sink.frames.size(), 10u);

  CancellationToken before;
  before.Cancel(absl::CancelledError("never started"));
  options.cancellation = &before;
  options.frame_sink = nullptr;
  EXPECT_EQ(DecodeClip(VideoSource::Bytes(bytes), options).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace vidclf::media
