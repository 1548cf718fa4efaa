// vidclf-train eval --segments: predicted segments against the true ones, by the measures of
// segment_metrics.h, from two files in segment_file.h's format.
#include <iostream>
#include <vector>

#include "train/commands.h"
#include "train/segment_file.h"
#include "train/segment_report.h"

namespace vidclf::train {

int RunEvalSegments(const EvalFlags& flags) {
  if (flags.truth.empty() || flags.predicted.empty()) {
    std::cerr << "vidclf-train eval --segments: give --truth and --predicted\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<VideoSegments>> truth = ReadSegmentFile(flags.truth);
  absl::StatusOr<std::vector<VideoSegments>> predicted =
      truth.ok() ? ReadSegmentFile(flags.predicted) : truth;
  absl::StatusOr<nlohmann::ordered_json> report =
      predicted.ok() ? ScoreSegments(*truth, *predicted, flags.frame_step_seconds)
                     : absl::StatusOr<nlohmann::ordered_json>(predicted.status());
  if (!report.ok()) {
    std::cerr << "vidclf-train eval --segments: " << report.status().message() << "\n";
    return kExitUsage;
  }
  std::cout << (flags.json ? report->dump() + "\n" : FormatSegmentReport(*report));
  return 0;
}

}  // namespace vidclf::train
