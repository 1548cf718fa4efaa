// Long videos labelled with what happens when, for heads trained per frame (segmentation): truth
// files in segment_file.h's format (`vidclf-train synth --timeline` writes them), one per split,
// each naming videos that lie beside it.
#ifndef VIDCLF_TRAIN_TIMELINE_DATASET_H_
#define VIDCLF_TRAIN_TIMELINE_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/dataset.h"

namespace vidclf::train {

struct TimelineDatasetOptions {
  std::string train_truth;       // required
  std::string validation_truth;  // optional: the videos that choose the epoch
  std::string test_truth;        // optional: the videos eval scores
  // Optional classInd.txt: the class order (a clip data set's, so that both kinds of model
  // name their outputs alike). Without it, the truth's labels in byte order.
  std::string class_index;
};

// A data set of timelines: each clip a video with its segments and label -1, its path relative
// to the directory that holds every truth file. INVALID_ARGUMENT or NOT_FOUND naming the file,
// video and segment for a truth file that names a video not beside it, a video with no
// segments, segments out of time order or overlapping, or a label not among the classes.
absl::StatusOr<Dataset> LoadTimelineDataset(const TimelineDatasetOptions& options);

// The label of each of `num_frames` frames sampled `frames_per_second` from the start, as fps
// sampling keeps them (the first frame of each 1 / frames_per_second of presentation time): frame
// k holds the label at (k + 0.5) / frames_per_second, or -1 where no segment is.
std::vector<int64_t> FrameLabels(const Clip& clip, int64_t num_frames, double frames_per_second);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_TIMELINE_DATASET_H_
