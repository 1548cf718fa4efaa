#include "train/synthetic_timeline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "media/video_encoder.h"
#include "train/synthetic_random.h"
#include "train/synthetic_videos.h"

extern "C" {
#include <libavcodec/avcodec.h>
}

namespace vidclf::train {
namespace {

// Timestamps count 1/600 s, which each of the rates divides.
constexpr int kTicksPerSecond = 600;
constexpr std::array<int, 5> kRates = {10, 12, 15, 24, 25};
// Keeps the segments' textures apart from those of `vidclf-train synth`'s clips.
constexpr uint64_t kTimelineStream = 0x74696D656C696E65ULL;  // "timeline"

}  // namespace

absl::Status CheckTimelineOptions(const TimelineOptions& options) {
  if (!(options.min_segment_seconds >= 1)) {
    return absl::InvalidArgumentError("min_segment_seconds must be at least 1");
  }
  if (!(options.max_segment_seconds >= options.min_segment_seconds)) {
    return absl::InvalidArgumentError("max_segment_seconds must be at least min_segment_seconds");
  }
  // The file is held in memory until it is written: some 22 MB an hour at 192x144 in H.264.
  if (!(options.duration_seconds >= options.min_segment_seconds) ||
      options.duration_seconds > 4 * 3600) {
    return absl::InvalidArgumentError(
        "duration_seconds must be at least min_segment_seconds and at most 4 hours");
  }
  if (options.width < 16 || options.height < 16 || options.width % 2 != 0 ||
      options.height % 2 != 0 || options.width > 4096 || options.height > 4096) {
    return absl::InvalidArgumentError("width and height must be even, from 16 to 4096");
  }
  return absl::OkStatus();
}

absl::StatusOr<SyntheticTimeline> MakeSyntheticTimeline(int index, uint64_t seed,
                                                        const TimelineOptions& options) {
  if (auto status = CheckTimelineOptions(options); !status.ok()) return status;
  const uint64_t timeline_seed = Mix(Mix(seed, kTimelineStream), static_cast<uint64_t>(index));
  Rng rng(timeline_seed);
  const int base_rate = kRates[rng.Below(kRates.size())];
  media::EncodeOptions encode;
  encode.container = "mp4";
  encode.codec = avcodec_find_encoder_by_name("libx264") != nullptr ? "libx264" : "mpeg4";
  encode.frames_per_second = base_rate;
  encode.timestamps_per_second = kTicksPerSecond;
  encode.keyframe_interval = 2 * base_rate;
  encode.keyframes_at_scene_cuts = false;  // so that boundaries fall inside groups of pictures
  encode.quantizer = 4;
  absl::StatusOr<media::VideoWriter> writer =
      media::VideoWriter::Open(options.width, options.height, encode);
  if (!writer.ok()) return writer.status();

  const auto ticks = [](double seconds) { return std::llround(seconds * kTicksPerSecond); };
  const int64_t end_ticks = ticks(options.duration_seconds);
  const int64_t min_ticks = ticks(options.min_segment_seconds);
  SyntheticTimeline timeline;
  int64_t start_ticks = 0;
  int label = rng.Below(static_cast<int>(SyntheticLabels().size()));
  while (end_ticks - start_ticks >= min_ticks) {
    const int rate = rng.Below(3) == 0 ? kRates[rng.Below(kRates.size())] : base_rate;
    const int64_t frame_ticks = kTicksPerSecond / rate;
    int64_t length_ticks =
        ticks(rng.Uniform(options.min_segment_seconds, options.max_segment_seconds));
    if (end_ticks - start_ticks - length_ticks < min_ticks) length_ticks = end_ticks - start_ticks;
    const int num_frames =
        static_cast<int>(std::max<int64_t>(2, (length_ticks + frame_ticks / 2) / frame_ticks));
    SyntheticVideoOptions clip;
    clip.min_frames = clip.max_frames = num_frames;
    const int ordinal = static_cast<int>(timeline.segments.size());
    std::vector<media::RgbImage> frames = MakeSyntheticVideo(label, ordinal, timeline_seed, clip);
    for (int f = 0; f < num_frames; ++f) {
      if (auto status = writer->Add(frames[f], start_ticks + f * frame_ticks); !status.ok()) {
        return status;
      }
    }
    TimelineSegment& segment = timeline.segments.emplace_back();
    segment.label = label;
    segment.frames_per_second = rate;
    segment.num_frames = num_frames;
    segment.start_seconds = static_cast<double>(start_ticks) / kTicksPerSecond;
    start_ticks += num_frames * frame_ticks;
    segment.end_seconds = static_cast<double>(start_ticks) / kTicksPerSecond;
    // Another class next, so that every boundary is one.
    const int num_labels = static_cast<int>(SyntheticLabels().size());
    label = (label + 1 + rng.Below(num_labels - 1)) % num_labels;
  }
  absl::StatusOr<std::string> video = writer->Finish();
  if (!video.ok()) return video.status();
  timeline.video = *std::move(video);
  timeline.duration_seconds = static_cast<double>(start_ticks) / kTicksPerSecond;
  return timeline;
}

}  // namespace vidclf::train
