// How a segmentation run (a head trained per frame on timelines) labels a split: accuracy over
// the sampled frames, and the segments the server's tracker makes of its per-frame scores,
// scored against the truth as `vidclf-train eval --segments` scores a file of predictions.
#ifndef VIDCLF_TRAIN_TIMELINE_EVAL_H_
#define VIDCLF_TRAIN_TIMELINE_EVAL_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/heads/temporal_head.h"
#include "pipeline/segment_tracker.h"
#include "train/segment_file.h"
#include "train/work_dir.h"

namespace vidclf::train {

struct TimelineEvaluation {
  // ScoreSegments' measures, and sampled_frame_accuracy: the share of labelled sampled frames
  // whose most probable class is their label (before the tracker).
  nlohmann::ordered_json report;
  std::vector<VideoSegments> predicted;  // in the segment file's format, a video per timeline
};

// Frame k of a timeline sampled `frames_per_second` covers [k, k + 1) / frames_per_second; its
// per-frame probabilities go through a SegmentTracker with `options`, as the server's spans do.
absl::StatusOr<TimelineEvaluation> EvaluateTimelines(model::TemporalHead& head,
                                                     const std::vector<std::string>& classes,
                                                     const LoadedSplit& split,
                                                     double frames_per_second,
                                                     const pipeline::SegmentOptions& options);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_TIMELINE_EVAL_H_
