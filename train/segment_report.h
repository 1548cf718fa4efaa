// The segment measures of a set of predictions against the truth, as `vidclf-train eval
// --segments` reports them: predictions from a file, or from a segmentation run's frames.
#ifndef VIDCLF_TRAIN_SEGMENT_REPORT_H_
#define VIDCLF_TRAIN_SEGMENT_REPORT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/segment_file.h"

namespace vidclf::train {

// Counts and percentages: videos, true_segments, predicted_segments, frame_accuracy (an instant
// every `frame_step_seconds`), edit, f1@0.10/0.25/0.50, map@0.3/0.5/0.7 and map_mean.
// INVALID_ARGUMENT when a video is in one of them only: a forgotten or misnamed video would
// silently change every figure.
absl::StatusOr<nlohmann::ordered_json> ScoreSegments(const std::vector<VideoSegments>& truth,
                                                     const std::vector<VideoSegments>& predicted,
                                                     double frame_step_seconds);

// The report as lines of text: the counts, then a measure a line.
std::string FormatSegmentReport(const nlohmann::ordered_json& report);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SEGMENT_REPORT_H_
