#include "server/sources/update_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace vidclf::sources {
namespace {

vidclf::v1::SourceUpdate Prediction(const std::string& name, int64_t last_frame) {
  vidclf::v1::SourceUpdate update;
  update.set_name(name);
  update.mutable_prediction()->set_last_frame(last_frame);
  return update;
}

vidclf::v1::SourceUpdate StateChange(const std::string& name) {
  vidclf::v1::SourceUpdate update;
  update.set_name(name);
  update.mutable_status()->set_state(vidclf::v1::SourceStatus::LIVE);
  return update;
}

TEST(UpdateQueue, EventsFirstThenTheNewestPredictionOfEachSourceWithTheDropsCounted) {
  UpdateQueue queue;
  EXPECT_EQ(queue.Offer(Prediction("sources/a", 1), true), UpdateQueue::Offered::kKept);
  EXPECT_EQ(queue.Offer(Prediction("sources/b", 1), true), UpdateQueue::Offered::kKept);
  EXPECT_EQ(queue.Offer(Prediction("sources/a", 2), true),
            UpdateQueue::Offered::kReplacedAPrediction);
  EXPECT_EQ(queue.Offer(StateChange("sources/b"), false), UpdateQueue::Offered::kKept);
  vidclf::v1::SourceUpdate next;
  ASSERT_TRUE(queue.Next(&next));
  EXPECT_TRUE(next.has_status());
  EXPECT_EQ(next.dropped_before(), 1u);
  ASSERT_TRUE(queue.Next(&next));
  EXPECT_EQ(next.name(), "sources/a");
  EXPECT_EQ(next.prediction().last_frame(), 2);
  EXPECT_EQ(next.dropped_before(), 0u);
  ASSERT_TRUE(queue.Next(&next));
  EXPECT_EQ(next.name(), "sources/b");
  EXPECT_FALSE(queue.Next(&next));
}

TEST(UpdateQueue, TooManyEventsWaitingIsTooFarBehindAndKeepsNothingMore) {
  UpdateQueue queue;
  for (size_t i = 0; i < kMaxWaitingSourceUpdates; ++i) {
    ASSERT_EQ(queue.Offer(StateChange("sources/a"), false), UpdateQueue::Offered::kKept);
  }
  EXPECT_EQ(queue.Offer(StateChange("sources/a"), false), UpdateQueue::Offered::kTooFarBehind);
  size_t waiting = 0;
  vidclf::v1::SourceUpdate next;
  while (queue.Next(&next)) ++waiting;
  EXPECT_EQ(waiting, kMaxWaitingSourceUpdates);
}

}  // namespace
}  // namespace vidclf::sources
