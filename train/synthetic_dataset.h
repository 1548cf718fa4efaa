// Writes the synthetic videos (synthetic_videos.h) to disk as a UCF101-style data set: one
// folder of encoded videos per class and the split lists that UCF101 loaders read.
#ifndef VIDCLF_TRAIN_SYNTHETIC_DATASET_H_
#define VIDCLF_TRAIN_SYNTHETIC_DATASET_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "train/synthetic_timeline.h"
#include "train/synthetic_videos.h"

namespace vidclf::train {

struct SyntheticDatasetOptions {
  std::string output_dir;  // created if missing
  uint64_t seed = 1;
  int videos_per_class = 40;
  // The last share of each class's videos (by index) goes to the test list: round(videos *
  // test_fraction), at least one when the fraction is positive, and never every video.
  double test_fraction = 0.25;
  SyntheticVideoOptions video;  // min/max frames etc.
};

struct SyntheticDatasetSummary {
  int videos = 0;
  int train_videos = 0;
  int test_videos = 0;
  int64_t bytes = 0;  // of every file written: videos and lists
};

// The file name of video `index` of a class, UCF101's way: v_<class>_g<GG>_c<CC>.<extension>,
// five clips to a group (index 0 is g01_c01, index 5 is g02_c01).
std::string SyntheticVideoFileName(const std::string& label_name, int index,
                                   const std::string& extension);

// Writes a UCF101-style data set:
//   OUT/videos/<class>/v_<class>_g<GG>_c<CC>.<ext>
//   OUT/splits/classInd.txt     "1 fade_in" ... (1-based, label order)
//   OUT/splits/trainlist01.txt  "<class>/<file> <1-based class>" per line
//   OUT/splits/testlist01.txt   "<class>/<file>" per line
// Paths in the lists are relative to OUT/videos; lines end in "\n". Each file is written under a
// temporary name and renamed, so an interrupted run never leaves a truncated file under its final
// name; files already there are replaced. The output is byte-identical for the same options (on
// the same libavcodec). Videos are made on every core at once; `on_video(done, total)`, when
// set, is called after each video, from the thread that made it, one call at a time. Errors:
// INVALID_ARGUMENT for unusable options, INTERNAL when a video cannot be encoded, and the
// filesystem's error naming the path that could not be created or written.
absl::StatusOr<SyntheticDatasetSummary> WriteSyntheticDataset(
    const SyntheticDatasetOptions& options, const std::function<void(int, int)>& on_video = {});

struct SyntheticTimelinesOptions {
  std::string output_dir;  // created if missing
  uint64_t seed = 1;
  int timelines = 4;
  TimelineOptions timeline;
};

// Writes `timelines` timelines (synthetic_timeline.h) and their true segments:
//   OUT/timeline-NNN.mp4
//   OUT/truth.json    segment_file.h's format, videos named by their file names
// atomically, as WriteSyntheticDataset does, timelines on every core at once; `on_video(done,
// total)` as there. Returns the bytes written.
absl::StatusOr<int64_t> WriteSyntheticTimelines(const SyntheticTimelinesOptions& options,
                                                const std::function<void(int, int)>& on_video = {});

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SYNTHETIC_DATASET_H_
