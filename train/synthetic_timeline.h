// Long synthetic videos of consecutive segments of the benchmark's classes (synthetic_videos.h),
// with the true segment list of each: what ClassifySegments and `vidclf-train eval --segments` are
// measured on. Segments have random lengths and classes; their boundaries fall anywhere in a
// group of pictures (keyframes come every two seconds of the timeline's base rate, whatever the
// segments), and some segments change the frame rate.
#ifndef VIDCLF_TRAIN_SYNTHETIC_TIMELINE_H_
#define VIDCLF_TRAIN_SYNTHETIC_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::train {

struct TimelineOptions {
  double duration_seconds = 600;
  // Each segment's length is drawn from [min, max] seconds; one that would leave less than min
  // before the end takes the rest. Lengths are then rounded to whole frames.
  double min_segment_seconds = 4;
  double max_segment_seconds = 16;
  // Frame size of the video; each segment's frames (96 to 192 pixels a side) are scaled to it.
  int width = 192;
  int height = 144;
};

// INVALID_ARGUMENT naming the field when `options` cannot be used.
absl::Status CheckTimelineOptions(const TimelineOptions& options);

struct TimelineSegment {
  int label = 0;  // an index into SyntheticLabels()
  double start_seconds = 0;
  double end_seconds = 0;  // the next segment's start, or the video's end
  int frames_per_second = 0;
  int num_frames = 0;
};

struct SyntheticTimeline {
  std::string video;  // an MP4: H.264 where the linked libavcodec has libx264, else MPEG-4
  double duration_seconds = 0;  // the end of the last segment
  std::vector<TimelineSegment> segments;
};

// Timeline `index` of `seed`. Deterministic, like the clips: the same arguments give the same
// bytes. Each segment is a synthetic clip of its class, as long as the segment, whose texture
// and nuisance no clip of `vidclf-train synth` shares (they come from a seed of their own). The
// timeline has a base rate (10, 12, 15, 24 or 25 frames/s); a third of its segments, on
// average, play at another. Adjacent segments never share a class. Frames are made and encoded
// one segment at a time.
absl::StatusOr<SyntheticTimeline> MakeSyntheticTimeline(int index, uint64_t seed,
                                                        const TimelineOptions& options);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SYNTHETIC_TIMELINE_H_
