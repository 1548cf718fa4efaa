// The JSON format of true and predicted segments that `vidclf-train synth --timeline` writes and
// `vidclf-train eval --segments` compares (docs/segments.md describes it for users):
//   {"videos": [{"video": "timeline-000.mp4", "duration_seconds": 600.0,
//                "segments": [{"label": "fade_in", "start_seconds": 0.0, "end_seconds": 7.5,
//                              "mean_score": 0.91, "peak_score": 0.97}, ...]}, ...]}
// A segment object is what `vidclf segments --json` prints per line; scores are optional (truth
// has none; predictions are ranked by mean_score), other fields are ignored. Predictions may also
// come as the client writes them: the JSON lines of `vidclf classify --from-list --segments` (a
// video per line, named by its "source"), or of `vidclf segments VIDEO --json` (one video's
// segments, a line each, its windows skipped), whose video is left unnamed ("").
#ifndef VIDCLF_TRAIN_SEGMENT_FILE_H_
#define VIDCLF_TRAIN_SEGMENT_FILE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf::train {

struct NamedSegment {
  std::string label;
  double start_seconds = 0;
  double end_seconds = 0;
  std::optional<double> mean_score;
  std::optional<double> peak_score;
  int position = 0;  // its index in the video's segments as the file lists them
};

struct VideoSegments {
  std::string video;  // as the user named it: matches truth and predictions
  std::optional<double> duration_seconds;
  std::vector<NamedSegment> segments;  // in time order
};

// Reads a segment file. INVALID_ARGUMENT naming the video and segment for anything that does not
// follow the format: a missing or mistyped field, a video named twice, a segment that ends
// before it starts, non-finite times or a score outside [0, 1]. Segments come back sorted by
// start.
absl::StatusOr<std::vector<VideoSegments>> ParseSegmentFile(const std::string& text);
absl::StatusOr<std::vector<VideoSegments>> ReadSegmentFile(const std::string& path);

// The file's text for `videos`, one video per line.
std::string SegmentFileText(const std::vector<VideoSegments>& videos);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SEGMENT_FILE_H_
