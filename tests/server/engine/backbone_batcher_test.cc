// The backbone stage alone, with frames from owners the test controls and a real (small) model.
#include "server/engine/backbone_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "model/video_model.h"
#include "tests/server/engine/counting_observer.h"
#include "tests/test_util/test_models.h"

namespace vidclf::engine {
namespace {

using testing::CountingObserver;
using ::testing::ElementsAre;

// A call's frames: what the batcher hands back for each, and switches for what it asks.
class RecordingOwner : public FrameOwner {
 public:
  RecordingOwner(const model::VideoModel& model, int frames) : model_(model), expected_(frames) {}

  const model::VideoModel& model() const override { return model_; }
  bool Wants(int /*pass*/) const override { return wants_; }
  bool StillDecoding() const override { return decoding_; }
  void Embedded(int /*pass*/, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                const BatchReport& report) override {
    absl::MutexLock lock(&mutex_);
    answers_.emplace(slot, std::make_pair(std::move(embedding), report));
    if (static_cast<int>(answers_.size()) == expected_) all_answered_.Notify();
  }

  // The answer of every frame, by slot, once each has one.
  std::map<int64_t, std::pair<absl::StatusOr<torch::Tensor>, BatchReport>> WaitForAnswers() {
    all_answered_.WaitForNotification();
    absl::MutexLock lock(&mutex_);
    return answers_;
  }

  std::atomic<bool> wants_{true};
  std::atomic<bool> decoding_{false};

 private:
  const model::VideoModel& model_;
  const int expected_;
  absl::Mutex mutex_;
  std::map<int64_t, std::pair<absl::StatusOr<torch::Tensor>, BatchReport>> answers_;
  absl::Notification all_answered_;
};

class BackboneBatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::manual_seed(1);
    auto model = model::VideoModel::Create(vidclf::testing::TinyConfig());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = model->release();
  }
  static void TearDownTestSuite() { delete model_; }

  // `count` random frames of the model's size, [count, 3, crop, crop].
  static torch::Tensor Frames(int count) {
    const int64_t side = model_->config().input.crop_size;
    return torch::rand({count, 3, side, side});
  }

  static void Enqueue(BackboneBatcher& batcher, const std::shared_ptr<RecordingOwner>& owner,
                      const torch::Tensor& frames) {
    for (int64_t slot = 0; slot < frames.size(0); ++slot) {
      batcher.Enqueue(owner, /*pass=*/0, slot, frames[slot]);
    }
  }

  static BatcherOptions Options(int max_batch_frames, absl::Duration max_queue_delay) {
    BatcherOptions options;
    options.max_batch_frames = max_batch_frames;
    options.max_queue_delay = max_queue_delay;
    return options;
  }

  static model::VideoModel* model_;
};

model::VideoModel* BackboneBatcherTest::model_ = nullptr;

TEST_F(BackboneBatcherTest, FullBatchesRunWhileTheirCallsStillDecode) {
  CountingObserver observer;
  BackboneBatcher batcher(
      Options(4, absl::Hours(1)),
      [] {
        return CoreUse{1, 0};
      },
      &observer);
  auto owner = std::make_shared<RecordingOwner>(*model_, 8);
  owner->decoding_ = true;  // frames wait for the rest of the call unless they fill a batch
  Enqueue(batcher, owner, Frames(8));
  const auto answers = owner->WaitForAnswers();
  for (const auto& [slot, answer] : answers) {
    ASSERT_TRUE(answer.first.ok()) << answer.first.status();
    EXPECT_EQ(answer.second.batch_frames, 4) << "frame " << slot;
  }
  EXPECT_THAT(observer.batch_sizes(), ElementsAre(4, 4));
  EXPECT_EQ(observer.embedded(), 8);
}

TEST_F(BackboneBatcherTest, APartialBatchWaitsForTheDelayWhileOtherCallsDecode) {
  CountingObserver observer;
  const absl::Duration delay = absl::Milliseconds(300);
  BackboneBatcher batcher(
      Options(16, delay),
      [] {
        return CoreUse{1, 0};
      },
      &observer);
  auto owner = std::make_shared<RecordingOwner>(*model_, 3);
  owner->decoding_ = true;  // held until the test lets the three go together
  Enqueue(batcher, owner, Frames(3));
  owner->decoding_ = false;
  batcher.DecodingEnded();
  const auto answers = owner->WaitForAnswers();
  double longest_wait = 0;
  for (const auto& [slot, answer] : answers) {
    ASSERT_TRUE(answer.first.ok()) << answer.first.status();
    EXPECT_EQ(answer.second.batch_frames, 3);
    longest_wait = std::max(longest_wait, answer.second.waited_seconds);
  }
  // Another call is decoding, so the batch waited the delay out for frames to join it.
  EXPECT_GE(longest_wait, absl::ToDoubleSeconds(delay));
  EXPECT_THAT(observer.batch_sizes(), ElementsAre(3));
}

TEST_F(BackboneBatcherTest, RunsAtOnceWhenNoCallIsDecoding) {
  CountingObserver observer;
  // A delay no test waits out: the batch runs because nothing else is on its way.
  BackboneBatcher batcher(
      Options(16, absl::Hours(1)), [] { return CoreUse{}; }, &observer);
  auto owner = std::make_shared<RecordingOwner>(*model_, 1);
  Enqueue(batcher, owner, Frames(1));
  const auto answers = owner->WaitForAnswers();
  ASSERT_TRUE(answers.at(0).first.ok()) << answers.at(0).first.status();
  EXPECT_THAT(observer.batch_sizes(), ElementsAre(1));
}

TEST_F(BackboneBatcherTest, FramesNoLongerWantedLeaveUnembedded) {
  CountingObserver observer;
  BackboneBatcher batcher(
      Options(16, absl::Hours(1)),
      [] {
        return CoreUse{1, 0};
      },
      &observer);
  auto owner = std::make_shared<RecordingOwner>(*model_, 3);
  owner->decoding_ = true;
  Enqueue(batcher, owner, Frames(3));
  owner->wants_ = false;  // the call was cancelled
  batcher.DecodingEnded();
  const auto answers = owner->WaitForAnswers();
  for (const auto& [slot, answer] : answers) {
    EXPECT_EQ(answer.first.status().code(), absl::StatusCode::kCancelled) << "frame " << slot;
  }
  EXPECT_TRUE(observer.batch_sizes().empty());
  EXPECT_EQ(observer.embedded(), 0);
  EXPECT_EQ(batcher.queued_frames(), 0);
}

TEST_F(BackboneBatcherTest, EachOwnerGetsItsOwnRowsOfASharedBatch) {
  CountingObserver observer;
  BackboneBatcher batcher(
      Options(8, absl::Hours(1)),
      [] {
        return CoreUse{2, 0};
      },
      &observer);
  auto first = std::make_shared<RecordingOwner>(*model_, 4);
  auto second = std::make_shared<RecordingOwner>(*model_, 4);
  first->decoding_ = true;
  second->decoding_ = true;
  const torch::Tensor first_frames = Frames(4);
  const torch::Tensor second_frames = Frames(4);
  // Interleaved, as two calls decoding side by side hand them over; 8 fill one batch.
  for (int64_t slot = 0; slot < 4; ++slot) {
    batcher.Enqueue(first, 0, slot, first_frames[slot]);
    batcher.Enqueue(second, 0, slot, second_frames[slot]);
  }
  for (const auto& [owner, frames] :
       {std::make_pair(first, first_frames), std::make_pair(second, second_frames)}) {
    const auto answers = owner->WaitForAnswers();
    const absl::StatusOr<torch::Tensor> alone = model_->Embed(frames);
    ASSERT_TRUE(alone.ok()) << alone.status();
    for (const auto& [slot, answer] : answers) {
      ASSERT_TRUE(answer.first.ok()) << answer.first.status();
      EXPECT_EQ(answer.second.batch_frames, 8);
      EXPECT_TRUE(torch::allclose(*answer.first, (*alone)[slot], 1e-4, 1e-5))
          << "frame " << slot << " got another frame's embedding";
    }
  }
  EXPECT_THAT(observer.batch_sizes(), ElementsAre(8));
}

// Holds the first answer of the first batch until an answer of the second batch arrives too, or
// `patience` passes: with one batch at a time, the second would start only after the first one's
// answers were all given.
class MeetingOwner : public RecordingOwner {
 public:
  MeetingOwner(const model::VideoModel& model, int frames, absl::Duration patience)
      : RecordingOwner(model, frames), patience_(patience) {}

  void Embedded(int pass, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                const BatchReport& report) override {
    {
      absl::MutexLock lock(&mutex_);
      if (batches_.insert(report.batch_id).second && batches_.size() == 1) {
        met_ = mutex_.AwaitWithTimeout(
            absl::Condition(
                +[](std::set<uint64_t>* batches) { return batches->size() >= 2; }, &batches_),
            patience_);
      }
    }
    RecordingOwner::Embedded(pass, slot, std::move(embedding), report);
  }

  // Whether the second batch was answered while the first waited.
  bool met() {
    absl::MutexLock lock(&mutex_);
    return met_;
  }

 private:
  const absl::Duration patience_;
  absl::Mutex mutex_;
  std::set<uint64_t> batches_ ABSL_GUARDED_BY(mutex_);
  bool met_ ABSL_GUARDED_BY(mutex_) = false;
};

// Two full batches of one owner's frames, from a batcher that runs two side by side while live
// feeds are open; `live_feeds` says how many are. Checks every frame's embedding and returns
// whether the batches ran side by side.
bool TwoBatchesRanSideBySide(const model::VideoModel& model, const torch::Tensor& frames,
                             int live_feeds, absl::Duration patience) {
  CountingObserver observer;
  BatcherOptions options;
  options.max_batch_frames = 4;
  options.max_queue_delay = absl::Hours(1);
  options.max_threads = 2;
  options.batches_with_feeds = 2;
  BackboneBatcher batcher(
      options,
      [live_feeds] {
        return CoreUse{1, live_feeds};
      },
      &observer);
  auto owner = std::make_shared<MeetingOwner>(model, 8, patience);
  owner->decoding_ = true;  // only full batches go: two of four
  for (int64_t slot = 0; slot < 8; ++slot) batcher.Enqueue(owner, /*pass=*/0, slot, frames[slot]);
  const auto answers = owner->WaitForAnswers();
  const absl::StatusOr<torch::Tensor> alone = model.Embed(frames);
  EXPECT_TRUE(alone.ok()) << alone.status();
  for (const auto& [slot, answer] : answers) {
    EXPECT_TRUE(answer.first.ok()) << answer.first.status();
    if (!answer.first.ok() || !alone.ok()) continue;
    EXPECT_EQ(answer.second.batch_frames, 4);
    EXPECT_TRUE(torch::allclose(*answer.first, (*alone)[slot], 1e-4, 1e-5))
        << "frame " << slot << " got another frame's embedding";
  }
  EXPECT_THAT(observer.batch_sizes(), ElementsAre(4, 4));
  return owner->met();
}

TEST_F(BackboneBatcherTest, BatchesRunSideBySideWhileLiveFeedsAreOpen) {
  EXPECT_TRUE(TwoBatchesRanSideBySide(*model_, Frames(8), /*live_feeds=*/1, absl::Seconds(60)))
      << "the second batch did not run while the first one's answers were handed over";
}

TEST_F(BackboneBatcherTest, OneBatchAtATimeWithoutLiveFeeds) {
  EXPECT_FALSE(
      TwoBatchesRanSideBySide(*model_, Frames(8), /*live_feeds=*/0, absl::Milliseconds(500)))
      << "a second batch ran beside the first with no live feed open";
}

}  // namespace
}  // namespace vidclf::engine
