#include "train/segment_report.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "train/segment_metrics.h"

namespace vidclf::train {
namespace {

// Pairs each true video with its predictions, labels numbered by name. INVALID_ARGUMENT when a
// video is in one file only: a forgotten or misnamed video would silently change every figure.
absl::StatusOr<std::vector<SegmentedVideo>> Paired(const std::vector<VideoSegments>& truth,
                                                   const std::vector<VideoSegments>& predicted) {
  std::map<std::string, const VideoSegments*> predictions;
  for (const VideoSegments& video : predicted) predictions[video.video] = &video;
  // `vidclf segments --json` names no video: it can only be the truth's one.
  if (const auto unnamed = predictions.find(""); unnamed != predictions.end()) {
    if (truth.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the predictions are one video's (`vidclf segments --json`) but the truth has ",
          truth.size(), ": write them with `vidclf classify --from-list LIST --segments`"));
    }
    predictions.emplace(truth.front().video, unnamed->second);
    predictions.erase(unnamed);
  }
  // A list names its files as paths; the truth by file name. A path whose file name is the
  // truth's, and no other prediction's, is that video.
  for (const VideoSegments& video : truth) {
    if (predictions.count(video.video) != 0) continue;
    const VideoSegments* match = nullptr;
    int matches = 0;
    for (const auto& [name, candidate] : predictions) {
      if (std::filesystem::path(name).filename() == video.video) {
        match = candidate;
        ++matches;
      }
    }
    if (matches == 1) {
      predictions.erase(match->video);
      predictions.emplace(video.video, match);
    }
  }
  std::map<std::string, int> labels;
  const auto label_of = [&labels](const std::string& name) {
    return labels.emplace(name, static_cast<int>(labels.size())).first->second;
  };
  const auto timed = [&label_of](const std::vector<NamedSegment>& segments) {
    std::vector<TimedSegment> out;
    for (const NamedSegment& segment : segments) {
      out.push_back({label_of(segment.label), segment.start_seconds, segment.end_seconds,
                     static_cast<float>(segment.mean_score.value_or(1))});
    }
    return out;
  };
  std::vector<SegmentedVideo> videos;
  for (const VideoSegments& video : truth) {
    const auto found = predictions.find(video.video);
    if (found == predictions.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the predictions have no video named ", video.video));
    }
    SegmentedVideo& paired = videos.emplace_back();
    paired.truth = timed(video.segments);
    paired.predicted = timed(found->second->segments);
    double end = 0;
    for (const NamedSegment& segment : video.segments) end = std::max(end, segment.end_seconds);
    paired.duration_seconds = video.duration_seconds.value_or(end);
    predictions.erase(found);
  }
  if (!predictions.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the truth has no video named ", predictions.begin()->first));
  }
  return videos;
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ScoreSegments(const std::vector<VideoSegments>& truth,
                                                     const std::vector<VideoSegments>& predicted,
                                                     double frame_step_seconds) {
  absl::StatusOr<std::vector<SegmentedVideo>> videos = Paired(truth, predicted);
  if (!videos.ok()) return videos.status();
  int64_t true_segments = 0;
  int64_t predicted_segments = 0;
  for (const SegmentedVideo& video : *videos) {
    true_segments += static_cast<int64_t>(video.truth.size());
    predicted_segments += static_cast<int64_t>(video.predicted.size());
  }
  // Percentages, as the two fields report them.
  nlohmann::ordered_json report = {{"videos", videos->size()},
                                   {"true_segments", true_segments},
                                   {"predicted_segments", predicted_segments},
                                   {"frame_accuracy", FrameAccuracy(*videos, frame_step_seconds)},
                                   {"edit", EditScore(*videos)}};
  for (double overlap : {0.10, 0.25, 0.50}) {
    report[absl::StrFormat("f1@%.2f", overlap)] = F1AtOverlap(*videos, overlap);
  }
  double map_sum = 0;
  for (double tiou : {0.3, 0.5, 0.7}) {
    const double map = MeanAveragePrecision(*videos, tiou);
    report[absl::StrFormat("map@%.1f", tiou)] = map;
    map_sum += map;
  }
  report["map_mean"] = map_sum / 3;
  return report;
}

std::string FormatSegmentReport(const nlohmann::ordered_json& report) {
  std::string text = absl::StrFormat(
      "%d videos, %d true segments, %d predicted\n", report["videos"].get<int64_t>(),
      report["true_segments"].get<int64_t>(), report["predicted_segments"].get<int64_t>());
  for (const auto& [name, value] : report.items()) {
    if (value.is_number_float()) {
      absl::StrAppend(&text, absl::StrFormat("%-22s %6.2f\n", name, value.get<double>()));
    }
  }
  return text;
}

}  // namespace vidclf::train
