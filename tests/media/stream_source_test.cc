// The incremental source: bytes that arrive in chunks, demuxed as they arrive where the container
// allows it. The decode matrix (decode_matrix_test.cc) checks that every cell decodes the same
// through it in chunks of 1 byte, 4 KiB and 1 MiB; this file checks the rest.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "tests/test_util/decode_sources.h"
#include "tests/test_util/test_files.h"

extern "C" {
#include <libavutil/log.h>
}

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kStreamPattern[] = "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 50 ";

ClipOptions Options(int num_frames) {
  ClipOptions options;
  options.sampling.num_frames = num_frames;
  options.preprocess.resize_shorter_side = 64;
  options.preprocess.crop_size = 64;
  options.decode_timeout_ms = 20000;  // a bug that waits forever fails instead of hanging
  return options;
}

class StreamSourceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::MakeScratchDir("stream_source")); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Makes (once per suite) the 2-second pattern video in `file` with ffmpeg output `options`.
  static std::string Video(const std::string& file, const std::string& options) {
    const std::string path = *dir_ + "/" + file;
    if (!std::filesystem::exists(path)) testing::MakeVideo(kStreamPattern + options, path);
    return testing::ReadFile(path);
  }

  static std::string* dir_;
};
std::string* StreamSourceTest::dir_ = nullptr;

struct StreamContainer {
  const char* file;
  const char* options;
  bool buffered;  // cannot be demuxed before its end
};

const StreamContainer kStreamContainers[] = {
    {"h264.ts", "-c:v libx264 -g 10", false},
    {"h264.mkv", "-c:v libx264 -g 10", false},
    {"vp9.webm", "-c:v libvpx-vp9 -g 10", false},
    {"h264_fragmented.mp4", "-c:v libx264 -g 10 -movflags frag_keyframe+empty_moov", false},
    {"h264_faststart.mp4", "-c:v libx264 -g 10 -movflags +faststart", false},
    {"annexb.h264", "-c:v libx264 -g 10", false},
    {"annexb.hevc", "-c:v libx265 -g 10 -x265-params log-level=error", false},
    {"video.mjpeg", "-c:v mjpeg", false},
    {"theora.ogg", "-c:v libtheora -g 10", false},
    {"h264_moov_at_end.mp4", "-c:v libx264 -g 10", true},
    {"mpeg4.avi", "-c:v mpeg4", true},
};

// Lines that the media library writes to FFmpeg's log, caught while alive.
class LogCapture {
 public:
  LogCapture() {
    instance_ = this;
    av_log_set_callback(&LogCapture::Callback);
  }
  ~LogCapture() {
    av_log_set_callback(av_log_default_callback);
    instance_ = nullptr;
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  static void Callback(void*, int level, const char* format, va_list args) {
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, args);
    if (level != AV_LOG_DEBUG || !absl::StartsWith(line, "vidclf:")) return;
    std::lock_guard<std::mutex> lock(instance_->mutex_);
    instance_->lines_.push_back(line);
  }
  static LogCapture* instance_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};
LogCapture* LogCapture::instance_ = nullptr;

TEST_F(StreamSourceTest, StreamsWhatCanStreamAndBuffersTheRestWithTheSameFrames) {
  for (const StreamContainer& container : kStreamContainers) {
    SCOPED_TRACE(container.file);
    const std::string bytes = Video(container.file, container.options);
    ASSERT_FALSE(HasFatalFailure());
    absl::StatusOr<DecodedClip> whole = DecodeClip(VideoSource::Bytes(bytes), Options(8));
    ASSERT_TRUE(whole.ok()) << whole.status();
    LogCapture log;
    absl::StatusOr<DecodedClip> chunked = testing::DecodeInChunks(bytes, 4096, Options(8));
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    EXPECT_EQ(chunked->buffered_whole_input, container.buffered);
    EXPECT_EQ(log.lines().size(), container.buffered ? 1u : 0u);
    if (container.buffered && !log.lines().empty()) {
      EXPECT_THAT(log.lines()[0], HasSubstr(absl::StrCat("buffered all ", bytes.size(), " bytes")));
    }
    EXPECT_EQ(chunked->total_frames, 50);
    EXPECT_EQ(chunked->frame_indices, whole->frame_indices);
    EXPECT_EQ(chunked->timestamps_seconds, whole->timestamps_seconds);
    EXPECT_TRUE(chunked->pixels == whole->pixels);
  }
}

// A sampling with a frame count is settled before the end: a live feed gets its answer without
// ever ending, and the producer learns that it can stop.
TEST_F(StreamSourceTest, StreamableInputNeedsNoEndForASettledSampling) {
  const std::string bytes = Video("h264.mkv", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20);
  ASSERT_TRUE(input.Append(bytes).ok());  // and never Finish()
  ClipOptions options = Options(5);
  options.sampling.strategy = SamplingStrategy::kAll;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Stream(input), options);
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->frame_indices, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_LT(clip->total_frames, 50);
  EXPECT_EQ(input.Append("more").code(), absl::StatusCode::kCancelled);
}

TEST_F(StreamSourceTest, MoovAtTheEndWaitsForTheEnd) {
  const std::string bytes = Video("h264_moov_at_end.mp4", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20);
  ASSERT_TRUE(input.Append(bytes).ok());  // all of it, but the end is never announced
  ClipOptions options = Options(5);
  options.decode_timeout_ms = 300;
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Stream(input), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kDeadlineExceeded) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("waiting for more input"));
}

TEST_F(StreamSourceTest, StalledProducerRunsIntoTheBudget) {
  const std::string bytes = Video("h264.ts", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20);
  ASSERT_TRUE(input.Append(absl::string_view(bytes).substr(0, bytes.size() / 3)).ok());
  ClipOptions options = Options(8);
  options.decode_timeout_ms = 300;
  const auto start = Clock::now();
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Stream(input), options);
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kDeadlineExceeded) << clip.status();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

TEST_F(StreamSourceTest, AbortedInputStopsTheDecoderWithTheProducersStatus) {
  const std::string bytes = Video("h264.ts", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(1 << 20);
  ASSERT_TRUE(input.Append(absl::string_view(bytes).substr(0, bytes.size() / 2)).ok());
  std::thread client([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    input.Abort(absl::CancelledError("the client went away"));
  });
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Stream(input), Options(8));
  client.join();
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kCancelled) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr("client went away"));
}

TEST_F(StreamSourceTest, InputOverTheLimitIsRefusedOnBothSides) {
  const std::string bytes = Video("h264.ts", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  ByteStream input(bytes.size() / 2);
  absl::Status appended;
  std::thread producer([&] {
    for (size_t at = 0; at < bytes.size() && appended.ok(); at += 1000) {
      appended = input.Append(absl::string_view(bytes).substr(at, 1000));
    }
  });
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Stream(input), Options(8));
  producer.join();
  EXPECT_EQ(appended.code(), absl::StatusCode::kResourceExhausted) << appended;
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kResourceExhausted) << clip.status();
  EXPECT_THAT(clip.status().message(), HasSubstr(absl::StrCat("over ", bytes.size() / 2)));
}

TEST_F(StreamSourceTest, BadInputGetsTheMemorySourcesError) {
  const std::string audio_only = [] {
    const std::string path = *dir_ + "/tone.ogg";
    testing::MakeVideo("-f lavfi -i sine=duration=1 -c:a libvorbis", path);
    return testing::ReadFile(path);
  }();
  const std::string ts = Video("h264.ts", "-c:v libx264 -g 10");
  ASSERT_FALSE(HasFatalFailure());
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"empty", ""},
      {"random bytes", std::string(20000, '\x5a')},
      {"audio only", audio_only},
      {"a third of an MPEG-TS", ts.substr(0, ts.size() / 3)},
      {"an MPEG-TS with its middle zeroed", ts.substr(0, ts.size() / 3) +
                                                std::string(ts.size() / 3, '\0') +
                                                ts.substr(2 * ts.size() / 3)},
  };
  for (const auto& [name, bytes] : inputs) {
    SCOPED_TRACE(name);
    absl::StatusOr<DecodedClip> whole = DecodeClip(VideoSource::Bytes(bytes), Options(8));
    absl::StatusOr<DecodedClip> chunked = testing::DecodeInChunks(bytes, 4096, Options(8));
    ASSERT_EQ(chunked.status().code(), whole.status().code()) << chunked.status();
    if (whole.ok()) {
      EXPECT_EQ(chunked->frame_indices, whole->frame_indices);
      EXPECT_TRUE(chunked->pixels == whole->pixels);
    } else {
      EXPECT_EQ(chunked.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(ByteStreamTest, RefusesChunksAfterTheEndAndAfterTheReaderStopped) {
  ByteStream input(100);
  ASSERT_TRUE(input.Append("abc").ok());
  input.Finish();
  EXPECT_EQ(input.Append("d").code(), absl::StatusCode::kFailedPrecondition);
  uint8_t buffer[8];
  EXPECT_EQ(input.Read(buffer, sizeof(buffer), Clock::time_point::max()), 3);
  EXPECT_EQ(input.Read(buffer, sizeof(buffer), Clock::time_point::max()), 0);

  ByteStream closed(100);
  closed.CloseReader();
  EXPECT_EQ(closed.Append("abc").code(), absl::StatusCode::kCancelled);
}

TEST(ByteStreamTest, ReadWaitsForTheProducer) {
  ByteStream input(100);
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(input.Append("late").ok());
  });
  uint8_t buffer[8];
  EXPECT_EQ(input.Read(buffer, sizeof(buffer), Clock::now() + std::chrono::seconds(10)), 4);
  producer.join();
  EXPECT_EQ(input.Read(buffer, sizeof(buffer), Clock::now() + std::chrono::milliseconds(20)), -1);
  EXPECT_EQ(input.read_error().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(ByteStreamTest, TheDefaultBoundIsOnTheBytesReceivedInAll) {
  ByteStream input(10);
  input.DropReadBytes();
  ASSERT_TRUE(input.Append("123456").ok());
  uint8_t buffer[8];
  EXPECT_EQ(input.Read(buffer, sizeof(buffer), Clock::time_point::max()), 6);
  EXPECT_EQ(input.held_bytes(), 0);
  EXPECT_EQ(input.Append("78901").code(), absl::StatusCode::kResourceExhausted);
}

TEST(ByteStreamTest, HeldBoundCountsOnlyTheBytesNotYetRead) {
  ByteStream input(10, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append("abcdef").ok());
  EXPECT_EQ(input.held_bytes(), 6);
  uint8_t buffer[4];
  ASSERT_EQ(input.Read(buffer, 4, Clock::time_point::max()), 4);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buffer), 4), "abcd");
  EXPECT_EQ(input.held_bytes(), 2);
  ASSERT_TRUE(input.Append("ghijklmn").ok());  // 14 received, 10 held
  EXPECT_EQ(input.held_bytes(), 10);
  EXPECT_EQ(input.bytes_received(), 14);
  const absl::Status refused = input.Append("o");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("faster than it is decoded"));
  EXPECT_THAT(refused.message(), HasSubstr("10 bytes are held"));
  // The reader learns it too.
  EXPECT_EQ(input.Read(buffer, 4, Clock::time_point::max()), -1);
  EXPECT_EQ(input.read_error().code(), absl::StatusCode::kResourceExhausted);
}

// Megabytes pass through a stream that holds at most 64 KiB, the bytes read intact, while the
// memory is freed in batches.
TEST(ByteStreamTest, HeldBoundLetsAnEndlessFeedThrough) {
  constexpr int64_t kBound = 64 * 1024;
  ByteStream input(kBound, ByteStream::Bound::kHeldBytes);
  std::string chunk(16 * 1024, '\0');
  std::vector<uint8_t> buffer(chunk.size());
  for (int i = 0; i < 300; ++i) {  // 4.8 MB
    for (size_t k = 0; k < chunk.size(); ++k) chunk[k] = static_cast<char>(i * 7 + k);
    ASSERT_TRUE(input.Append(chunk).ok()) << i;
    EXPECT_LE(input.held_bytes(), kBound);
    if (i % 3 != 2) continue;  // reads fall behind, then catch up
    for (int j = 0; j < 3; ++j) {
      ASSERT_EQ(
          input.Read(buffer.data(), static_cast<int>(buffer.size()), Clock::time_point::max()),
          static_cast<int>(buffer.size()));
      const int n = i - 2 + j;
      EXPECT_EQ(buffer[100], static_cast<uint8_t>(n * 7 + 100)) << n;
    }
    EXPECT_EQ(input.held_bytes(), 0);
  }
  EXPECT_EQ(input.bytes_received(), 300 * 16 * 1024);
}

TEST(ByteStreamTest, CallWhenHeldBelowFiresOnceFromTheReaderThatMadeRoom) {
  ByteStream input(100, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(std::string(80, 'x')).ok());
  std::atomic<int> calls{0};
  std::thread::id caller;
  input.CallWhenHeldBelow(50, [&] {
    ++calls;
    caller = std::this_thread::get_id();
    // The stream's lock is not held: the callback may use the stream.
    EXPECT_EQ(input.held_bytes(), 40);
    EXPECT_TRUE(input.Append("y").ok());
  });
  std::thread::id reader_id;
  std::thread reader([&] {
    reader_id = std::this_thread::get_id();
    uint8_t buffer[20];
    ASSERT_EQ(input.Read(buffer, 20, Clock::time_point::max()), 20);
    EXPECT_EQ(calls, 0);  // 60 held
    ASSERT_EQ(input.Read(buffer, 20, Clock::time_point::max()), 20);
    EXPECT_EQ(calls, 1);  // 40 held
    ASSERT_EQ(input.Read(buffer, 20, Clock::time_point::max()), 20);
  });
  reader.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(caller, reader_id);
}

TEST(ByteStreamTest, CallWhenHeldBelowFiresAtOnceWhenThereIsRoom) {
  ByteStream input(100, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(input.Append(std::string(30, 'x')).ok());
  int calls = 0;
  std::thread::id caller;
  input.CallWhenHeldBelow(31, [&] {
    ++calls;
    caller = std::this_thread::get_id();
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(caller, std::this_thread::get_id());
  input.CallWhenHeldBelow(30, [&] { ++calls; });  // not below: waits
  EXPECT_EQ(calls, 1);
}

TEST(ByteStreamTest, CallWhenHeldBelowFiresWhenTheReaderClosesOrTheInputFails) {
  ByteStream closed(100, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(closed.Append(std::string(80, 'x')).ok());
  int calls = 0;
  closed.CallWhenHeldBelow(10, [&] { ++calls; });
  closed.CallWhenHeldBelow(20, [&] { ++calls; });  // several may wait
  EXPECT_EQ(calls, 0);
  closed.CloseReader();
  EXPECT_EQ(calls, 2);
  closed.CloseReader();
  EXPECT_EQ(calls, 2);                            // once each
  closed.CallWhenHeldBelow(0, [&] { ++calls; });  // closed: at once
  EXPECT_EQ(calls, 3);

  ByteStream aborted(100, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(aborted.Append(std::string(80, 'x')).ok());
  calls = 0;
  aborted.CallWhenHeldBelow(10, [&] { ++calls; });
  aborted.Abort(absl::CancelledError("the client went away"));
  EXPECT_EQ(calls, 1);

  ByteStream stalled(100, ByteStream::Bound::kHeldBytes);
  ASSERT_TRUE(stalled.Append("x").ok());
  calls = 0;
  stalled.CallWhenHeldBelow(1, [&] { ++calls; });
  uint8_t buffer[4];
  ASSERT_EQ(stalled.Read(buffer, 4, Clock::time_point::max()), 1);
  EXPECT_EQ(calls, 1);
}

TEST(ByteStreamTest, ArrivalOfTellsWhenEachByteCame) {
  ByteStream input(4 << 20, ByteStream::Bound::kHeldBytes);
  const auto append = [&](const std::string& chunk) {
    const Clock::time_point before = Clock::now();
    EXPECT_TRUE(input.Append(chunk).ok());
    const Clock::time_point after = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return std::make_pair(before, after);
  };
  const auto within = [](Clock::time_point time,
                         std::pair<Clock::time_point, Clock::time_point> w) {
    return time >= w.first && time <= w.second;
  };
  const int64_t big = 1 << 20;  // a whole drop batch
  const auto first = append(std::string(big, 'a'));
  const auto second = append("bcd");
  const auto third = append("efgh");
  EXPECT_TRUE(within(input.ArrivalOf(0), first));
  EXPECT_TRUE(within(input.ArrivalOf(big - 1), first));
  EXPECT_TRUE(within(input.ArrivalOf(big), second));
  EXPECT_TRUE(within(input.ArrivalOf(big + 2), second));
  EXPECT_TRUE(within(input.ArrivalOf(big + 3), third));
  EXPECT_TRUE(within(input.ArrivalOf(big + 6), third));
  EXPECT_EQ(input.ArrivalOf(big + 7), Clock::time_point::max());  // not yet arrived

  // Reading past a batch frees the first chunk; its bytes now get the arrival of the last chunk
  // freed, which is theirs here.
  std::vector<uint8_t> buffer(big + 1);
  int64_t read = 0;
  while (read < big + 1) {
    read += input.Read(buffer.data() + read, static_cast<int>(big + 1 - read),
                       Clock::time_point::max());
  }
  EXPECT_TRUE(within(input.ArrivalOf(0), first));
  EXPECT_TRUE(within(input.ArrivalOf(big + 1), second));  // still held
  EXPECT_TRUE(within(input.ArrivalOf(big + 5), third));
}

}  // namespace
}  // namespace vidclf::media
