#include "train/segment_metrics.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace vidclf::train {
namespace {

constexpr int kBackground = -1;

// The label of the first segment that covers `t`, or background.
int LabelAt(const std::vector<TimedSegment>& segments, double t) {
  for (const TimedSegment& segment : segments) {
    if (segment.start_seconds <= t && t < segment.end_seconds) return segment.label;
  }
  return kBackground;
}

int Levenshtein(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> previous(b.size() + 1);
  std::iota(previous.begin(), previous.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    std::vector<int> current(b.size() + 1);
    current[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] = std::min(
          {previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    previous = std::move(current);
  }
  return previous[b.size()];
}

std::vector<int> Labels(const std::vector<TimedSegment>& segments) {
  std::vector<int> labels;
  for (const TimedSegment& segment : segments) labels.push_back(segment.label);
  return labels;
}

// ActivityNet's interpolated average precision of ranked hits, out of `relevant` true segments.
double AveragePrecision(const std::vector<bool>& hits, int relevant) {
  if (relevant == 0) return 0;
  std::vector<double> precision = {0};
  std::vector<double> recall = {0};
  int true_positives = 0;
  for (size_t i = 0; i < hits.size(); ++i) {
    true_positives += hits[i] ? 1 : 0;
    precision.push_back(static_cast<double>(true_positives) / static_cast<double>(i + 1));
    recall.push_back(static_cast<double>(true_positives) / relevant);
  }
  precision.push_back(0);
  recall.push_back(1);
  for (size_t i = precision.size() - 1; i-- > 0;) {
    precision[i] = std::max(precision[i], precision[i + 1]);
  }
  double ap = 0;
  for (size_t i = 1; i < recall.size(); ++i) {
    if (recall[i] != recall[i - 1]) ap += (recall[i] - recall[i - 1]) * precision[i];
  }
  return ap;
}

}  // namespace

double TemporalIou(const TimedSegment& a, const TimedSegment& b) {
  const double intersection =
      std::min(a.end_seconds, b.end_seconds) - std::max(a.start_seconds, b.start_seconds);
  const double union_seconds =
      std::max(a.end_seconds, b.end_seconds) - std::min(a.start_seconds, b.start_seconds);
  if (intersection <= 0 || union_seconds <= 0) return 0;
  return intersection / union_seconds;
}

double FrameAccuracy(const std::vector<SegmentedVideo>& videos, double step_seconds) {
  int64_t instants = 0;
  int64_t right = 0;
  for (const SegmentedVideo& video : videos) {
    for (double t = step_seconds / 2; t < video.duration_seconds; t += step_seconds) {
      ++instants;
      right += LabelAt(video.truth, t) == LabelAt(video.predicted, t) ? 1 : 0;
    }
  }
  return instants == 0 ? 0 : 100.0 * static_cast<double>(right) / static_cast<double>(instants);
}

double EditScore(const std::vector<SegmentedVideo>& videos) {
  if (videos.empty()) return 0;
  double total = 0;
  for (const SegmentedVideo& video : videos) {
    const size_t longer = std::max(video.truth.size(), video.predicted.size());
    if (longer == 0) {
      total += 100;
      continue;
    }
    total += 100.0 *
             (1.0 - static_cast<double>(Levenshtein(Labels(video.truth), Labels(video.predicted))) /
                        static_cast<double>(longer));
  }
  return total / static_cast<double>(videos.size());
}

double F1AtOverlap(const std::vector<SegmentedVideo>& videos, double overlap) {
  int true_positives = 0;
  int false_positives = 0;
  int false_negatives = 0;
  for (const SegmentedVideo& video : videos) {
    std::vector<bool> taken(video.truth.size(), false);
    for (const TimedSegment& prediction : video.predicted) {
      // The true segment of its label it overlaps most, taken or not.
      double best = 0;
      size_t best_index = video.truth.size();
      for (size_t i = 0; i < video.truth.size(); ++i) {
        if (video.truth[i].label != prediction.label) continue;
        const double iou = TemporalIou(prediction, video.truth[i]);
        if (best_index == video.truth.size() || iou > best) {
          best = iou;
          best_index = i;
        }
      }
      if (best_index < video.truth.size() && best >= overlap && !taken[best_index]) {
        taken[best_index] = true;
        ++true_positives;
      } else {
        ++false_positives;
      }
    }
    false_negatives += static_cast<int>(std::count(taken.begin(), taken.end(), false));
  }
  if (true_positives == 0) return 0;
  const double precision = static_cast<double>(true_positives) / (true_positives + false_positives);
  const double recall = static_cast<double>(true_positives) / (true_positives + false_negatives);
  return 100.0 * 2 * precision * recall / (precision + recall);
}

double MeanAveragePrecision(const std::vector<SegmentedVideo>& videos, double tiou) {
  struct Ranked {
    float score;
    size_t video;
    const TimedSegment* segment;
  };
  std::map<int, std::vector<Ranked>> predictions;  // by label
  std::map<int, int> relevant;
  for (size_t v = 0; v < videos.size(); ++v) {
    for (const TimedSegment& segment : videos[v].truth) ++relevant[segment.label];
    for (const TimedSegment& segment : videos[v].predicted) {
      predictions[segment.label].push_back({segment.score, v, &segment});
    }
  }
  if (relevant.empty()) return 0;
  double total = 0;
  for (const auto& [label, count] : relevant) {
    std::vector<Ranked>& ranked = predictions[label];
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
    std::vector<std::vector<bool>> taken(videos.size());
    for (size_t v = 0; v < videos.size(); ++v) taken[v].assign(videos[v].truth.size(), false);
    std::vector<bool> hits;
    for (const Ranked& prediction : ranked) {
      const std::vector<TimedSegment>& truth = videos[prediction.video].truth;
      double best = -1;
      size_t best_index = truth.size();
      for (size_t i = 0; i < truth.size(); ++i) {
        if (truth[i].label != label || taken[prediction.video][i]) continue;
        const double iou = TemporalIou(*prediction.segment, truth[i]);
        if (iou > best) {
          best = iou;
          best_index = i;
        }
      }
      const bool hit = best_index < truth.size() && best >= tiou;
      if (hit) taken[prediction.video][best_index] = true;
      hits.push_back(hit);
    }
    total += AveragePrecision(hits, count);
  }
  return 100.0 * total / static_cast<double>(relevant.size());
}

}  // namespace vidclf::train
