#include "media/frame_sampler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vidclf::media {
namespace {

using ::testing::ElementsAre;

TEST(UniformSampleIndices, PicksTheCentreOfEqualSegments) {
  // 100 frames in 4 segments of 25: centres at 12.5, 37.5, 62.5, 87.5, floored.
  EXPECT_THAT(UniformSampleIndices(100, 4), ElementsAre(12, 37, 62, 87));
  EXPECT_THAT(UniformSampleIndices(10, 3), ElementsAre(1, 5, 8));
  EXPECT_THAT(UniformSampleIndices(7, 1), ElementsAre(3));
}

TEST(UniformSampleIndices, ReturnsEveryFrameOfAShortVideo) {
  EXPECT_THAT(UniformSampleIndices(3, 8), ElementsAre(0, 1, 2));
  EXPECT_THAT(UniformSampleIndices(4, 4), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(UniformSampleIndices(3, 0), ElementsAre(0, 1, 2));
  EXPECT_TRUE(UniformSampleIndices(0, 5).empty());
}

TEST(UniformSampleIndices, IsStrictlyIncreasingAndInRange) {
  for (int64_t total : {17, 100, 1001, 123457}) {
    for (int64_t n : {1, 2, 16, 17}) {
      const std::vector<int64_t> indices = UniformSampleIndices(total, n);
      ASSERT_EQ(indices.size(), static_cast<size_t>(std::min(total, n)));
      for (size_t i = 0; i < indices.size(); ++i) {
        EXPECT_GE(indices[i], 0);
        EXPECT_LT(indices[i], total);
        if (i > 0) {
          EXPECT_GT(indices[i], indices[i - 1]);
        }
      }
    }
  }
}

TEST(SnapToKeyframes, TakesTheKeyframeNearestTheCentreWithinEachSegment) {
  // 100 frames in 4 segments [0, 25), [25, 50), [50, 75), [75, 100); centres 12, 37, 62, 87.
  // Segment 1 holds keyframes 30 and 45: 30 is nearer 37. Segment 2 holds none. Segment 3 holds
  // 80 and 94, equally near 87: the earlier wins. Keyframe 0 is the nearest to 12.
  EXPECT_THAT(SnapToKeyframes(UniformSampleIndices(100, 4), 100, {0, 30, 45, 80, 94}),
              ElementsAre(0, 30, 62, 80));
  // A keyframe just outside a segment is not taken, even when it is the nearest.
  EXPECT_THAT(SnapToKeyframes(UniformSampleIndices(100, 4), 100, {25, 50}),
              ElementsAre(12, 25, 50, 87));
  EXPECT_THAT(SnapToKeyframes(UniformSampleIndices(100, 4), 100, {}), ElementsAre(12, 37, 62, 87));
}

TEST(SnapToKeyframes, KeepsEveryFrameOfAShortVideo) {
  EXPECT_THAT(SnapToKeyframes(UniformSampleIndices(3, 8), 3, {0}), ElementsAre(0, 1, 2));
}

TEST(SnapToKeyframes, StaysStrictlyIncreasingWithAKeyframeInEverySegment) {
  std::vector<int64_t> keyframes;
  for (int64_t k = 0; k < 1001; k += 7) keyframes.push_back(k);
  const std::vector<int64_t> snapped =
      SnapToKeyframes(UniformSampleIndices(1001, 16), 1001, keyframes);
  ASSERT_EQ(snapped.size(), 16u);
  for (size_t i = 0; i < snapped.size(); ++i) {
    EXPECT_EQ(snapped[i] % 7, 0) << i;
    if (i > 0) {
      EXPECT_GT(snapped[i], snapped[i - 1]);
    }
  }
}

TEST(SnapToKeyframes, IsForUniformSamplingOnly) {
  SamplingOptions options;
  options.snap_to_keyframes = true;
  EXPECT_TRUE(ValidateSamplingOptions(options).ok());
  options.strategy = SamplingStrategy::kWindow;
  EXPECT_EQ(ValidateSamplingOptions(options).code(), absl::StatusCode::kInvalidArgument);
}

std::vector<double> Times(std::initializer_list<double> seconds) { return seconds; }

TEST(SampleFrameIndices, FpsKeepsTheFirstFrameOfEachInterval) {
  SamplingOptions options;
  options.strategy = SamplingStrategy::kFps;
  options.frames_per_second = 2;
  options.num_frames = 0;
  // Variable frame rate, starting late: intervals count from the first frame.
  const std::vector<double> times = Times({3.0, 3.1, 3.45, 3.5, 3.55, 4.2, 4.9, 5.0, 5.01});
  EXPECT_EQ(SampleFrameIndices(times, options), (std::vector<int64_t>{0, 3, 5, 6, 7}));
  options.num_frames = 2;
  EXPECT_EQ(SampleFrameIndices(times, options), (std::vector<int64_t>{0, 3}));
}

TEST(SampleFrameIndices, WindowStartsAtTheFirstFrameAtOrAfterItsTime) {
  SamplingOptions options;
  options.strategy = SamplingStrategy::kWindow;
  options.num_frames = 3;
  options.stride_frames = 2;
  options.start_seconds = 0.25;
  const std::vector<double> times = Times({0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7});
  EXPECT_EQ(SampleFrameIndices(times, options), (std::vector<int64_t>{3, 5, 7}));
  options.num_frames = 10;  // runs out of video
  EXPECT_EQ(SampleFrameIndices(times, options), (std::vector<int64_t>{3, 5, 7}));
}

TEST(SampleFrameIndices, AllKeepsTheFirstFramesUpToTheCap) {
  SamplingOptions options;
  options.strategy = SamplingStrategy::kAll;
  options.num_frames = 2;
  EXPECT_EQ(SampleFrameIndices(Times({0, 1, 2}), options), (std::vector<int64_t>{0, 1}));
  options.num_frames = 0;
  EXPECT_EQ(SampleFrameIndices(Times({0, 1, 2}), options), (std::vector<int64_t>{0, 1, 2}));
}

TEST(SamplingOptions, ParsesNamesAndRefusesNonsense) {
  EXPECT_EQ(*ParseSamplingStrategy("fps"), SamplingStrategy::kFps);
  EXPECT_EQ(ParseSamplingStrategy("random").status().code(), absl::StatusCode::kInvalidArgument);
  SamplingOptions options;
  options.strategy = SamplingStrategy::kWindow;
  options.stride_frames = 0;
  EXPECT_EQ(ValidateSamplingOptions(options).code(), absl::StatusCode::kInvalidArgument);
  options.stride_frames = 1;
  options.start_seconds = -1;
  EXPECT_EQ(ValidateSamplingOptions(options).code(), absl::StatusCode::kInvalidArgument);
  options.start_seconds = 0;
  EXPECT_TRUE(ValidateSamplingOptions(options).ok());
}

}  // namespace
}  // namespace vidclf::media
