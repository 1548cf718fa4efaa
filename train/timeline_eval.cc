#include "train/timeline_eval.h"

#include <algorithm>
#include <filesystem>

#include "absl/types/span.h"
#include "model/train/head_trainer.h"
#include "train/segment_report.h"

namespace vidclf::train {
namespace {

NamedSegment Named(const std::vector<std::string>& classes, const pipeline::Segment& segment) {
  NamedSegment named;
  named.label = classes[static_cast<size_t>(segment.label)];
  named.start_seconds = segment.start_seconds;
  named.end_seconds = segment.end_seconds;
  named.mean_score = segment.mean_score;
  named.peak_score = segment.peak_score;
  return named;
}

// The truth of a timeline as the segment file writes it, named as its file is.
VideoSegments Truth(const std::vector<std::string>& classes, const Clip& clip) {
  VideoSegments video;
  video.video = std::filesystem::path(clip.path).filename().string();
  for (const ClipSegment& segment : clip.segments) {
    NamedSegment& named = video.segments.emplace_back();
    named.label = classes[static_cast<size_t>(segment.label)];
    named.start_seconds = segment.start_seconds;
    named.end_seconds = segment.end_seconds;
    named.position = static_cast<int>(video.segments.size()) - 1;
  }
  return video;
}

}  // namespace

absl::StatusOr<TimelineEvaluation> EvaluateTimelines(model::TemporalHead& head,
                                                     const std::vector<std::string>& classes,
                                                     const LoadedSplit& split,
                                                     double frames_per_second,
                                                     const pipeline::SegmentOptions& options) {
  if (absl::Status status = pipeline::CheckSegmentOptions(options); !status.ok()) return status;
  const std::vector<torch::Tensor> probabilities = model::FrameProbabilities(head, split.set);
  TimelineEvaluation evaluation;
  std::vector<VideoSegments> truth;
  int64_t labelled = 0;
  int64_t right = 0;
  for (size_t v = 0; v < probabilities.size(); ++v) {
    const torch::Tensor frames = probabilities[v].contiguous();  // [T, C]
    const int64_t num_frames = frames.size(0);
    const torch::Tensor labels =
        split.set.frame_labels[static_cast<int64_t>(v)].slice(0, 0, num_frames);
    const torch::Tensor known = labels >= 0;
    labelled += known.sum().item<int64_t>();
    right += frames.argmax(1).eq(labels).logical_and(known).sum().item<int64_t>();

    truth.push_back(Truth(classes, split.clips[v]));
    VideoSegments& predicted = evaluation.predicted.emplace_back();
    predicted.video = truth.back().video;
    predicted.duration_seconds = static_cast<double>(num_frames) / frames_per_second;
    pipeline::SegmentTracker tracker(static_cast<int>(classes.size()), options);
    const auto keep = [&](const std::vector<pipeline::SegmentEvent>& events) {
      for (const pipeline::SegmentEvent& event : events) {
        if (event.kind == pipeline::SegmentEvent::Kind::kEnd) {
          predicted.segments.push_back(Named(classes, event.segment));
        }
      }
    };
    const float* scores = frames.data_ptr<float>();
    for (int64_t k = 0; k < num_frames; ++k) {
      keep(tracker.Add(
          static_cast<double>(k) / frames_per_second,
          static_cast<double>(k + 1) / frames_per_second,
          absl::MakeConstSpan(scores + k * frames.size(1), static_cast<size_t>(frames.size(1)))));
    }
    keep(tracker.Finish());
    std::sort(predicted.segments.begin(), predicted.segments.end(),
              [](const NamedSegment& a, const NamedSegment& b) {
                return a.start_seconds < b.start_seconds;
              });
  }
  // An instant per sampled frame: the measure the tracker's segments are held to.
  absl::StatusOr<nlohmann::ordered_json> report =
      ScoreSegments(truth, evaluation.predicted, 1 / frames_per_second);
  if (!report.ok()) return report.status();
  evaluation.report = *std::move(report);
  evaluation.report["sampled_frame_accuracy"] =
      100.0 * static_cast<double>(right) / static_cast<double>(std::max<int64_t>(labelled, 1));
  return evaluation;
}

}  // namespace vidclf::train
