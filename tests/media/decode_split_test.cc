#include "media/decode_split.h"

#include <gtest/gtest.h>

#include <vector>

namespace vidclf::media {
namespace {

constexpr double kMaxShare = 0.75;

TEST(DecodeSplitTest, CountsTheFramesFromEachSeekToEachWantedFrame) {
  // Keyframes every 100 frames: 50 needs 0..50, 150 needs 100..150, 160 needs 151..160.
  EXPECT_EQ(FramesToDecode({0, 100, 200}, {50, 150, 160}), 51 + 51 + 10);
  EXPECT_EQ(FramesToDecode({0}, {9, 19}), 20);
  EXPECT_EQ(FramesToDecode({}, {9}), 10);  // no listed keyframe: from the start
}

TEST(DecodeSplitTest, SplitsWhereTheWorkHalves) {
  // A keyframe on every wanted frame: one frame each, split in the middle.
  EXPECT_EQ(
      SplitAtKeyframe({0, 25, 75, 125, 175, 225, 275}, {25, 75, 125, 175, 225, 275}, kMaxShare),
      3u);
  // 51 frames, then 51 and 10 in one GOP: the only independent point is before 150.
  EXPECT_EQ(SplitAtKeyframe({0, 100, 200}, {50, 150, 160}, kMaxShare), 1u);
}

TEST(DecodeSplitTest, DoesNotSplitWithinAGopOrTooUnevenly) {
  EXPECT_EQ(SplitAtKeyframe({0}, {10, 100, 200}, kMaxShare), 0u);
  EXPECT_EQ(SplitAtKeyframe({0, 100}, {110, 150}, kMaxShare), 0u);  // both after keyframe 100
  // 11 + 90 frames before keyframe 280, 11 after: the larger part is 90% of the work.
  EXPECT_EQ(SplitAtKeyframe({0, 280}, {10, 100, 290}, kMaxShare), 0u);
  EXPECT_EQ(SplitAtKeyframe({0, 280}, {10, 100, 290}, /*max_share=*/0.95), 2u);
  EXPECT_EQ(SplitAtKeyframe({0, 10}, {20}, kMaxShare), 0u);  // one frame wanted
}

}  // namespace
}  // namespace vidclf::media
