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
        if (i > 0) EXPECT_GT(indices[i], indices[i - 1]);
      }
    }
  }
}

}  // namespace
}  // namespace vidclf::media
