// The head stage alone: streams the test scripts, stepped by a real (small) GRU model.
#include "server/engine/head_stepper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "model/video_model.h"
#include "server/engine/worker_pool.h"
#include "tests/server/engine/counting_observer.h"
#include "tests/test_util/test_models.h"

namespace vidclf::engine {
namespace {

using testing::CountingObserver;
using ::testing::ElementsAre;

// A stream whose steps are written in advance; it records each outcome.
class ScriptedStream : public HeadStepper::Stream {
 public:
  explicit ScriptedStream(std::vector<HeadStepper::Step> steps) : steps_(std::move(steps)) {}

  bool NextStep(HeadStepper::Step* step) override {
    absl::MutexLock lock(&mutex_);
    if (next_ == steps_.size()) {
      if (!done_.HasBeenNotified()) done_.Notify();
      return false;
    }
    *step = steps_[next_++];
    return true;
  }
  void Stepped(HeadStepper::StepResult result) override {
    absl::MutexLock lock(&mutex_);
    results_.push_back(std::move(result));
  }

  // Every step's outcome, once the stepper has found no more.
  std::vector<HeadStepper::StepResult> WaitForResults() {
    done_.WaitForNotification();
    absl::MutexLock lock(&mutex_);
    return results_;
  }

 private:
  absl::Mutex mutex_;
  const std::vector<HeadStepper::Step> steps_;
  size_t next_ = 0;
  std::vector<HeadStepper::StepResult> results_;
  absl::Notification done_;
};

class HeadStepperTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::manual_seed(1);
    auto model = model::VideoModel::Create(vidclf::testing::TinyConfig());
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->has_recurrent_step());
    model_ = model->release();
  }
  static void TearDownTestSuite() { delete model_; }

  // One step of `frames` random embeddings from a fresh state.
  static HeadStepper::Step FreshStep(int frames) {
    HeadStepper::Step step;
    step.model = model_;
    step.embeddings = torch::rand({frames, 512});
    step.states = {model::HeadState{}};
    return step;
  }

  // What the model answers for `step` stepped alone from its `state`-th state.
  static torch::Tensor Alone(const HeadStepper::Step& step, size_t state = 0) {
    auto stepped = model_->StreamStep(step.embeddings.unsqueeze(0), step.states.at(state));
    EXPECT_TRUE(stepped.ok()) << stepped.status();
    return stepped.ok() ? stepped->first : torch::Tensor();
  }

  // Schedules `streams` while the head stage's one thread is held, so that the first round finds
  // them all waiting, then lets the rounds run until every stream has no more steps and the last
  // round is over.
  static void StepAll(HeadStepper& stepper, WorkerPool& head_stage,
                      const std::vector<std::shared_ptr<ScriptedStream>>& streams) {
    absl::Notification release;
    head_stage.Run([&release] { release.WaitForNotification(); });
    for (const auto& stream : streams) stepper.Schedule(stream);
    release.Notify();
    for (const auto& stream : streams) stream->WaitForResults();
    absl::Notification rounds_over;  // queued behind the last round on the stage's one thread
    head_stage.Run([&rounds_over] { rounds_over.Notify(); });
    rounds_over.WaitForNotification();
  }

  static model::VideoModel* model_;
};

model::VideoModel* HeadStepperTest::model_ = nullptr;

TEST_F(HeadStepperTest, StreamsOfOneModelAndFrameCountStepTogether) {
  CountingObserver observer;
  WorkerPool head_stage(1);
  HeadStepper stepper(&head_stage, /*max_rounds=*/1, /*max_streams=*/16, &observer);
  std::vector<HeadStepper::Step> steps = {FreshStep(1), FreshStep(2), FreshStep(1), FreshStep(1),
                                          FreshStep(1)};
  std::vector<std::shared_ptr<ScriptedStream>> streams;
  for (const HeadStepper::Step& step : steps) {
    streams.push_back(std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{step}));
  }
  StepAll(stepper, head_stage, streams);
  // The four one-frame steps in one pass, the two-frame step in another.
  EXPECT_THAT(observer.step_groups(), ElementsAre(4, 1));
  for (size_t i = 0; i < streams.size(); ++i) {
    const std::vector<HeadStepper::StepResult> results = streams[i]->WaitForResults();
    ASSERT_EQ(results.size(), 1u);
    ASSERT_TRUE(results[0].ok()) << results[0].status();
    EXPECT_EQ(results[0]->second.at(0).frames_seen, steps[i].embeddings.size(0));
    EXPECT_TRUE(torch::allclose(results[0]->first, Alone(steps[i]), 1e-5, 1e-6))
        << "stream " << i << " got another stream's probabilities";
  }
}

// A segments call's step takes its frames into each open window's state: every state gets its own
// row and next state, in order, stepped in one pass with the other streams' states.
TEST_F(HeadStepperTest, AStepOfSeveralStatesGetsEachItsOwnRow) {
  CountingObserver observer;
  WorkerPool head_stage(1);
  HeadStepper stepper(&head_stage, /*max_rounds=*/1, /*max_streams=*/16, &observer);
  HeadStepper::Step windows = FreshStep(1);
  auto older = model_->StreamStep(torch::rand({1, 2, 512}), model::HeadState{});
  ASSERT_TRUE(older.ok()) << older.status();
  windows.states = {older->second, model::HeadState{}};
  const HeadStepper::Step single = FreshStep(1);
  std::vector<std::shared_ptr<ScriptedStream>> streams = {
      std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{single}),
      std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{windows})};
  StepAll(stepper, head_stage, streams);
  EXPECT_THAT(observer.step_groups(), ElementsAre(2));
  const std::vector<HeadStepper::StepResult> results = streams[1]->WaitForResults();
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_EQ(results[0]->first.size(0), 2);
  ASSERT_EQ(results[0]->second.size(), 2u);
  EXPECT_EQ(results[0]->second[0].frames_seen, 3);
  EXPECT_EQ(results[0]->second[1].frames_seen, 1);
  for (size_t state = 0; state < 2; ++state) {
    EXPECT_TRUE(torch::allclose(results[0]->first[static_cast<int64_t>(state)].unsqueeze(0),
                                Alone(windows, state), 1e-5, 1e-6))
        << "state " << state;
  }
  EXPECT_TRUE(
      torch::allclose(streams[0]->WaitForResults().at(0)->first, Alone(single), 1e-5, 1e-6));
}

TEST_F(HeadStepperTest, ARoundStepsAtMostMaxStreamsAndTheRestFollow) {
  CountingObserver observer;
  WorkerPool head_stage(1);
  HeadStepper stepper(&head_stage, /*max_rounds=*/1, /*max_streams=*/2, &observer);
  std::vector<std::shared_ptr<ScriptedStream>> streams;
  for (int i = 0; i < 5; ++i) {
    streams.push_back(
        std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{FreshStep(1)}));
  }
  StepAll(stepper, head_stage, streams);
  EXPECT_THAT(observer.step_groups(), ElementsAre(2, 2, 1));
  for (const auto& stream : streams) {
    const std::vector<HeadStepper::StepResult> results = stream->WaitForResults();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results[0].ok()) << results[0].status();
  }
}

TEST_F(HeadStepperTest, AStreamStaysScheduledUntilItHasNoMoreSteps) {
  CountingObserver observer;
  WorkerPool head_stage(1);
  HeadStepper stepper(&head_stage, /*max_rounds=*/1, /*max_streams=*/16, &observer);
  // Scripted steps start fresh: a real stream would carry each outcome's state into its next.
  const std::vector<HeadStepper::Step> steps = {FreshStep(1), FreshStep(1), FreshStep(1)};
  auto stream = std::make_shared<ScriptedStream>(steps);
  StepAll(stepper, head_stage, {stream});
  const std::vector<HeadStepper::StepResult> results = stream->WaitForResults();
  ASSERT_EQ(results.size(), steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_TRUE(torch::allclose(results[i]->first, Alone(steps[i]), 1e-5, 1e-6)) << "step " << i;
  }
  EXPECT_THAT(observer.step_groups(), ElementsAre(1, 1, 1));
}

TEST_F(HeadStepperTest, AStateThatDoesNotFitFailsOnlyItsStream) {
  CountingObserver observer;
  WorkerPool head_stage(1);
  HeadStepper stepper(&head_stage, /*max_rounds=*/1, /*max_streams=*/16, &observer);
  HeadStepper::Step broken = FreshStep(1);
  broken.states[0].frames_seen = 3;
  broken.states[0].tensors = {torch::zeros({1, 1, 7})};  // no GRU of this model has 7 units
  std::vector<std::shared_ptr<ScriptedStream>> streams = {
      std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{FreshStep(1)}),
      std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{broken}),
      std::make_shared<ScriptedStream>(std::vector<HeadStepper::Step>{FreshStep(1)})};
  StepAll(stepper, head_stage, streams);
  EXPECT_TRUE(streams[0]->WaitForResults().at(0).ok());
  EXPECT_EQ(streams[1]->WaitForResults().at(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(streams[2]->WaitForResults().at(0).ok());
  // The joint step failed, so each stream stepped alone.
  EXPECT_THAT(observer.step_groups(), ElementsAre(1, 1, 1));
}

}  // namespace
}  // namespace vidclf::engine
