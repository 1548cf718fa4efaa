// The feed remuxer on real files made at test time by the ffmpeg CLI: each codec lands in live
// Matroska and decodes to the source's own frames, each frame as soon as its bytes arrive;
// realtime pacing; standard input; errors, the sink's stop and cancellation.
#include "media/feed_remuxer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cancellation.h"
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "media/demuxer.h"
#include "media/live_decoder.h"
#include "tests/test_util/test_files.h"

namespace vidclf::media {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// 2 s at 25 fps; the sine adds an audio stream that the feed must drop.
constexpr char kPattern[] =
    "-f lavfi -i testsrc2=size=96x64:rate=25 -f lavfi -i sine=frequency=440 -frames:v 50 ";
// 1 s at 25 fps, for the pacing tests.
constexpr char kOneSecond[] = "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 25 ";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Every frame, small, so that the pixels of two decodings can be compared.
ClipOptions EveryFrame() {
  ClipOptions options;
  options.sampling.strategy = SamplingStrategy::kAll;
  options.sampling.num_frames = 0;
  options.preprocess.resize_shorter_side = 32;
  options.preprocess.crop_size = 32;
  return options;
}

struct Feed {
  std::string bytes;
  int sink_calls = 0;
};

// Remuxes `source` whole into memory.
absl::StatusOr<Feed> Remux(const std::string& source, FeedRemuxerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer =
      FeedRemuxer::Open(source, std::move(options));
  if (!remuxer.ok()) return remuxer.status();
  Feed feed;
  const absl::Status status = (*remuxer)->Run([&feed](absl::string_view bytes) {
    feed.bytes.append(bytes.data(), bytes.size());
    ++feed.sink_calls;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return feed;
}

// The streams of a container in memory, and whether its first packet is a keyframe.
struct Contents {
  unsigned streams = 0;
  std::string format;
  bool starts_with_keyframe = false;
};

Contents Inspect(const std::string& bytes) {
  Contents contents;
  absl::StatusOr<std::unique_ptr<Demuxer>> demuxer = Demuxer::OpenMemory(bytes);
  EXPECT_TRUE(demuxer.ok()) << demuxer.status();
  if (!demuxer.ok()) return contents;
  AVFormatContext* format = (*demuxer)->format();
  contents.streams = format->nb_streams;
  contents.format = format->iformat->name;
  PacketPtr packet(av_packet_alloc());
  if (av_read_frame(format, packet.get()) >= 0) {
    contents.starts_with_keyframe = (packet->flags & AV_PKT_FLAG_KEY) != 0;
  }
  return contents;
}

class FeedRemuxerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { dir_ = new std::string(testing::MakeScratchDir("feed_remuxer")); }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  // Makes (once per suite) `file` with ffmpeg `arguments`; returns its path.
  static std::string Video(const std::string& file, const std::string& arguments) {
    const std::string path = *dir_ + "/" + file;
    if (!std::filesystem::exists(path)) testing::MakeVideo(arguments, path);
    return path;
  }

  static std::string* dir_;
};
std::string* FeedRemuxerTest::dir_ = nullptr;

struct Source {
  const char* file;
  const char* options;
};
void PrintTo(const Source& source, std::ostream* out) { *out << source.file; }
}  // namespace

namespace {

class FeedRemuxerCodecTest : public FeedRemuxerTest,
                             public ::testing::WithParamInterface<Source> {};

// H.264 and HEVC from MP4 or as MPEG-TS and raw streams carry them (Annex B), MPEG-1 and 2,
// MPEG-4 part 2 (whose header an MP4 keeps apart), a webcam's MJPEG and raw frames, VP8 and VP9:
// the frames the server would decode are the source's, pixel for pixel, and the audio is gone.
TEST_P(FeedRemuxerCodecTest, DecodesToTheSourcesFrames) {
  const Source& source = GetParam();
  const std::string path = Video(source.file, absl::StrCat(kPattern, source.options));
  absl::StatusOr<Feed> feed = Remux(path);
  ASSERT_TRUE(feed.ok()) << feed.status();
  const Contents contents = Inspect(feed->bytes);
  EXPECT_EQ(contents.streams, 1u);
  EXPECT_EQ(contents.format, "matroska,webm");

  absl::StatusOr<DecodedClip> original =
      DecodeClip(VideoSource::Bytes(testing::ReadFile(path)), EveryFrame());
  ASSERT_TRUE(original.ok()) << original.status();
  absl::StatusOr<DecodedClip> remuxed = DecodeClip(VideoSource::Bytes(feed->bytes), EveryFrame());
  ASSERT_TRUE(remuxed.ok()) << remuxed.status();
  EXPECT_EQ(original->total_frames, 50);
  EXPECT_EQ(remuxed->total_frames, original->total_frames);
  ASSERT_EQ(remuxed->num_frames, original->num_frames);
  EXPECT_TRUE(remuxed->pixels == original->pixels);
  // The feed's clock may start elsewhere; the frames keep their spacing.
  for (int64_t i = 0; i < remuxed->num_frames; ++i) {
    EXPECT_NEAR(remuxed->timestamps_seconds[i] - remuxed->timestamps_seconds[0],
                original->timestamps_seconds[i] - original->timestamps_seconds[0], 1e-3)
        << "frame " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, FeedRemuxerCodecTest,
    ::testing::Values(
        Source{"h264.mp4", "-c:v libx264 -g 10 -bf 2 -c:a aac"},
        Source{"hevc.mp4", "-c:v libx265 -g 10 -x265-params log-level=error -c:a aac"},
        Source{"mpeg1.mpg", "-c:v mpeg1video -g 10 -bf 2"},
        Source{"mpeg2.mp4", "-c:v mpeg2video -g 10"}, Source{"mpeg4.mp4", "-c:v mpeg4 -g 10"},
        Source{"mpeg4.avi", "-c:v mpeg4 -g 10"}, Source{"h264.ts", "-c:v libx264 -g 10"},
        Source{"hevc.ts", "-c:v libx265 -g 10 -x265-params log-level=error"},
        Source{"annexb.h264", "-c:v libx264 -g 10"},
        Source{"annexb.hevc", "-c:v libx265 -g 10 -x265-params log-level=error"},
        Source{"mjpeg.avi", "-c:v mjpeg"}, Source{"raw_yuyv.nut", "-c:v rawvideo -pix_fmt yuyv422"},
        Source{"vp8.webm", "-c:v libvpx -g 10 -c:a libopus"},
        Source{"vp9.mkv", "-c:v libvpx-vp9 -g 10"}),
    [](const ::testing::TestParamInfo<Source>& info) {
      std::string name = info.param.file;
      for (char& c : name) {
        if (c == '.') c = '_';
      }
      return name;
    });

TEST_F(FeedRemuxerTest, RealtimeTakesAsLongAsTheVideo) {
  const std::string path = Video("one_second.mp4", absl::StrCat(kOneSecond, "-c:v libx264"));
  FeedRemuxerOptions realtime;
  realtime.realtime = true;
  Clock::time_point start = Clock::now();
  ASSERT_TRUE(Remux(path, realtime).ok());
  // The last of 25 frames is due 0.96 s after the first.
  EXPECT_GE(SecondsSince(start), 0.9);

  start = Clock::now();
  ASSERT_TRUE(Remux(path).ok());
  EXPECT_LT(SecondsSince(start), 0.5);
}

// A feed is useful only if its bytes leave as the packets are written: the Matroska muxer alone
// would hold a whole second (a cluster), MPEG-TS's buffer 64 KiB.
TEST_F(FeedRemuxerTest, HandsOnEachPacketAsItIsWritten) {
  for (const std::string& path :
       {Video("one_second.mkv", absl::StrCat(kOneSecond, "-c:v libvpx")),
        Video("one_second.ts", absl::StrCat(kOneSecond, "-c:v libx264"))}) {
    SCOPED_TRACE(path);
    FeedRemuxerOptions options;
    options.realtime = true;
    absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer = FeedRemuxer::Open(path, options);
    ASSERT_TRUE(remuxer.ok()) << remuxer.status();
    const Clock::time_point start = Clock::now();
    int early = 0;
    int late = 0;
    ASSERT_TRUE((*remuxer)
                    ->Run([&](absl::string_view /*bytes*/) {
                      ++(SecondsSince(start) < 0.45 ? early : late);
                      return absl::OkStatus();
                    })
                    .ok());
    EXPECT_EQ((*remuxer)->packets_written(), 25);
    // About 12 packets are due in each half; a muxer that held them would hand on all at the end.
    EXPECT_GE(early, 5);
    EXPECT_GE(late, 5);
  }
}

// Where each video packet of a container in memory ends, at least: its position plus its size
// (the position may be that of the block around it).
std::vector<int64_t> PacketEnds(const std::string& bytes) {
  std::vector<int64_t> ends;
  absl::StatusOr<std::unique_ptr<Demuxer>> demuxer = Demuxer::OpenMemory(bytes);
  EXPECT_TRUE(demuxer.ok()) << demuxer.status();
  if (!demuxer.ok()) return ends;
  PacketPtr packet(av_packet_alloc());
  while (av_read_frame((*demuxer)->format(), packet.get()) >= 0) {
    EXPECT_GE(packet->pos, 0);
    ends.push_back(packet->pos + packet->size);
    av_packet_unref(packet.get());
  }
  return ends;
}

// The server's live decoder hands out each frame of a feed once that frame's own bytes have
// arrived. An MPEG-TS feed would hold every frame until the next one's bytes came, twice over:
// its demuxer ends a PES packet whose length is not written when the next one starts, and H.264's
// parser ends a frame when it sees the next one's start (two frame periods of latency).
TEST_F(FeedRemuxerTest, TheServerDecodesEachFrameBeforeTheNextOneArrives) {
  const std::string path =
      Video("low_delay.mp4",
            "-f lavfi -i testsrc2=size=96x64:rate=25 -frames:v 75 -c:v libx264 "
            "-tune zerolatency -g 10");
  absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer = FeedRemuxer::Open(path, {});
  ASSERT_TRUE(remuxer.ok()) << remuxer.status();
  std::vector<std::string> chunks;  // as the client would send them
  ASSERT_TRUE((*remuxer)
                  ->Run([&chunks](absl::string_view bytes) {
                    chunks.emplace_back(bytes);
                    return absl::OkStatus();
                  })
                  .ok());
  const std::vector<int64_t> packet_ends = PacketEnds(absl::StrJoin(chunks, ""));
  ASSERT_EQ(packet_ends.size(), 75u);

  ByteStream input(1 << 20, ByteStream::Bound::kHeldBytes);
  std::mutex mutex;
  std::condition_variable frame_out;
  size_t frames_out = 0;
  absl::Status decoded;
  std::thread server([&] {
    LiveDecodeOptions options;
    options.preprocess.resize_shorter_side = 32;
    options.preprocess.crop_size = 32;
    decoded = DecodeLive(input, options, [&](const LiveFrame& /*frame*/) {
      const std::lock_guard<std::mutex> lock(mutex);
      ++frames_out;
      frame_out.notify_all();
      return absl::OkStatus();
    });
  });
  int64_t sent = 0;
  int checked = 0;
  for (const std::string& chunk : chunks) {
    ASSERT_TRUE(input.Append(chunk).ok());
    sent += static_cast<int64_t>(chunk.size());
    const size_t arrived = static_cast<size_t>(
        std::upper_bound(packet_ends.begin(), packet_ends.end(), sent) - packet_ends.begin());
    // Probing the stream reads its first three frames (H.264's probe alone would read eight, to
    // guess how far the decoder reorders); from then on, each frame is out before the next arrives.
    const size_t due = arrived < 3 ? 0 : arrived;
    std::unique_lock<std::mutex> lock(mutex);
    // No more bytes come until they are out; the deadline only keeps a held frame from hanging.
    if (!frame_out.wait_for(lock, std::chrono::seconds(10), [&] { return frames_out >= due; })) {
      ADD_FAILURE() << frames_out << " frames out of the " << arrived << " whose bytes had arrived";
      break;
    }
    ++checked;
  }
  input.Finish();
  server.join();
  EXPECT_TRUE(decoded.ok()) << decoded;
  EXPECT_EQ(frames_out, 75u);
  EXPECT_EQ(checked, static_cast<int>(chunks.size()));
}

TEST_F(FeedRemuxerTest, AFeedJoinedMidwayStartsAtAKeyframe) {
  // The second half of an MPEG-TS file, cut at a packet boundary but inside a group of pictures.
  const std::string whole =
      testing::ReadFile(Video("gop25.ts", absl::StrCat(kPattern, "-c:v libx264 -g 25")));
  const size_t middle = (whole.size() / 2 / 188) * 188;
  const std::string path = *dir_ + "/joined.ts";
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    std::fwrite(whole.data() + middle, 1, whole.size() - middle, file);
    std::fclose(file);
  }
  absl::StatusOr<Feed> feed = Remux(path);
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_TRUE(Inspect(feed->bytes).starts_with_keyframe);
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(feed->bytes), EveryFrame());
  ASSERT_TRUE(clip.ok()) << clip.status();
  // From the keyframe at frame 25 to the end.
  EXPECT_EQ(clip->total_frames, 25);
}

TEST_F(FeedRemuxerTest, ReadsStandardInput) {
  const std::string bytes =
      testing::ReadFile(Video("stdin.ts", absl::StrCat(kPattern, "-c:v libx264 -g 10")));
  int pipe_ends[2];
  ASSERT_EQ(pipe(pipe_ends), 0);
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_EQ(dup2(pipe_ends[0], STDIN_FILENO), STDIN_FILENO);
  close(pipe_ends[0]);
  // Written slowly, in pieces, as a camera pipeline would.
  std::thread writer([&] {
    for (size_t offset = 0; offset < bytes.size(); offset += 4096) {
      const size_t size = std::min<size_t>(4096, bytes.size() - offset);
      if (write(pipe_ends[1], bytes.data() + offset, size) != static_cast<ssize_t>(size)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    close(pipe_ends[1]);
  });
  absl::StatusOr<Feed> feed = Remux("-");
  writer.join();
  dup2(saved_stdin, STDIN_FILENO);
  close(saved_stdin);
  ASSERT_TRUE(feed.ok()) << feed.status();
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(feed->bytes), EveryFrame());
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->total_frames, 50);
}

TEST_F(FeedRemuxerTest, CancellationStopsAReadThatWaitsForStandardInput) {
  int pipe_ends[2];
  ASSERT_EQ(pipe(pipe_ends), 0);
  const int saved_stdin = dup(STDIN_FILENO);
  ASSERT_EQ(dup2(pipe_ends[0], STDIN_FILENO), STDIN_FILENO);
  close(pipe_ends[0]);
  CancellationToken cancellation;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancellation.Cancel(absl::CancelledError("interrupted"));
  });
  FeedRemuxerOptions options;
  options.cancellation = &cancellation;
  const Clock::time_point start = Clock::now();
  // Nothing is ever written: opening waits for the first bytes.
  absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer = FeedRemuxer::Open("-", options);
  const double seconds = SecondsSince(start);
  canceller.join();
  dup2(saved_stdin, STDIN_FILENO);
  close(saved_stdin);
  close(pipe_ends[1]);
  EXPECT_EQ(remuxer.status(), absl::CancelledError("interrupted"));
  EXPECT_LT(seconds, 2.0);
}

TEST_F(FeedRemuxerTest, CancellationStopsTheRealtimeWait) {
  const std::string path = Video("two_seconds.ts", absl::StrCat(kPattern, "-c:v libx264"));
  CancellationToken cancellation;
  FeedRemuxerOptions options;
  options.realtime = true;
  options.cancellation = &cancellation;
  absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer = FeedRemuxer::Open(path, options);
  ASSERT_TRUE(remuxer.ok()) << remuxer.status();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancellation.Cancel(absl::CancelledError("interrupted"));
  });
  const Clock::time_point start = Clock::now();
  const absl::Status status =
      (*remuxer)->Run([](absl::string_view /*bytes*/) { return absl::OkStatus(); });
  const double seconds = SecondsSince(start);
  canceller.join();
  EXPECT_EQ(status, absl::CancelledError("interrupted"));
  EXPECT_LT(seconds, 1.0);
  EXPECT_LT((*remuxer)->packets_written(), 50);
}

TEST_F(FeedRemuxerTest, TheSinksErrorStopsIt) {
  const std::string path = Video("sink.mp4", absl::StrCat(kPattern, "-c:v libx264 -g 10"));
  absl::StatusOr<std::unique_ptr<FeedRemuxer>> remuxer = FeedRemuxer::Open(path, {});
  ASSERT_TRUE(remuxer.ok()) << remuxer.status();
  int calls = 0;
  const absl::Status status = (*remuxer)->Run([&calls](absl::string_view /*bytes*/) {
    return ++calls < 3 ? absl::OkStatus() : absl::UnavailableError("the server went away");
  });
  EXPECT_EQ(status, absl::UnavailableError("the server went away"));
  EXPECT_EQ(calls, 3);
  EXPECT_LT((*remuxer)->packets_written(), 5);
}

TEST_F(FeedRemuxerTest, TheInputFormatAndOptionsReachTheDemuxer) {
  // Raw frames, as a camera sends them, say nothing of their size, pixels or rate.
  const std::string path =
      Video("camera.yuv", absl::StrCat(kOneSecond, "-pix_fmt yuyv422 -f rawvideo"));
  FeedRemuxerOptions options;
  options.input_format = "rawvideo";
  options.input_options = {
      {"video_size", "96x64"}, {"pixel_format", "yuyv422"}, {"framerate", "10"}};
  absl::StatusOr<Feed> feed = Remux(path, options);
  ASSERT_TRUE(feed.ok()) << feed.status();
  absl::StatusOr<DecodedClip> clip = DecodeClip(VideoSource::Bytes(feed->bytes), EveryFrame());
  ASSERT_TRUE(clip.ok()) << clip.status();
  ASSERT_EQ(clip->total_frames, 25);
  EXPECT_EQ(clip->source_width, 96);
  EXPECT_NEAR(clip->timestamps_seconds[24] - clip->timestamps_seconds[0], 2.4, 1e-3);

  options.input_options.emplace_back("no_such_option", "1");
  absl::StatusOr<Feed> unknown_option = Remux(path, options);
  EXPECT_EQ(unknown_option.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown_option.status().message(), HasSubstr("no_such_option"));

  options.input_format = "no_such_format";
  EXPECT_EQ(Remux(path, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FeedRemuxerTest, ErrorsSayWhatIsWrong) {
  absl::StatusOr<Feed> missing = Remux(*dir_ + "/no_such_file.mp4");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no_such_file.mp4' was not found"));

  const std::string text = *dir_ + "/notes.txt";
  {
    std::FILE* file = std::fopen(text.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("not a video at all, just a few words of text\n", file);
    std::fclose(file);
  }
  EXPECT_EQ(Remux(text).status().code(), absl::StatusCode::kInvalidArgument);

  const std::string audio = Video("tone.wav", "-f lavfi -i sine=frequency=440 -t 1");
  absl::StatusOr<Feed> sound = Remux(audio);
  EXPECT_EQ(sound.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sound.status().message(), HasSubstr("no video stream"));

  EXPECT_EQ(Remux("nosuchprotocol://host/video").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing listens on port 1 of this machine.
  EXPECT_EQ(Remux("http://127.0.0.1:1/video.ts").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace vidclf::media
