// Timelines of segments: deterministic, true to their segment lists when decoded, with boundaries
// inside groups of pictures and frame-rate changes; and the segment files that carry the truth.
#include "train/synthetic_timeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "media/libav_settings.h"
#include "media/live_decoder.h"
#include "media/video_encoder.h"
#include "train/segment_file.h"
#include "train/synthetic_dataset.h"
#include "train/synthetic_videos.h"

extern "C" {
#include <libavformat/avformat.h>
#include <libavutil/log.h>
}

namespace vidclf::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SyntheticTimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    media::LibavSettings settings;
    settings.log_level = AV_LOG_ERROR;  // libx264 reports every encode at INFO
    media::ConfigureLibav(settings);
  }

  // A minute of small frames: a few segments, made in about a second.
  static TimelineOptions Minute() {
    TimelineOptions options;
    options.duration_seconds = 60;
    options.width = 64;
    options.height = 48;
    return options;
  }
};

// Every decoded frame's time.
std::vector<double> FrameTimes(const std::string& video) {
  media::LiveDecodeOptions options;
  options.embed_stride = 1 << 30;  // times only: convert the first frame alone
  std::vector<double> times;
  const absl::Status status =
      media::DecodeLiveMemory(video, options, [&times](const media::LiveFrame& frame) {
        times.push_back(frame.timestamp_seconds);
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
  return times;
}

// The times of the keyframes, from the container's packets.
std::vector<double> KeyframeTimes(const std::string& video) {
  const fs::path path =
      fs::path(::testing::TempDir()) / ("vidclf_timeline_" + std::to_string(::getpid()) + ".mp4");
  std::ofstream(path, std::ios::binary) << video;
  AVFormatContext* format = nullptr;
  std::vector<double> times;
  if (avformat_open_input(&format, path.c_str(), nullptr, nullptr) == 0) {
    AVPacket* packet = av_packet_alloc();
    while (av_read_frame(format, packet) >= 0) {
      if (packet->flags & AV_PKT_FLAG_KEY) {
        times.push_back(static_cast<double>(packet->pts) *
                        av_q2d(format->streams[packet->stream_index]->time_base));
      }
      av_packet_unref(packet);
    }
    av_packet_free(&packet);
    avformat_close_input(&format);
  }
  fs::remove(path);
  return times;
}

TEST_F(SyntheticTimelineTest, SegmentsTileTheVideoAndTheDecodedFramesFollowThem) {
  absl::StatusOr<SyntheticTimeline> timeline = MakeSyntheticTimeline(0, 1, Minute());
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  const std::vector<TimelineSegment>& segments = timeline->segments;
  ASSERT_GE(segments.size(), 3u);
  EXPECT_EQ(segments.front().start_seconds, 0);
  EXPECT_NEAR(timeline->duration_seconds, 60, 0.2);
  EXPECT_EQ(segments.back().end_seconds, timeline->duration_seconds);
  int frames = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const TimelineSegment& segment = segments[i];
    SCOPED_TRACE(i);
    EXPECT_GE(segment.label, 0);
    EXPECT_LT(segment.label, static_cast<int>(SyntheticLabels().size()));
    if (i > 0) {
      EXPECT_EQ(segment.start_seconds, segments[i - 1].end_seconds);
      EXPECT_NE(segment.label, segments[i - 1].label);
    }
    const double length = segment.end_seconds - segment.start_seconds;
    EXPECT_NEAR(length, static_cast<double>(segment.num_frames) / segment.frames_per_second, 1e-9);
    EXPECT_GE(length, 4 - 0.1);
    // Only the last may take more than the longest draw: the rest of the video.
    if (i + 1 < segments.size()) {
      EXPECT_LE(length, 16 + 0.1);
    }
    frames += segment.num_frames;
  }
  // Decoded, each segment's first frame comes at its start, and frames follow its rate.
  const std::vector<double> times = FrameTimes(timeline->video);
  ASSERT_EQ(static_cast<int>(times.size()), frames);
  int first = 0;
  for (const TimelineSegment& segment : segments) {
    EXPECT_NEAR(times[first], segment.start_seconds, 1e-3);
    EXPECT_NEAR(times[first + 1] - times[first], 1.0 / segment.frames_per_second, 1e-3);
    first += segment.num_frames;
  }
}

TEST_F(SyntheticTimelineTest, IsDeterministicAndEachIndexIsAnotherTimeline) {
  absl::StatusOr<SyntheticTimeline> a = MakeSyntheticTimeline(3, 7, Minute());
  absl::StatusOr<SyntheticTimeline> again = MakeSyntheticTimeline(3, 7, Minute());
  absl::StatusOr<SyntheticTimeline> other = MakeSyntheticTimeline(4, 7, Minute());
  ASSERT_TRUE(a.ok() && again.ok() && other.ok());
  EXPECT_EQ(a->video, again->video);
  EXPECT_NE(a->video, other->video);
}

TEST_F(SyntheticTimelineTest, BoundariesFallInsideGroupsOfPicturesAndSomeChangeTheRate) {
  int rate_changes = 0;
  int boundaries = 0;
  int boundaries_off_keyframes = 0;
  for (int index = 0; index < 3; ++index) {
    absl::StatusOr<SyntheticTimeline> timeline = MakeSyntheticTimeline(index, 1, Minute());
    ASSERT_TRUE(timeline.ok()) << timeline.status();
    const std::vector<double> keyframes = KeyframeTimes(timeline->video);
    ASSERT_GE(keyframes.size(), 20u);  // one every 2 s of the base rate
    const std::set<int> keyframe_ms = [&keyframes] {
      std::set<int> ms;
      for (double t : keyframes) ms.insert(static_cast<int>(std::lround(t * 1000)));
      return ms;
    }();
    for (size_t i = 1; i < timeline->segments.size(); ++i) {
      const TimelineSegment& segment = timeline->segments[i];
      ++boundaries;
      rate_changes += segment.frames_per_second != timeline->segments[i - 1].frames_per_second;
      // The muxer may shift every time by the same delay; allow a frame of it.
      bool on_keyframe = false;
      for (int ms : keyframe_ms) on_keyframe |= std::abs(ms - segment.start_seconds * 1000) < 50;
      boundaries_off_keyframes += on_keyframe ? 0 : 1;
    }
  }
  EXPECT_GT(rate_changes, 0);
  EXPECT_GT(boundaries_off_keyframes, boundaries / 2);
}

TEST_F(SyntheticTimelineTest, RefusesBadOptions) {
  TimelineOptions options = Minute();
  options.min_segment_seconds = 0.5;
  EXPECT_THAT(MakeSyntheticTimeline(0, 1, options).status().message(),
              HasSubstr("min_segment_seconds"));
  options = Minute();
  options.max_segment_seconds = 3;
  EXPECT_THAT(MakeSyntheticTimeline(0, 1, options).status().message(),
              HasSubstr("max_segment_seconds"));
  options = Minute();
  options.duration_seconds = 2;
  EXPECT_THAT(MakeSyntheticTimeline(0, 1, options).status().message(),
              HasSubstr("duration_seconds"));
  options = Minute();
  options.width = 63;
  EXPECT_EQ(MakeSyntheticTimeline(0, 1, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SyntheticTimelineTest, WritesTimelinesWithTheirTruthInTheSegmentFormat) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("vidclf_timelines_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  SyntheticTimelinesOptions options;
  options.output_dir = dir.string();
  options.timelines = 2;
  options.timeline = Minute();
  options.timeline.duration_seconds = 20;
  ASSERT_TRUE(WriteSyntheticTimelines(options).ok());
  absl::StatusOr<std::vector<VideoSegments>> truth = ReadSegmentFile((dir / "truth.json").string());
  ASSERT_TRUE(truth.ok()) << truth.status();
  ASSERT_EQ(truth->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const VideoSegments& video = (*truth)[i];
    absl::StatusOr<SyntheticTimeline> made = MakeSyntheticTimeline(i, 1, options.timeline);
    ASSERT_TRUE(made.ok());
    EXPECT_EQ(video.video, "timeline-00" + std::to_string(i) + ".mp4");
    EXPECT_EQ(fs::file_size(dir / video.video), made->video.size());
    EXPECT_EQ(video.duration_seconds, made->duration_seconds);
    ASSERT_EQ(video.segments.size(), made->segments.size());
    for (size_t s = 0; s < video.segments.size(); ++s) {
      EXPECT_EQ(video.segments[s].label, SyntheticLabels()[made->segments[s].label]);
      EXPECT_EQ(video.segments[s].start_seconds, made->segments[s].start_seconds);
      EXPECT_EQ(video.segments[s].end_seconds, made->segments[s].end_seconds);
    }
  }
  fs::remove_all(dir);
}

TEST(VideoWriterTest, TakesTimestampsInOrderAndScalesOtherSizes) {
  media::EncodeOptions options;
  absl::StatusOr<media::VideoWriter> writer = media::VideoWriter::Open(32, 24, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  media::RgbImage small{16, 16, std::vector<uint8_t>(3 * 16 * 16, 200)};
  media::RgbImage dark{16, 16, std::vector<uint8_t>(3 * 16 * 16, 40)};
  EXPECT_TRUE(writer->Add(small, 0).ok());
  EXPECT_THAT(writer->Add(small, 0).message(), HasSubstr("not after"));
  media::RgbImage broken{16, 16, std::vector<uint8_t>(5)};
  EXPECT_EQ(writer->Add(broken, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(writer->Add(dark, 3).ok());
  EXPECT_TRUE(writer->Add(small, 4).ok());
  absl::StatusOr<std::string> video = writer->Finish();
  ASSERT_TRUE(video.ok()) << video.status();
  EXPECT_EQ(writer->Add(small, 5).code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<double> times = FrameTimes(*video);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_NEAR(times[1] - times[0], 3.0 / options.frames_per_second, 1e-3);
  EXPECT_NEAR(times[2] - times[1], 1.0 / options.frames_per_second, 1e-3);
  EXPECT_EQ(media::VideoWriter::Open(31, 24, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.codec = "no-such-codec";
  EXPECT_THAT(media::VideoWriter::Open(32, 24, options).status().message(),
              HasSubstr("no-such-codec"));
}

}  // namespace
}  // namespace vidclf::train
