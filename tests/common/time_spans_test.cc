#include "common/time_spans.h"

#include <gtest/gtest.h>

namespace vidclf {
namespace {

absl::Time At(int ms) { return absl::UnixEpoch() + absl::Milliseconds(ms); }

TEST(CoveredTimeTest, OverlappingSpansCountOnce) {
  // Two batches side by side, then one alone after a gap.
  EXPECT_EQ(CoveredTime({{At(0), At(100)}, {At(50), At(120)}, {At(200), At(230)}}),
            absl::Milliseconds(150));
  // In any order, one inside another, an empty span.
  EXPECT_EQ(CoveredTime({{At(10), At(20)}, {At(0), At(100)}, {At(40), At(40)}}),
            absl::Milliseconds(100));
}

TEST(CoveredTimeTest, NothingCoversNothing) {
  EXPECT_EQ(CoveredTime({}), absl::ZeroDuration());
  EXPECT_EQ(CoveredTime({{At(30), At(10)}}), absl::ZeroDuration());
}

}  // namespace
}  // namespace vidclf
