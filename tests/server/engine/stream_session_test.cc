// One live stream alone: raw pictures the test pushes, the real batcher and head stepper, and a
// real (small) GRU model. What it emits is counted in frames and media time, never wall-clock.
#include "server/engine/stream_session.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
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
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RecordingListener : public StreamListener {
 public:
  void OnPrediction(StreamPrediction prediction) override {
    absl::MutexLock lock(&mutex_);
    predictions_.push_back(std::move(prediction));
  }
  void OnEnd(const absl::Status& status) override {
    absl::MutexLock lock(&mutex_);
    end_ = status;
    ended_.Notify();
  }

  // The stream's end status, once it has ended.
  absl::Status WaitForEnd() {
    ended_.WaitForNotification();
    absl::MutexLock lock(&mutex_);
    return end_;
  }
  std::vector<StreamPrediction> predictions() {
    absl::MutexLock lock(&mutex_);
    return predictions_;
  }

 private:
  absl::Mutex mutex_;
  std::vector<StreamPrediction> predictions_;
  absl::Status end_;
  absl::Notification ended_;
};

class StreamSessionTest : public ::testing::Test {
 protected:
  static constexpr int kSide = 64;

  static void SetUpTestSuite() {
    torch::manual_seed(1);
    auto model = model::VideoModel::Create(vidclf::testing::TinyConfig());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::shared_ptr<const model::VideoModel>(*std::move(model));
  }
  static void TearDownTestSuite() { model_.reset(); }

  StreamSessionTest()
      : head_stepper_(&head_stage_, /*max_rounds=*/1, /*max_streams=*/16, &observer_),
        batcher_(
            BatcherOptions(), [] { return CoreUse{}; }, &observer_) {
    resources_.batcher = &batcher_;
    resources_.head_stepper = &head_stepper_;
    resources_.observer = &observer_;
  }

  static StreamOptions RawPictures() {
    StreamOptions options;
    options.input = StreamOptions::Input::kRawRgb24;
    options.width = kSide;
    options.height = kSide;
    return options;
  }

  // Streams `pictures` raw pictures, one every `interval_seconds` of media time, and waits for
  // the stream's end.
  std::vector<StreamPrediction> Stream(const StreamOptions& options, int pictures,
                                       double interval_seconds = 0.04,
                                       std::shared_ptr<const model::VideoModel> model = model_) {
    RecordingListener listener;
    auto session = std::make_shared<StreamSession>(options, std::move(model), /*recurrent=*/true,
                                                   resources_, &listener);
    session->Start();
    for (int i = 0; i < pictures; ++i) {
      std::string picture(kSide * kSide * 3, static_cast<char>(16 * i));
      bool room = true;
      EXPECT_TRUE(session->PushPicture(std::move(picture), i * interval_seconds, &room).ok());
      if (!room) {
        absl::Notification roomy;
        session->CallWhenRoom([&roomy] { roomy.Notify(); });
        roomy.WaitForNotification();
      }
    }
    session->FinishInput();
    EXPECT_TRUE(listener.WaitForEnd().ok());
    session->Join();
    return listener.predictions();
  }

  static std::vector<int64_t> LastFrames(const std::vector<StreamPrediction>& predictions) {
    std::vector<int64_t> last;
    for (const StreamPrediction& p : predictions) last.push_back(p.last_frame);
    return last;
  }

  static std::shared_ptr<const model::VideoModel> model_;
  // The head stage goes first, finishing the round under way while the stepper is still there.
  CountingObserver observer_;
  HeadStepper head_stepper_;
  BackboneBatcher batcher_;
  WorkerPool head_stage_{1};
  StreamResources resources_;
};

std::shared_ptr<const model::VideoModel> StreamSessionTest::model_;

TEST_F(StreamSessionTest, EmitsOncePerEmitPeriodOfFrames) {
  StreamOptions options = RawPictures();
  options.emit_every_frames = 4;
  const std::vector<StreamPrediction> predictions = Stream(options, 8);
  EXPECT_THAT(LastFrames(predictions), ElementsAre(3, 7));
  for (const StreamPrediction& p : predictions) {
    EXPECT_EQ(p.first_frame, 0);  // a recurrent head covers the feed from its first frame
    EXPECT_EQ(p.frames_embedded, p.last_frame + 1);
    EXPECT_EQ(p.top_k.size(), 3u);  // all of the model's labels: fewer than the default 5
  }
  EXPECT_EQ(observer_.embedded(), 8);
}

TEST_F(StreamSessionTest, AStrideEmbedsEveryNthFrame) {
  StreamOptions options = RawPictures();
  options.embed_stride = 3;
  const std::vector<StreamPrediction> predictions = Stream(options, 8);
  EXPECT_THAT(LastFrames(predictions), ElementsAre(0, 3, 6));
  EXPECT_EQ(predictions.back().frames_embedded, 3);
  EXPECT_EQ(observer_.embedded(), 3);
}

TEST_F(StreamSessionTest, EmitsEachTimeTheMediaTimePassesAPeriodAndAtTheEnd) {
  StreamOptions options = RawPictures();
  options.emit_every_seconds = 0.25;
  // Frames at 0.0, 0.1, ..., 0.7 s: periods close at 0.3 and 0.5; the end emits 0.7.
  const std::vector<StreamPrediction> predictions = Stream(options, 8, /*interval_seconds=*/0.1);
  ASSERT_EQ(predictions.size(), 3u);
  EXPECT_THAT(predictions[0].last_seconds, DoubleNear(0.3, 1e-9));
  EXPECT_THAT(predictions[1].last_seconds, DoubleNear(0.5, 1e-9));
  EXPECT_THAT(predictions[2].last_seconds, DoubleNear(0.7, 1e-9));
}

TEST_F(StreamSessionTest, IsIdleOnlyWhileItExpectsInputThatDoesNotCome) {
  RecordingListener listener;
  auto session = std::make_shared<StreamSession>(RawPictures(), model_, /*recurrent=*/true,
                                                 resources_, &listener);
  session->Start();
  const StreamClock::time_point before = StreamClock::now();
  bool room = true;
  ASSERT_TRUE(session->PushPicture(std::string(kSide * kSide * 3, 0), 0, &room).ok());
  const StreamClock::time_point after = StreamClock::now();
  EXPECT_FALSE(session->IdleSince(before));  // input arrived since
  EXPECT_TRUE(session->IdleSince(after + std::chrono::seconds(1)));
  session->FinishInput();
  EXPECT_FALSE(session->IdleSince(after + std::chrono::seconds(1)));  // expects nothing more
  EXPECT_TRUE(listener.WaitForEnd().ok());
  session->Join();
}

TEST_F(StreamSessionTest, RefusesInputOfTheWrongKindAndAfterTheEnd) {
  RecordingListener listener;
  auto session = std::make_shared<StreamSession>(RawPictures(), model_, /*recurrent=*/true,
                                                 resources_, &listener);
  session->Start();
  bool room = true;
  const absl::Status bytes = session->PushBytes("\x00\x00\x01", &room);
  EXPECT_EQ(bytes.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.message(), HasSubstr("takes frames"));
  session->FinishInput();
  EXPECT_TRUE(listener.WaitForEnd().ok());
  EXPECT_EQ(session->PushPicture(std::string(kSide * kSide * 3, 0), 0, &room).code(),
            absl::StatusCode::kFailedPrecondition);
  session->Join();
}

// A GRU over frame differences trained per frame at 5 frames/s: "tiny" with segmentation.
model::ModelConfig SegmentationConfig() {
  model::ModelConfig config = vidclf::testing::TinyConfig();
  config.frame_differences = true;
  config.segmentation = model::SegmentationConfig{5};
  return config;
}

// A segmentation model samples the feed at its own rate (every fifth picture of 25 a second) and
// answers each sampled frame, one at a time: a prediction covers its own frame.
TEST_F(StreamSessionTest, ASegmentationModelAnswersEachFrameItSamplesAtItsOwnRate) {
  torch::manual_seed(2);
  auto created = model::VideoModel::Create(SegmentationConfig());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::shared_ptr<const model::VideoModel> segmentation = *std::move(created);
  StreamOptions options = RawPictures();
  options.default_sampling = true;
  options.emit_every_frames = 2;
  ASSERT_TRUE(FitToSegmentationModel(segmentation->config(), /*recurrent=*/true, options).ok());
  EXPECT_EQ(options.sample_fps, 5);
  const std::vector<StreamPrediction> predictions =
      Stream(options, 40, /*interval_seconds=*/0.04, segmentation);
  // Frames 0, 5, ..., 35 sampled; every second one emits.
  ASSERT_THAT(LastFrames(predictions), ElementsAre(5, 15, 25, 35));
  for (const StreamPrediction& p : predictions) {
    EXPECT_EQ(p.first_frame, p.last_frame);
    EXPECT_EQ(p.frames_embedded, (p.last_frame / 5) + 1);
  }
  EXPECT_EQ(observer_.embedded(), 8);
}

TEST(FitToSegmentationModelTest, TakesTheModelsRateAndRefusesAnotherOrWindows) {
  const model::ModelConfig config = SegmentationConfig();
  StreamOptions strided;
  strided.embed_stride = 3;
  const absl::Status stride = FitToSegmentationModel(config, /*recurrent=*/true, strided);
  EXPECT_EQ(stride.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stride.message(), HasSubstr("trained on 5 frames per second"));
  StreamOptions rate;
  rate.sample_fps = 5;
  EXPECT_TRUE(FitToSegmentationModel(config, /*recurrent=*/true, rate).ok());

  StreamOptions windows;
  windows.default_sampling = true;
  windows.windows = WindowOptions{8, 4};
  EXPECT_THAT(FitToSegmentationModel(config, /*recurrent=*/true, windows).message(),
              HasSubstr("leave window_frames and hop_frames unset"));
  windows.windows = WindowOptions{};
  ASSERT_TRUE(FitToSegmentationModel(config, /*recurrent=*/false, windows).ok());
  EXPECT_EQ(windows.windows->window_frames, 1);
  EXPECT_EQ(windows.windows->hop_frames, 1);

  StreamOptions live;
  live.default_sampling = true;
  EXPECT_THAT(FitToSegmentationModel(config, /*recurrent=*/false, live).message(),
              HasSubstr("offline segmentation model"));
  // A classification model keeps what the call asked for.
  StreamOptions classification = strided;
  EXPECT_TRUE(
      FitToSegmentationModel(vidclf::testing::TinyConfig(), /*recurrent=*/false, classification)
          .ok());
  EXPECT_EQ(classification.embed_stride, 3);
}

TEST(StreamOptionsTest, NamesTheFieldOutOfRange) {
  StreamOptions raw;
  raw.input = StreamOptions::Input::kRawRgb24;
  EXPECT_THAT(ValidateStreamOptions(raw).message(), HasSubstr("width and height"));
  StreamOptions uri;
  uri.input = StreamOptions::Input::kUri;
  EXPECT_THAT(ValidateStreamOptions(uri).message(), HasSubstr("URI"));
  EXPECT_TRUE(ValidateStreamOptions(StreamOptions()).ok());
}

}  // namespace
}  // namespace vidclf::engine
