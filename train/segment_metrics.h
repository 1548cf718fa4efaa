// How well predicted segments match the true ones, by the measures the two fields that study it
// report, so that figures compare with theirs:
// - temporal action segmentation (MS-TCN, Farha and Gall 2019; the edit score of Lea et al. 2017):
//   frame-wise accuracy, the segmental edit score, and F1 at overlaps of 0.10, 0.25 and 0.50;
// - temporal action localisation (ActivityNet): mean average precision at temporal IoU
//   thresholds, predictions ranked by score.
// Time not covered by any segment is background, which none of the segment measures counts.
#ifndef VIDCLF_TRAIN_SEGMENT_METRICS_H_
#define VIDCLF_TRAIN_SEGMENT_METRICS_H_

#include <vector>

namespace vidclf::train {

struct TimedSegment {
  int label = 0;
  double start_seconds = 0;
  double end_seconds = 0;
  float score = 1;  // predictions' confidence, for ranking; ignored in the truth
};

// One video's true and predicted segments, each in time order.
struct SegmentedVideo {
  double duration_seconds = 0;
  std::vector<TimedSegment> truth;
  std::vector<TimedSegment> predicted;
};

// Temporal intersection over union of two intervals (0 when either is empty).
double TemporalIou(const TimedSegment& a, const TimedSegment& b);

// 100 times the share of instants (every `step_seconds`, at the middle of each step) whose label,
// or background, the predictions give right, over all the videos.
double FrameAccuracy(const std::vector<SegmentedVideo>& videos, double step_seconds);

// 100 (1 - the Levenshtein distance between the sequences of true and predicted labels / the
// longer's length), averaged over the videos (100 where both have no segment).
double EditScore(const std::vector<SegmentedVideo>& videos);

// 100 F1 where a prediction is right when its IoU with a true segment of its label that no
// earlier prediction took is the best it has and at least `overlap`; counts summed over videos.
double F1AtOverlap(const std::vector<SegmentedVideo>& videos, double overlap);

// 100 times the mean over labels that have true segments of the average precision at temporal
// IoU `tiou`: predictions of a label over all videos ranked by score, each matched to the
// unmatched true segment it overlaps most if that reaches `tiou`; precision interpolated as
// ActivityNet does (its envelope, summed over the steps in recall).
double MeanAveragePrecision(const std::vector<SegmentedVideo>& videos, double tiou);

}  // namespace vidclf::train

#endif  // VIDCLF_TRAIN_SEGMENT_METRICS_H_
