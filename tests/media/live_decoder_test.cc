// The live decoder: one pass over a feed as its bytes arrive, every container a camera or an
// encoder streams, checked frame by frame against DecodeClip on the same bytes.
#include "media/live_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/cancellation.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;
using Clock = ByteStream::Clock;

// 2 s at 25 fps.
constexpr int kLiveFrames = 50;
constexpr char kLivePattern[] = "-f lavfi -i testsrc2=size=96x64:rate=25 ";
// A second input, for containers with an audio stream beside the video.
constexpr char kTone[] = "-f lavfi -i sine=frequency=440:sample_rate=48000:duration=2 ";

struct LiveContainer {
  const char* file;
  const char* inputs;
  const char* options;  // ffmpeg output options; the file's extension picks the muxer otherwise
};

const LiveContainer kLiveContainers[] = {
    {"h264.ts", kLivePattern, "-c:v libx264 -g 10"},
    {"h264_audio.ts", "", "-c:v libx264 -g 10 -c:a mp2"},
    {"h264.mkv", kLivePattern, "-c:v libx264 -g 10"},
    {"vp9.webm", kLivePattern, "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 10"},
    {"h264_fragmented.mp4", kLivePattern, "-c:v libx264 -g 10 -movflags frag_keyframe+empty_moov"},
    {"annexb.h264", kLivePattern, "-c:v libx264 -g 10"},
    {"annexb.hevc", kLivePattern, "-c:v libx265 -g 10 -x265-params log-level=error"},
    {"video.mjpeg", kLivePattern, "-c:v mjpeg"},
    // MPEG program streams: DVD's VOB, the DVD muxer, and plain MPEG-1/2 system streams.
    {"mpeg2_audio.vob", "", "-c:v mpeg2video -g 10 -bf 2 -c:a mp2 -f vob"},
    {"mpeg2_audio.dvd", "", "-c:v mpeg2video -g 10 -bf 2 -c:a ac3 -f dvd"},
    {"mpeg2.mpg", kLivePattern, "-c:v mpeg2video -g 10 -bf 2 -f vob"},
    {"mpeg1.mpg", kLivePattern, "-c:v mpeg1video -g 10 -bf 2 -f mpeg"},
    {"mpeg1_audio.mpg", "", "-c:v mpeg1video -g 10 -c:a mp2 -f mpeg"},
};

// The inputs of a container: the pattern, with the tone when it is to have audio.
std::string Inputs(const LiveContainer& container) {
  return *container.inputs != '\0' ? container.inputs : std::string(kLivePattern) + kTone;
}

PreprocessOptions Preprocess() {
  PreprocessOptions preprocess;
  preprocess.resize_shorter_side = 64;
  preprocess.crop_size = 48;
  return preprocess;
}

// A frame handed out, copied.
struct Got {
  int64_t index;
  double timestamp_seconds;
  std::vector<float> pixels;
  Clock::time_point arrived;
  Clock::time_point handed_out;
};

// Runs DecodeLive on `input`, keeping every frame it hands out.
absl::Status Collect(ByteStream& input, const LiveDecodeOptions& options, std::vector<Got>* got) {
  const int64_t floats = 3LL * options.preprocess.crop_size * options.preprocess.crop_size;
  int64_t next_index = 0;
  return DecodeLive(input, options, [&](const LiveFrame& frame) {
    // Every frame comes, in order; those off the stride without pixels.
    EXPECT_EQ(frame.index, next_index++);
    EXPECT_EQ(frame.pixels != nullptr, frame.index % options.embed_stride == 0) << frame.index;
    if (frame.pixels == nullptr) return absl::OkStatus();
    got->push_back({frame.index, frame.timestamp_seconds,
                    std::vector<float>(frame.pixels->host_rgb_floats(),
                                       frame.pixels->host_rgb_floats() + floats),
                    frame.arrived, Clock::now()});
    return absl::OkStatus();
  });
}

// A producer thread that feeds `bytes` in chunks, pausing every `pause_every` chunks, and keeps
// under a held-bytes bound by waiting for room as a gRPC reactor does.
class Feeder {
 public:
  Feeder(ByteStream& input, std::string bytes, size_t chunk_bytes, int64_t bound,
         int pause_every = 0)
      : input_(input),
        bytes_(std::move(bytes)),
        thread_([=] { Feed(chunk_bytes, bound, pause_every); }) {}
  ~Feeder() { thread_.join(); }
  int64_t max_held() const { return max_held_; }

 private:
  void Feed(size_t chunk_bytes, int64_t bound, int pause_every) {
    for (size_t at = 0, chunks = 0; at < bytes_.size(); at += chunk_bytes, ++chunks) {
      const absl::string_view chunk = absl::string_view(bytes_).substr(at, chunk_bytes);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        room_ = false;
      }
      input_.CallWhenHeldBelow(bound - static_cast<int64_t>(chunk.size()) + 1, [this] {
        std::lock_guard<std::mutex> lock(mutex_);
        room_ = true;
        room_changed_.notify_all();
      });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        room_changed_.wait(lock, [this] { return room_; });
      }
      if (!input_.Append(chunk).ok()) return;
      max_held_ = std::max(max_held_.load(), input_.held_bytes());
      if (pause_every > 0 && chunks % pause_every == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    input_.Finish();
  }

  ByteStream& input_;
  const std::string bytes_;
  std::mutex mutex_;
  std::condition_variable room_changed_;
  bool room_ = false;
  std::atomic<int64_t> max_held_{0};
  std::thread thread_;  // last: starts once the rest exists
};

class LiveDecoderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::MakeScratchDir("live_decoder")); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::string Path(const std::string& file) { return *dir_ + "/" + file; }

  // Makes (once per suite) `file` from `inputs` with ffmpeg output `options`.
  static std::string Video(const std::string& file, const std::string& inputs,
                           const std::string& options) {
    if (!std::filesystem::exists(Path(file))) {
      testing::MakeVideo(inputs + "-frames:v " + std::to_string(kLiveFrames) + " " + options,
                         Path(file));
    }
    return testing::ReadFile(Path(file));
  }
  static std::string Video(const LiveContainer& container) {
    return Video(container.file, Inputs(container), container.options);
  }

  // Every frame, as the clip decoder makes them of the whole input.
  static absl::StatusOr<DecodedClip> EveryFrame(const std::string& bytes) {
    ClipOptions options;
    options.sampling.strategy = SamplingStrategy::kAll;
    options.sampling.num_frames = 0;
    options.preprocess = Preprocess();
    return DecodeClip(VideoSource::Bytes(bytes), options);
  }

  // Expects the frames handed out to be frames 0, stride, 2 * stride, ... of `clip`, with the
  // same times and (to within float rounding) the same pixels.
  static void ExpectSameFrames(const std::vector<Got>& got, const DecodedClip& clip, int stride) {
    const int64_t floats = clip.pixels.size() / clip.num_frames;
    ASSERT_EQ(static_cast<int64_t>(got.size()), (clip.num_frames + stride - 1) / stride);
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "frame " << got[i].index);
      const int64_t frame = static_cast<int64_t>(i) * stride;
      ASSERT_EQ(got[i].index, clip.frame_indices[frame]);
      EXPECT_NEAR(got[i].timestamp_seconds, clip.timestamps_seconds[frame], 1e-9);
      float worst = 0;
      for (int64_t k = 0; k < floats; ++k) {
        worst = std::max(worst, std::abs(got[i].pixels[k] - clip.pixels[frame * floats + k]));
      }
      EXPECT_LE(worst, 1e-5f);
    }
  }

  static std::string* dir_;
};
std::string* LiveDecoderTest::dir_ = nullptr;

TEST_F(LiveDecoderTest, EveryStreamableContainerGivesTheClipDecodersFrames) {
  for (const LiveContainer& container : kLiveContainers) {
    SCOPED_TRACE(container.file);
    const std::string bytes = Video(container);
    ASSERT_FALSE(HasFatalFailure());
    absl::StatusOr<DecodedClip> whole = EveryFrame(bytes);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_EQ(whole->num_frames, kLiveFrames);

    ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
    std::vector<Got> got;
    absl::Status status;
    {
      Feeder feeder(input, bytes, 4096, 1 << 20);
      LiveDecodeOptions options;
      options.preprocess = Preprocess();
      status = Collect(input, options, &got);
    }
    ASSERT_TRUE(status.ok()) << status;
    ExpectSameFrames(got, *whole, 1);
  }
}

TEST_F(LiveDecoderTest, EmbedStrideHandsOutEveryKthFrame) {
  for (const LiveContainer& container : {kLiveContainers[0], kLiveContainers[8]}) {
    SCOPED_TRACE(container.file);
    const std::string bytes = Video(container);
    ASSERT_FALSE(HasFatalFailure());
    absl::StatusOr<DecodedClip> whole = EveryFrame(bytes);
    ASSERT_TRUE(whole.ok()) << whole.status();

    ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
    ASSERT_TRUE(input.Append(bytes).ok());
    input.Finish();
    LiveDecodeOptions options;
    options.preprocess = Preprocess();
    options.embed_stride = 3;
    options.decoder_threads = 2;
    std::vector<Got> got;
    const absl::Status status = Collect(input, options, &got);
    ASSERT_TRUE(status.ok()) << status;
    ExpectSameFrames(got, *whole, 3);
  }
}

// Sampling by media time takes the first frame at or after each multiple of 1 / sample_fps, across
// a change of frame rate (25 fps for 2 s, then 10 fps), and a whole MP4 whose moov box comes last
// decodes from memory.
TEST_F(LiveDecoderTest, SampleFpsFollowsMediaTimeAcrossARateChange) {
  const std::string path = testing::CachedVideo(
      "-f lavfi -i testsrc2=size=96x64:rate=25:duration=2 -f lavfi -i "
      "testsrc2=size=96x64:rate=10:duration=2 -filter_complex "
      "'[0:v][1:v]concat=n=2:v=1:a=0,settb=1/1000' -vsync vfr -c:v libx264 -g 7",
      ".mp4");
  const std::string bytes = testing::ReadFile(path);
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  options.sample_fps = 4;
  std::vector<double> all, sampled;
  const absl::Status status = DecodeLiveMemory(bytes, options, [&](const LiveFrame& frame) {
    all.push_back(frame.timestamp_seconds);
    if (frame.pixels != nullptr) sampled.push_back(frame.timestamp_seconds);
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_GE(all.size(), 69u);  // 50 frames, then 20 (the last may be lost to the rate change)
  std::vector<double> expected;
  double next = 0;
  for (const double seconds : all) {
    if (seconds + 1e-6 < next) continue;
    expected.push_back(seconds);
    next = (std::floor((seconds + 1e-6) * 4) + 1) / 4;
  }
  EXPECT_EQ(sampled, expected);
  ASSERT_EQ(sampled.size(), 16u);  // 0, 0.25, ..., 3.75
  // Each within a frame period (0.1 s at 10 fps) after its multiple.
  for (size_t i = 0; i < sampled.size(); ++i) EXPECT_NEAR(sampled[i], i * 0.25 + 0.05, 0.051) << i;

  options.sample_fps = -1;
  EXPECT_THAT(ValidateLiveDecodeOptions(options).message(), HasSubstr("sample_fps"));
  EXPECT_EQ(
      DecodeLiveMemory("", LiveDecodeOptions(), [](const LiveFrame&) { return absl::OkStatus(); })
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// Tiny chunks with pauses, under a bound far smaller than the video: the producer waits for room
// and the bytes held never pass the bound.
TEST_F(LiveDecoderTest, SmallChunksWithPausesUnderATightBound) {
  const char kLarger[] = "-f lavfi -i testsrc2=size=320x240:rate=25 ";
  const LiveContainer containers[] = {
      {"large.ts", kLarger, "-c:v libx264 -crf 4 -g 10"},
      {"large_fragmented.mp4", kLarger,
       "-c:v libx264 -crf 4 -g 10 -movflags frag_keyframe+empty_moov"},
      {"large.vob", kLarger, "-c:v mpeg2video -g 10 -bf 2 -q:v 2 -f vob"},
  };
  constexpr int64_t kBound = 64 * 1024;  // what DemuxesAsItArrives may peek at
  for (const LiveContainer& container : containers) {
    SCOPED_TRACE(container.file);
    const std::string bytes = Video(container);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_GT(static_cast<int64_t>(bytes.size()), 3 * kBound);
    absl::StatusOr<DecodedClip> whole = EveryFrame(bytes);
    ASSERT_TRUE(whole.ok()) << whole.status();

    ByteStream input(kBound, ByteStream::Bound::kHeldBytes);
    std::vector<Got> got;
    absl::Status status;
    int64_t max_held = 0;
    {
      Feeder feeder(input, bytes, 300, kBound, /*pause_every=*/64);
      LiveDecodeOptions options;
      options.preprocess = Preprocess();
      status = Collect(input, options, &got);
      max_held = feeder.max_held();
    }
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_LE(max_held, kBound);
    EXPECT_GT(max_held, 0);
    ExpectSameFrames(got, *whole, 1);
  }
}

TEST_F(LiveDecoderTest, AbortMidwayReturnsTheAbortStatusPromptly) {
  const std::string bytes = Video(kLiveContainers[0]);
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(absl::string_view(bytes).substr(0, bytes.size() / 2)).ok());
  std::promise<void> first_frame;
  Clock::time_point aborted;
  std::thread camera([&] {
    first_frame.get_future().wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the decoder waits for bytes
    aborted = Clock::now();
    input.Abort(absl::UnavailableError("the camera went away"));
  });
  int frames = 0;
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  const absl::Status status = DecodeLive(input, options, [&](const LiveFrame&) {
    if (frames++ == 0) first_frame.set_value();
    return absl::OkStatus();
  });
  const Clock::time_point returned = Clock::now();
  camera.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("camera went away"));
  EXPECT_GT(frames, 0);
  EXPECT_LT(frames, kLiveFrames);
  EXPECT_LT(returned - aborted, std::chrono::seconds(1));
  EXPECT_EQ(input.Append("more").code(), absl::StatusCode::kCancelled);  // the reader is closed
}

TEST_F(LiveDecoderTest, CancellationStopsDecodingWithItsReason) {
  const std::string bytes = Video(kLiveContainers[2]);
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(bytes).ok());  // and never Finish(): only the cancellation ends it
  CancellationToken cancellation;
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  options.cancellation = &cancellation;
  int frames = 0;
  const absl::Status status = DecodeLive(input, options, [&](const LiveFrame&) {
    if (++frames == 5) cancellation.Cancel(absl::CancelledError("the viewer left"));
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_THAT(status.message(), HasSubstr("viewer left"));
  EXPECT_GE(frames, 5);
  EXPECT_LT(frames, kLiveFrames);
}

TEST_F(LiveDecoderTest, CancellationBeforeTheStartDecodesNothing) {
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  CancellationToken cancellation;
  cancellation.Cancel(absl::DeadlineExceededError("too late"));
  LiveDecodeOptions options;
  options.cancellation = &cancellation;
  const absl::Status status =
      DecodeLive(input, options, [](const LiveFrame&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST_F(LiveDecoderTest, AnErrorFromTheCallbackStopsDecoding) {
  const std::string bytes = Video(kLiveContainers[0]);
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(bytes).ok());
  input.Finish();
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  std::vector<int64_t> indices;
  const absl::Status status = DecodeLive(input, options, [&](const LiveFrame& frame) {
    indices.push_back(frame.index);
    return indices.size() == 3 ? absl::ResourceExhaustedError("the batcher is full")
                               : absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("batcher is full"));
  EXPECT_EQ(indices, (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(LiveDecoderTest, InputThatIsNoVideoFeedIsRefused) {
  const std::string mp3 = Video("tone.mp3", kTone, "");
  const std::string moov_at_end = Video("moov_at_end.mp4", kLivePattern, "-c:v libx264");
  ASSERT_FALSE(HasFatalFailure());
  const struct {
    const char* name;
    std::string bytes;
    const char* message;
  } inputs[] = {
      {"mp3", mp3, "no video stream in input (format: mp3"},
      {"garbage", std::string(20000, '\x5a'), "not a video container"},
      {"empty", "", "empty input"},
      {"moov at the end", moov_at_end, "moov box follows its media data"},
  };
  for (const auto& input_case : inputs) {
    SCOPED_TRACE(input_case.name);
    ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
    ASSERT_TRUE(input.Append(input_case.bytes).ok());
    input.Finish();
    int frames = 0;
    const absl::Status status = DecodeLive(input, LiveDecodeOptions(), [&](const LiveFrame&) {
      ++frames;
      return absl::OkStatus();
    });
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(input_case.message));
    EXPECT_EQ(frames, 0);
  }
}

TEST_F(LiveDecoderTest, FramesOverTheSizeLimitAreRefused) {
  const std::string bytes = Video(kLiveContainers[0]);  // 96x64
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(bytes).ok());
  input.Finish();
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  options.max_frame_side = 80;
  const absl::Status status =
      DecodeLive(input, options, [](const LiveFrame&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("96x64"));
}

TEST_F(LiveDecoderTest, BadOptionsNameTheirField) {
  LiveDecodeOptions options;
  options.embed_stride = 0;
  EXPECT_THAT(ValidateLiveDecodeOptions(options).message(), HasSubstr("embed_stride"));
  options = LiveDecodeOptions();
  options.decoder_threads = -1;
  EXPECT_THAT(ValidateLiveDecodeOptions(options).message(), HasSubstr("decoder_threads"));
  options = LiveDecodeOptions();
  options.max_frame_side = 0;
  EXPECT_THAT(ValidateLiveDecodeOptions(options).message(), HasSubstr("max_frame_side"));
  options = LiveDecodeOptions();
  options.preprocess.crop_size = 300;  // over resize_shorter_side
  EXPECT_EQ(ValidateLiveDecodeOptions(options).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateLiveDecodeOptions(LiveDecodeOptions()).ok());
}

// Where each video packet of a file lies, in presentation order (ffprobe's view).
struct PacketPlace {
  int64_t pts;
  int64_t pos;
  int64_t size;
};
std::vector<PacketPlace> VideoPackets(const std::string& path) {
  int exit_code = 0;
  const std::string out = testing::RunCommand(
      "ffprobe -v error -select_streams v -show_entries packet=pts,pos,size -of compact=p=0 '" +
          path + "'",
      &exit_code);
  EXPECT_EQ(exit_code, 0) << out;
  std::vector<PacketPlace> packets;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    PacketPlace packet{-1, -1, -1};
    for (absl::string_view field : absl::StrSplit(line, '|')) {
      std::pair<absl::string_view, absl::string_view> key_value = absl::StrSplit(field, '=');
      int64_t value = 0;
      if (!absl::SimpleAtoi(key_value.second, &value)) continue;
      if (key_value.first == "pts") packet.pts = value;
      if (key_value.first == "pos") packet.pos = value;
      if (key_value.first == "size") packet.size = value;
    }
    packets.push_back(packet);
  }
  std::sort(packets.begin(), packets.end(),
            [](const PacketPlace& a, const PacketPlace& b) { return a.pts < b.pts; });
  return packets;
}

// Each frame's arrival is that of the chunk holding the last byte of its own packet (B-frames
// come out of the decoder in another order than their packets went in), not that of whatever the
// demuxer had read by then.
TEST_F(LiveDecoderTest, ArrivedIsWhenTheFramesOwnBytesCame) {
  const std::string bytes = Video(kLiveContainers[2]);  // Matroska, H.264 with B-frames
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<PacketPlace> packets = VideoPackets(Path(kLiveContainers[2].file));
  ASSERT_EQ(packets.size(), static_cast<size_t>(kLiveFrames));

  constexpr size_t kChunk = 1024;
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  std::vector<std::pair<Clock::time_point, Clock::time_point>> appended;  // before, after
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    const Clock::time_point before = Clock::now();
    ASSERT_TRUE(input.Append(absl::string_view(bytes).substr(at, kChunk)).ok());
    appended.emplace_back(before, Clock::now());
  }
  input.Finish();
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  std::vector<Got> got;
  const absl::Status status = Collect(input, options, &got);
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(got.size(), static_cast<size_t>(kLiveFrames));
  std::vector<size_t> chunks;
  for (const Got& frame : got) {
    SCOPED_TRACE(::testing::Message() << "frame " << frame.index);
    const PacketPlace& packet = packets[frame.index];
    const size_t chunk = (packet.pos + packet.size - 1) / kChunk;
    ASSERT_LT(chunk, appended.size());
    EXPECT_GE(frame.arrived, appended[chunk].first);
    EXPECT_LE(frame.arrived, appended[chunk].second);
    chunks.push_back(chunk);
  }
  // The frames lie in many chunks, so the check tells them apart.
  std::sort(chunks.begin(), chunks.end());
  EXPECT_GT(std::unique(chunks.begin(), chunks.end()) - chunks.begin(), 10);
}

// A feed that pauses: frames whose bytes came after the pause arrived after it.
TEST_F(LiveDecoderTest, ArrivedFollowsAPausedFeed) {
  const std::string bytes = Video(kLiveContainers[0]);  // MPEG-TS
  ASSERT_FALSE(HasFatalFailure());
  const size_t split = bytes.size() / 2;
  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  Clock::time_point resumed;
  std::thread camera([&] {
    const absl::Status first = input.Append(absl::string_view(bytes).substr(0, split));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    resumed = Clock::now();
    const absl::Status second = input.Append(absl::string_view(bytes).substr(split));
    EXPECT_TRUE(first.ok() && second.ok()) << first << "; " << second;
    input.Finish();
  });
  LiveDecodeOptions options;
  options.preprocess = Preprocess();
  std::vector<Got> got;
  const absl::Status status = Collect(input, options, &got);
  camera.join();
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(got.size(), static_cast<size_t>(kLiveFrames));
  int after_pause = 0;
  for (const Got& frame : got) {
    EXPECT_LE(frame.arrived, frame.handed_out) << "frame " << frame.index;
    if (frame.arrived >= resumed) ++after_pause;
  }
  EXPECT_GT(after_pause, 5);
  EXPECT_LT(after_pause, kLiveFrames);
}

}  // namespace
}  // namespace vidclf::media
