#include "train/segment_metrics.h"

#include <gtest/gtest.h>

namespace vidclf::train {
namespace {

constexpr int kA = 0;
constexpr int kB = 1;

TimedSegment Seg(int label, double start, double end, float score = 1) {
  return TimedSegment{label, start, end, score};
}

TEST(SegmentMetrics, TemporalIou) {
  EXPECT_DOUBLE_EQ(TemporalIou(Seg(kA, 0, 4), Seg(kA, 2, 6)), 2.0 / 6.0);
  EXPECT_DOUBLE_EQ(TemporalIou(Seg(kA, 0, 4), Seg(kA, 4, 6)), 0);
  EXPECT_DOUBLE_EQ(TemporalIou(Seg(kA, 1, 1), Seg(kA, 0, 6)), 0);
}

TEST(SegmentMetrics, ABoundaryTwoSecondsLate) {
  // Truth: A for 10 s, then B for 10 s; the prediction moves the boundary to 8 s.
  const std::vector<SegmentedVideo> videos = {
      {20, {Seg(kA, 0, 10), Seg(kB, 10, 20)}, {Seg(kA, 0, 8, 0.9f), Seg(kB, 8, 20, 0.9f)}}};
  EXPECT_DOUBLE_EQ(FrameAccuracy(videos, 1), 90);  // 18 of the 20 instants
  EXPECT_DOUBLE_EQ(EditScore(videos), 100);
  EXPECT_DOUBLE_EQ(F1AtOverlap(videos, 0.5), 100);  // IoUs 0.8 and 10/12
  EXPECT_DOUBLE_EQ(F1AtOverlap(videos, 0.9), 0);
  EXPECT_DOUBLE_EQ(MeanAveragePrecision(videos, 0.5), 100);
  EXPECT_DOUBLE_EQ(MeanAveragePrecision(videos, 0.9), 0);
}

TEST(SegmentMetrics, OverSegmentationCostsTheEditScore) {
  const std::vector<SegmentedVideo> videos = {
      {20,
       {Seg(kA, 0, 10), Seg(kB, 10, 20)},
       {Seg(kA, 0, 5), Seg(kB, 5, 6), Seg(kA, 6, 10), Seg(kB, 10, 20)}}};
  EXPECT_DOUBLE_EQ(EditScore(videos), 50);  // two insertions over four segments
  // tp 2 (A 0-5 at IoU 0.5, B 10-20), fp 2 (B 5-6; A 6-10 at IoU 0.4), fn 0.
  EXPECT_NEAR(F1AtOverlap(videos, 0.5), 100 * 2 * 0.5 * 1 / 1.5, 1e-9);
  // Background counts for frame accuracy: nothing predicted over an empty stretch is right.
  const std::vector<SegmentedVideo> gap = {{10, {Seg(kA, 0, 5)}, {Seg(kA, 0, 5)}}};
  EXPECT_DOUBLE_EQ(FrameAccuracy(gap, 1), 100);
  EXPECT_DOUBLE_EQ(EditScore({{10, {}, {}}}), 100);
}

TEST(SegmentMetrics, AveragePrecisionRanksAcrossVideosByScore) {
  // One true A in each video; the most confident prediction misses, the next two hit:
  // precision 0, 1/2, 2/3 at recall 0, 1/2, 1; its envelope gives 2/3 over both steps.
  const std::vector<SegmentedVideo> videos = {
      {10, {Seg(kA, 0, 5)}, {Seg(kA, 6, 9, 0.9f), Seg(kA, 0, 5, 0.8f)}},
      {10, {Seg(kA, 2, 8)}, {Seg(kA, 2, 8, 0.7f)}}};
  EXPECT_NEAR(MeanAveragePrecision(videos, 0.5), 100 * 2.0 / 3.0, 1e-9);
  // A label with true segments and no prediction counts as 0 in the mean.
  const std::vector<SegmentedVideo> missed = {
      {10, {Seg(kA, 0, 5), Seg(kB, 5, 10)}, {Seg(kA, 0, 5, 0.9f)}}};
  EXPECT_DOUBLE_EQ(MeanAveragePrecision(missed, 0.5), 50);
  // A second detection of one segment is a false positive.
  const std::vector<SegmentedVideo> twice = {
      {10, {Seg(kA, 0, 5)}, {Seg(kA, 0, 5, 0.9f), Seg(kA, 0, 4, 0.8f)}}};
  EXPECT_NEAR(F1AtOverlap(twice, 0.5), 100 * 2 * 0.5 / 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(MeanAveragePrecision(twice, 0.5), 100);
}

}  // namespace
}  // namespace vidclf::train
