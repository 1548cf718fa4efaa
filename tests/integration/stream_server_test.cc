// Live streams seen from outside: the real vidclf-server on a loopback port follows feeds sent
// over StreamClassify, and its predictions are checked against the model run offline on the
// same frames, decoded by the same media code in this process.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "model/onednn_resnet18.h"
#include "model/video_model.h"
#include "pipeline/segment_tracker.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/offline_model.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::HasSubstr;

// 40 frames of 160x120 H.264 in MPEG-TS, with B-frames and a keyframe every 10 frames.
constexpr char kFeed[] =
    "-f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 40 -c:v libx264 -g 10 -bf 2 -f mpegts";

// What one StreamClassify call brought back.
struct StreamOutcome {
  std::vector<v1::StreamPrediction> predictions;
  grpc::Status status;
  // Predictions the server said it dropped.
  int64_t dropped = 0;
};

std::string Metrics(const testing::ServerProcess& server) {
  auto page = testing::HttpGet(server.metrics_port(), "/metrics");
  EXPECT_TRUE(page.ok()) << page.status();
  return page.ok() ? *page : "";
}

class StreamServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("stream-server"));
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    testing::SaveModel(testing::TinyTransformerConfig("tiny-linear", "causal-linear"),
                       *dir_ + "/repo/tiny-linear/1");
    testing::SaveModel(testing::TinyTransformerConfig("tiny-softmax", "softmax"),
                       *dir_ + "/repo/tiny-softmax/1");
    feed_ = new std::string(testing::ReadFile(testing::CachedVideo(kFeed, ".ts")));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete feed_;
  }

  static std::unique_ptr<testing::ServerProcess> StartServer(
      std::vector<std::string> arguments = {}) {
    arguments.insert(arguments.begin(), {"--model-repository", *dir_ + "/repo"});
    auto server = testing::ServerProcess::Start(testing::ServerBinary(), arguments);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::unique_ptr<v1::VideoClassifier::Stub> Stub(const testing::ServerProcess& server) {
    return v1::VideoClassifier::NewStub(
        grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  }

  static v1::StreamConfig Config(const std::string& model) {
    v1::StreamConfig config;
    config.set_model(model);
    config.set_top_k(3);
    config.set_input(v1::StreamConfig::CONTAINER);
    return config;
  }

  // Sends `config`, then `messages` (chunks or frames) from a thread of their own, then ends the
  // feed; reads every prediction until the server finishes.
  static StreamOutcome Stream(const testing::ServerProcess& server, const v1::StreamConfig& config,
                              std::vector<v1::StreamClassifyRequest> messages) {
    auto stub = Stub(server);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    auto call = stub->StreamClassify(&context);
    std::thread writer([&] {
      v1::StreamClassifyRequest first;
      *first.mutable_config() = config;
      if (!call->Write(first)) return;
      for (const auto& message : messages) {
        if (!call->Write(message)) return;
      }
      call->WritesDone();
    });
    StreamOutcome outcome;
    for (v1::StreamPrediction prediction; call->Read(&prediction);) {
      outcome.dropped += prediction.dropped_before();
      outcome.predictions.push_back(prediction);
    }
    writer.join();
    outcome.status = call->Finish();
    return outcome;
  }

  // `bytes` in chunks of `chunk_bytes`.
  static std::vector<v1::StreamClassifyRequest> Chunks(const std::string& bytes,
                                                       size_t chunk_bytes = 4096) {
    std::vector<v1::StreamClassifyRequest> messages;
    for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
      messages.emplace_back().set_chunk(bytes.substr(offset, chunk_bytes));
    }
    return messages;
  }

  // The model `name` as the server loads it, and the feed's frames embedded offline: every frame,
  // decoded and preprocessed by the same media code.
  static std::unique_ptr<model::VideoModel> LoadModel(const std::string& name) {
    return testing::LoadServedModel(*dir_ + "/repo/" + name + "/1");
  }
  static torch::Tensor OfflineEmbeddings(const model::VideoModel& model, int stride = 1) {
    return testing::OfflineEmbeddings(model, *feed_, stride);
  }

  // The probabilities of `model`'s head over embeddings [first, last] (rows).
  static torch::Tensor Offline(const model::VideoModel& model, const torch::Tensor& embeddings,
                               int64_t first, int64_t last) {
    return testing::OfflineProbabilities(model, embeddings, first, last);
  }

  // Checks that each prediction's scores are those of `expected` for its labels, to `tolerance`.
  static void ExpectScores(const v1::StreamPrediction& prediction, const model::VideoModel& model,
                           const torch::Tensor& expected, double tolerance = 1e-4) {
    const auto& labels = model.config().labels;
    for (const v1::LabelScore& score : prediction.top_k()) {
      const auto label = std::find(labels.begin(), labels.end(), score.label());
      ASSERT_NE(label, labels.end()) << score.label();
      EXPECT_NEAR(score.score(), expected[label - labels.begin()].item<float>(), tolerance)
          << "frames " << prediction.first_frame() << ".." << prediction.last_frame();
    }
  }

  static std::string* dir_;
  static std::string* feed_;
};

std::string* StreamServerTest::dir_ = nullptr;
std::string* StreamServerTest::feed_ = nullptr;

// A recurrent head (the GRU; a transformer with causal-linear attention) steps once per frame:
// every prediction equals the head's forward() over all the frames embedded so far.
TEST_F(StreamServerTest, RecurrentHeadsEqualForwardOverEachPrefix) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (const std::string name : {"tiny", "tiny-linear"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<model::VideoModel> model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    const torch::Tensor embeddings = OfflineEmbeddings(*model);
    ASSERT_EQ(embeddings.size(0), 40);

    const StreamOutcome outcome = Stream(*server, Config(name), Chunks(*feed_));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    // One prediction per embedded frame, sent or reported dropped.
    EXPECT_EQ(static_cast<int64_t>(outcome.predictions.size()) + outcome.dropped, 40);
    ASSERT_FALSE(outcome.predictions.empty());
    EXPECT_EQ(outcome.predictions.back().frames_embedded(), 40);
    EXPECT_EQ(outcome.predictions.back().frames_seen(), 40);
    EXPECT_NEAR(outcome.predictions.back().last_seconds(), 39 / 25.0, 1e-3);
    for (const v1::StreamPrediction& prediction : outcome.predictions) {
      EXPECT_EQ(prediction.first_frame(), 0);
      EXPECT_EQ(prediction.last_frame() + 1, prediction.frames_embedded());
      EXPECT_GE(prediction.latency_ms(), 0);
      ExpectScores(prediction, *model, Offline(*model, embeddings, 0, prediction.last_frame()));
    }
  }
}

// Segment events are pipeline::SegmentTracker over the head's scores after each frame, spans
// running from frame to frame in media time; none is lost to dropped predictions, they are
// counted by model, label and kind, and with events_only only messages that carry events come.
TEST_F(StreamServerTest, SegmentEventsFollowTheScoresFrameByFrame) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::unique_ptr<model::VideoModel> model = LoadModel("tiny");
  ASSERT_NE(model, nullptr);
  const torch::Tensor embeddings = OfflineEmbeddings(*model);
  ASSERT_EQ(embeddings.size(0), 40);
  const std::vector<std::string>& labels = model->config().labels;

  // Low bounds, so that three labels' scores cross them on this feed.
  pipeline::SegmentOptions options;
  options.enter_score = 0.34f;
  options.hysteresis = 0.01f;
  options.min_seconds = 0.08;
  options.max_gap_seconds = 0.04;
  pipeline::SegmentTracker tracker(static_cast<int>(labels.size()), options);
  std::vector<std::string> expected;
  const auto describe = [&](const pipeline::SegmentEvent& event) {
    return absl::StrCat(event.kind == pipeline::SegmentEvent::Kind::kStart ? "start " : "end ",
                        labels[event.segment.label], " ", event.segment.start_seconds, "-",
                        event.segment.end_seconds);
  };
  for (int64_t frame = 0; frame < 40; ++frame) {
    const torch::Tensor scores = Offline(*model, embeddings, 0, frame).contiguous();
    const double from = std::max<int64_t>(frame - 1, 0) / 25.0;
    for (const pipeline::SegmentEvent& event : tracker.Add(
             from, frame / 25.0, absl::MakeConstSpan(scores.data_ptr<float>(), labels.size()))) {
      expected.push_back(describe(event));
    }
  }
  const std::vector<pipeline::SegmentEvent> at_end = tracker.Finish();
  for (const pipeline::SegmentEvent& event : at_end) expected.push_back(describe(event));
  ASSERT_GE(expected.size(), 2u) << "the feed crosses no bound: the test would show nothing";
  // Beside the events, a prediction for every frame, and one more for the events the feed's end
  // settles; those the client had not read yet when the next came are counted as dropped.
  const int64_t emitted = embeddings.size(0) + (at_end.empty() ? 0 : 1);

  for (const bool events_only : {false, true}) {
    SCOPED_TRACE(events_only ? "events only" : "beside the predictions");
    v1::StreamConfig config = Config("tiny");
    v1::SegmentEventOptions* events = config.mutable_segment_events();
    events->set_threshold(options.enter_score);
    events->set_hysteresis(options.hysteresis);
    events->set_min_seconds(options.min_seconds);
    events->set_max_gap_seconds(options.max_gap_seconds);
    events->set_events_only(events_only);
    const StreamOutcome outcome = Stream(*server, config, Chunks(*feed_));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    std::vector<std::string> received;
    for (const v1::StreamPrediction& prediction : outcome.predictions) {
      if (events_only) {
        EXPECT_GT(prediction.events_size(), 0);
      }
      for (const v1::SegmentEvent& event : prediction.events()) {
        pipeline::SegmentEvent as_tracked;
        as_tracked.kind = event.kind() == v1::SegmentEvent::SEGMENT_START
                              ? pipeline::SegmentEvent::Kind::kStart
                              : pipeline::SegmentEvent::Kind::kEnd;
        as_tracked.segment.label = static_cast<int>(
            std::find(labels.begin(), labels.end(), event.label()) - labels.begin());
        as_tracked.segment.start_seconds = event.start_seconds();
        as_tracked.segment.end_seconds = event.end_seconds();
        received.push_back(describe(as_tracked));
      }
    }
    EXPECT_EQ(received, expected);
    if (!events_only) {
      EXPECT_EQ(static_cast<int64_t>(outcome.predictions.size()) + outcome.dropped, emitted);
      for (const v1::StreamPrediction& prediction : outcome.predictions) {
        EXPECT_EQ(prediction.top_k_size(), 3);
      }
    }
  }
  // Each run's events, counted.
  const std::string metrics = Metrics(*server);
  double counted = 0;
  for (const absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, "vidclf_stream_events_total{")) continue;
    EXPECT_THAT(std::string(line), ::testing::HasSubstr("model=\"tiny\""));
    double value = 0;
    ASSERT_TRUE(absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) << line;
    counted += value;
  }
  EXPECT_EQ(counted, 2.0 * static_cast<double>(expected.size()));

  // Bounds the tracker cannot use are refused, naming them.
  v1::StreamConfig bad = Config("tiny");
  bad.mutable_segment_events()->set_hysteresis(0.9f);
  const StreamOutcome refused = Stream(*server, bad, Chunks(*feed_));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(), ::testing::HasSubstr("hysteresis"));
}

// With --stream-step-weights int8, the causal-linear head steps through int8 weights (the start-up
// log says so) and its predictions stay within what rounding the weights moves them; the GRU keeps
// float32 and its predictions stay exact.
TEST_F(StreamServerTest, Int8StepWeightsStayNearTheExactPredictions) {
  auto server = StartServer({"--stream-step-weights", "int8"});
  ASSERT_NE(server, nullptr);
  for (const auto& [name, int8, tolerance] : std::vector<std::tuple<std::string, bool, double>>{
           {"tiny", false, 1e-4}, {"tiny-linear", true, 1e-2}}) {
    SCOPED_TRACE(name);
    const std::string loaded = "loaded model " + name + " version";
    const size_t line = server->output().find(loaded);
    ASSERT_NE(line, std::string::npos) << server->output();
    const std::string logged =
        server->output().substr(line, server->output().find('\n', line) - line);
    EXPECT_EQ(logged.find("int8 stream step weights") != std::string::npos, int8) << logged;
    const std::unique_ptr<model::VideoModel> model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    const torch::Tensor embeddings = OfflineEmbeddings(*model);
    const StreamOutcome outcome = Stream(*server, Config(name), Chunks(*feed_));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    ASSERT_FALSE(outcome.predictions.empty());
    EXPECT_EQ(outcome.predictions.back().frames_seen(), 40);
    for (const v1::StreamPrediction& prediction : outcome.predictions) {
      ExpectScores(prediction, *model, Offline(*model, embeddings, 0, prediction.last_frame()),
                   tolerance);
    }
  }
}

// With --backbone-kernels winograd the server says which models run Winograd's kernels (those
// where the CPU has them), and a stream's predictions stay those of the model as trained.
TEST_F(StreamServerTest, WinogradBackboneKeepsThePredictions) {
  auto server = StartServer({"--backbone-kernels", "winograd"});
  ASSERT_NE(server, nullptr);
  const std::string loaded = "loaded model tiny version";
  const size_t line = server->output().find(loaded);
  ASSERT_NE(line, std::string::npos) << server->output();
  const std::string logged =
      server->output().substr(line, server->output().find('\n', line) - line);
  EXPECT_EQ(logged.find("Winograd 3x3 convolutions") != std::string::npos,
            model::OneDnnResNet18::WinogradAvailable())
      << logged;
  const std::unique_ptr<model::VideoModel> model = LoadModel("tiny");
  ASSERT_NE(model, nullptr);
  const torch::Tensor embeddings = OfflineEmbeddings(*model);
  const StreamOutcome outcome = Stream(*server, Config("tiny"), Chunks(*feed_));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  ASSERT_FALSE(outcome.predictions.empty());
  for (const v1::StreamPrediction& prediction : outcome.predictions) {
    ExpectScores(prediction, *model, Offline(*model, embeddings, 0, prediction.last_frame()), 1e-3);
  }
}

// A head without a recurrent step classifies the model's sliding window (16 frames, re-evaluated
// every 4): each prediction equals forward() over the frames it says it covers.
TEST_F(StreamServerTest, SlidingWindowHeadsClassifyTheWindowTheySay) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::unique_ptr<model::VideoModel> model = LoadModel("tiny-softmax");
  ASSERT_NE(model, nullptr);
  const torch::Tensor embeddings = OfflineEmbeddings(*model);

  v1::StreamConfig config = Config("tiny-softmax");
  config.set_emit_every_frames(5);
  const StreamOutcome outcome = Stream(*server, config, Chunks(*feed_));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(static_cast<int64_t>(outcome.predictions.size()) + outcome.dropped, 8);
  bool slid = false;
  for (const v1::StreamPrediction& prediction : outcome.predictions) {
    EXPECT_EQ(prediction.frames_embedded() % 5, 0);
    EXPECT_LE(prediction.last_frame() - prediction.first_frame() + 1, 16);
    slid = slid || prediction.first_frame() > 0;
    ExpectScores(prediction, *model,
                 Offline(*model, embeddings, prediction.first_frame(), prediction.last_frame()));
  }
  EXPECT_TRUE(slid) << "the window never moved past the first frame";
}

// With an embed stride, only every k-th frame is embedded, and an emit period in seconds of
// media time sets when predictions come.
TEST_F(StreamServerTest, EmbedStrideAndEmitPeriodInSeconds) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::unique_ptr<model::VideoModel> model = LoadModel("tiny");
  ASSERT_NE(model, nullptr);
  const torch::Tensor every_third = OfflineEmbeddings(*model, 3);

  v1::StreamConfig config = Config("tiny");
  config.set_embed_stride(3);
  config.set_emit_every_seconds(0.4);  // 10 frames of the feed
  const StreamOutcome outcome = Stream(*server, config, Chunks(*feed_));
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  // Embedded frames 0, 3, ..., 39 (14 of them); periods close at frames 12, 21, 30 and 39 (the
  // first at or past 0.4, 0.8, 1.2 and 1.6 s), then the end of the feed answers for the rest.
  ASSERT_EQ(static_cast<int64_t>(outcome.predictions.size()) + outcome.dropped, 4);
  const v1::StreamPrediction& last = outcome.predictions.back();
  EXPECT_EQ(last.frames_embedded(), 14);
  EXPECT_EQ(last.frames_seen(), 40);
  EXPECT_EQ(last.last_frame(), 39);
  for (const v1::StreamPrediction& prediction : outcome.predictions) {
    EXPECT_EQ(prediction.last_frame() % 3, 0);
    ExpectScores(prediction, *model,
                 Offline(*model, every_third, 0, prediction.frames_embedded() - 1));
  }
}

// Single pictures, as PNG and as raw RGB24, are classified as the same frames in a video are.
TEST_F(StreamServerTest, PicturesAsPngOrRawRgb) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string dir = *dir_ + "/pictures";
  std::filesystem::create_directories(dir);
  const std::string source = "-f lavfi -i testsrc2=size=96x72:rate=25 -frames:v 6";
  testing::MakeVideo(absl::StrCat(source, " -f rawvideo -pix_fmt rgb24"), dir + "/frames.rgb");
  testing::MakeVideo(source, dir + "/%d.png");
  const std::string rgb = testing::ReadFile(dir + "/frames.rgb");
  const size_t frame_bytes = 96 * 72 * 3;
  ASSERT_EQ(rgb.size(), 6 * frame_bytes);
  std::vector<v1::StreamClassifyRequest> raw;
  std::vector<v1::StreamClassifyRequest> png;
  for (int i = 0; i < 6; ++i) {
    raw.emplace_back().mutable_frame()->set_data(rgb.substr(i * frame_bytes, frame_bytes));
    png.emplace_back().mutable_frame()->set_data(
        testing::ReadFile(absl::StrCat(dir, "/", i + 1, ".png")));
  }
  v1::StreamConfig raw_config = Config("tiny");
  raw_config.set_input(v1::StreamConfig::RAW_RGB24);
  raw_config.set_width(96);
  raw_config.set_height(72);
  v1::StreamConfig png_config = Config("tiny");
  png_config.set_input(v1::StreamConfig::ENCODED_IMAGES);
  png_config.set_emit_every_frames(6);
  raw_config.set_emit_every_frames(6);

  const StreamOutcome from_raw = Stream(*server, raw_config, raw);
  const StreamOutcome from_png = Stream(*server, png_config, png);
  ASSERT_TRUE(from_raw.status.ok()) << from_raw.status.error_message();
  ASSERT_TRUE(from_png.status.ok()) << from_png.status.error_message();
  ASSERT_EQ(from_raw.predictions.size(), 1u);
  ASSERT_EQ(from_png.predictions.size(), 1u);
  EXPECT_EQ(from_png.predictions[0].frames_seen(), 6);
  EXPECT_NEAR(from_png.predictions[0].last_seconds(), 5 / 25.0, 1e-9);  // no timestamps sent
  ASSERT_EQ(from_raw.predictions[0].top_k_size(), from_png.predictions[0].top_k_size());
  for (int i = 0; i < from_raw.predictions[0].top_k_size(); ++i) {
    EXPECT_EQ(from_raw.predictions[0].top_k(i).label(), from_png.predictions[0].top_k(i).label());
    EXPECT_NEAR(from_raw.predictions[0].top_k(i).score(), from_png.predictions[0].top_k(i).score(),
                1e-5);
  }

  // A picture of the wrong size ends the stream with a message that says so.
  raw[3].mutable_frame()->mutable_data()->resize(100);
  const StreamOutcome wrong = Stream(*server, raw_config, raw);
  EXPECT_EQ(wrong.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(wrong.status.error_message(), HasSubstr("frame 3"));
}

// Eight feeds at once: each gets its predictions in frame order, none mixed with another's, and
// each equals its model over its frames so far, though the heads of streams with frames ready at
// the same time step together.
TEST_F(StreamServerTest, EightStreamsAtOnceKeepTheirFrameOrderAndStepTogether) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::unique_ptr<model::VideoModel> models[] = {LoadModel("tiny"), LoadModel("tiny-linear")};
  ASSERT_TRUE(models[0] && models[1]);
  const torch::Tensor embeddings[] = {OfflineEmbeddings(*models[0]), OfflineEmbeddings(*models[1])};
  std::vector<StreamOutcome> outcomes(8);
  std::vector<std::thread> streams;
  for (int i = 0; i < 8; ++i) {
    streams.emplace_back([&, i] {
      outcomes[i] = Stream(*server, Config(i % 2 == 0 ? "tiny" : "tiny-linear"), Chunks(*feed_));
    });
  }
  for (auto& stream : streams) stream.join();
  for (int i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(outcomes[i].status.ok()) << outcomes[i].status.error_message();
    EXPECT_EQ(static_cast<int64_t>(outcomes[i].predictions.size()) + outcomes[i].dropped, 40);
    for (size_t p = 1; p < outcomes[i].predictions.size(); ++p) {
      EXPECT_GT(outcomes[i].predictions[p].last_frame(),
                outcomes[i].predictions[p - 1].last_frame());
    }
    for (const v1::StreamPrediction& prediction : outcomes[i].predictions) {
      ExpectScores(prediction, *models[i % 2],
                   Offline(*models[i % 2], embeddings[i % 2], 0, prediction.last_frame()));
    }
  }
  // Each stream stepped once per frame; some steps took several streams at once. Every frame's
  // time is told by stage, each stage taking some of it.
  auto metrics = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(testing::MetricValue(*metrics, "vidclf_stream_head_step_streams_sum"), 8 * 40);
  EXPECT_LT(testing::MetricValue(*metrics, "vidclf_stream_head_step_streams_count"), 8 * 40);
  for (const char* stage : {"decode", "convert", "wait", "embed", "head"}) {
    SCOPED_TRACE(stage);
    const std::string labels = absl::StrCat("{stage=\"", stage, "\"}");
    EXPECT_EQ(testing::MetricValue(*metrics, "vidclf_stream_frame_stage_seconds_count" + labels),
              8 * 40);
    // A frame need not wait for room among its stream's frames in flight.
    if (absl::string_view(stage) == "wait") continue;
    EXPECT_GT(testing::MetricValue(*metrics, "vidclf_stream_frame_stage_seconds_sum" + labels), 0);
  }
}

// Bad configs and feeds are refused with a message that says what is wrong.
TEST_F(StreamServerTest, BadConfigsAndFeedsAreRefused) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  v1::StreamConfig no_input = Config("tiny");
  no_input.clear_input();
  StreamOutcome outcome = Stream(*server, no_input, {});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("input"));

  outcome = Stream(*server, Config("no-such-model"), {});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::NOT_FOUND);

  v1::StreamConfig attention = Config("tiny");
  attention.set_attention("softmax");
  outcome = Stream(*server, attention, {});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  outcome = Stream(*server, Config("tiny"), Chunks(std::string(50000, 'x')));
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::StreamClassifyRequest frame;
  frame.mutable_frame()->set_data("not a chunk");
  outcome = Stream(*server, Config("tiny"), {frame});
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("container chunks"));

  // The server still serves.
  outcome = Stream(*server, Config("tiny"), Chunks(*feed_));
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
}

// Past --max-streams a new stream is refused; a cancelled stream and one left idle free their
// state; draining ends the streams open with UNAVAILABLE.
TEST_F(StreamServerTest, LimitsCancellationIdleTimeoutAndDrain) {
  auto server = StartServer({"--max-streams", "2", "--stream-idle-timeout-s", "2"});
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);
  auto open = [&](grpc::ClientContext* context) {
    auto call = stub->StreamClassify(context);
    v1::StreamClassifyRequest first;
    *first.mutable_config() = Config("tiny");
    EXPECT_TRUE(call->Write(first));
    v1::StreamClassifyRequest chunk;
    chunk.set_chunk(feed_->substr(0, 20000));
    EXPECT_TRUE(call->Write(chunk));
    return call;
  };
  auto active = [&] {
    auto page = testing::HttpGet(server->metrics_port(), "/metrics");
    return page.ok() ? testing::MetricValue(*page, "vidclf_active_streams{model=\"tiny\"}") : -1;
  };
  // Until the gauge has read `value` three times in a row: a stream whose client cancelled
  // before the server read its config is opened (and then ended) after the client is done.
  auto wait_for_active = [&](double value) {
    for (int i = 0, in_a_row = 0; i < 200 && in_a_row < 3; ++i) {
      in_a_row = active() == value ? in_a_row + 1 : 0;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return active();
  };

  grpc::ClientContext first_context, second_context, third_context;
  auto first = open(&first_context);
  auto second = open(&second_context);
  ASSERT_EQ(wait_for_active(2), 2);
  auto third = open(&third_context);
  third->WritesDone();
  EXPECT_EQ(third->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Cancelled: its state goes at once.
  first_context.TryCancel();
  EXPECT_EQ(first->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(wait_for_active(1), 1);
  // Idle: the second sends nothing more and is ended after 2 s.
  const absl::Time idle_from = absl::Now();
  const grpc::Status idle = second->Finish();
  EXPECT_EQ(idle.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << idle.error_message();
  EXPECT_THAT(idle.error_message(), HasSubstr("idle"));
  EXPECT_GE(absl::Now() - idle_from, absl::Seconds(1));
  EXPECT_EQ(wait_for_active(0), 0);

  // 200 streams opened and abandoned leave no memory behind.
  auto resident = [&] {
    auto page = testing::HttpGet(server->metrics_port(), "/metrics");
    return page.ok() ? testing::MetricValue(*page, "process_resident_memory_bytes") : -1;
  };
  auto abandon = [&](int count) {
    for (int i = 0; i < count; ++i) {
      grpc::ClientContext context;
      auto call = open(&context);
      context.TryCancel();
      call->Finish();
    }
    return wait_for_active(0);
  };
  ASSERT_EQ(abandon(20), 0);
  const double before = resident();
  ASSERT_EQ(abandon(200), 0);
  EXPECT_LT(resident() - before, 30e6) << "resident memory grew over 200 abandoned streams";

  // SIGTERM ends a stream open with UNAVAILABLE, and the server exits cleanly.
  grpc::ClientContext draining_context;
  auto draining = open(&draining_context);
  ASSERT_EQ(wait_for_active(1), 1);
  server->Signal(SIGTERM);
  const grpc::Status drained = draining->Finish();
  EXPECT_EQ(drained.error_code(), grpc::StatusCode::UNAVAILABLE) << drained.error_message();
  EXPECT_EQ(server->Stop(), 0);
}

// Every call makes progress or ends: streams count against --max-streams from their first byte,
// before their config, and uploads against the in-flight bound; a stream or an upload that sends
// nothing, or only empty chunks, ends with DEADLINE_EXCEEDED for being idle: not before the idle
// timeout, and long before the call's own deadline (how long after the timeout depends on how
// busy the machine is: 3 s more was seen with the demo models training beside it).
TEST_F(StreamServerTest, CallsThatNeverProgressAreCountedAndEndWhenIdle) {
  constexpr int kSilentStreams = 100;
  constexpr int kSilentUploads = 50;
  const absl::Duration kIdle = absl::Seconds(2);
  // Room for the silent streams and the two below that send something.
  auto server = StartServer(
      {"--max-streams", std::to_string(kSilentStreams + 2), "--stream-idle-timeout-s", "2"});
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);
  struct Ended {
    grpc::Status status;
    absl::Duration after;
  };
  std::vector<Ended> ended(kSilentStreams + kSilentUploads + 4);
  std::vector<std::thread> calls;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (size_t i = 0; i < ended.size(); ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  }
  const auto run = [&](size_t i, auto body) {
    calls.emplace_back([&, i, body] {
      const absl::Time start = absl::Now();
      ended[i].status = body(contexts[i].get());
      ended[i].after = absl::Now() - start;
    });
  };
  // Streams and uploads that never send a message.
  for (int i = 0; i < kSilentStreams; ++i) {
    run(i, [&](grpc::ClientContext* context) { return stub->StreamClassify(context)->Finish(); });
  }
  for (int i = 0; i < kSilentUploads; ++i) {
    run(kSilentStreams + i, [&](grpc::ClientContext* context) {
      v1::ClassifyResponse response;
      return stub->ClassifyUpload(context, &response)->Finish();
    });
  }
  // A stream of empty chunks, and an upload of them, one every 300 ms.
  const auto empty_chunks = [&](auto& call, auto message) {
    while (call->Write(message)) absl::SleepFor(absl::Milliseconds(300));
  };
  run(kSilentStreams + kSilentUploads, [&](grpc::ClientContext* context) {
    auto call = stub->StreamClassify(context);
    v1::StreamClassifyRequest config;
    *config.mutable_config() = Config("tiny");
    if (!call->Write(config)) return call->Finish();
    v1::StreamClassifyRequest empty;
    empty.set_chunk("");
    empty_chunks(call, empty);
    return call->Finish();
  });
  run(kSilentStreams + kSilentUploads + 1, [&](grpc::ClientContext* context) {
    v1::ClassifyResponse response;
    auto call = stub->ClassifyUpload(context, &response);
    v1::ClassifyUploadRequest settings;
    settings.mutable_settings()->set_model("tiny");
    if (!call->Write(settings)) return call->Finish();
    v1::ClassifyUploadRequest empty;
    empty.set_chunk("");
    empty_chunks(call, empty);
    return call->Finish();
  });
  // An upload that stops after its first 100 KB, and a stream that stops after its first bytes.
  run(kSilentStreams + kSilentUploads + 2, [&](grpc::ClientContext* context) {
    v1::ClassifyResponse response;
    auto call = stub->ClassifyUpload(context, &response);
    v1::ClassifyUploadRequest first;
    first.mutable_settings()->set_model("tiny");
    first.set_chunk(std::string(100 << 10, 'x'));
    call->Write(first);
    return call->Finish();
  });
  run(kSilentStreams + kSilentUploads + 3, [&](grpc::ClientContext* context) {
    auto call = stub->StreamClassify(context);
    v1::StreamClassifyRequest config;
    *config.mutable_config() = Config("tiny");
    call->Write(config);
    v1::StreamClassifyRequest chunk;
    chunk.set_chunk(feed_->substr(0, 1000));
    call->Write(chunk);
    return call->Finish();
  });

  // While they are open, the silent streams are counted and the bound refuses the next.
  const auto metric = [&](const std::string& name) {
    auto page = testing::HttpGet(server->metrics_port(), "/metrics");
    return page.ok() ? testing::MetricValue(*page, name) : -1;
  };
  // The stream with a config counts as "unknown" too until its config has been read.
  double awaiting_config = 0;
  for (int i = 0; i < 100 && awaiting_config != kSilentStreams; ++i) {
    awaiting_config = metric("vidclf_active_streams{model=\"unknown\"}");
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(awaiting_config, kSilentStreams);
  EXPECT_GE(metric("vidclf_inflight_requests"), kSilentUploads);
  {
    grpc::ClientContext context;
    auto call = stub->StreamClassify(&context);
    v1::StreamClassifyRequest config;
    *config.mutable_config() = Config("tiny");
    call->Write(config);
    call->WritesDone();
    const grpc::Status refused = call->Finish();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << refused.error_message();
  }

  for (std::thread& call : calls) call.join();
  for (size_t i = 0; i < ended.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ended[i].status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << ended[i].status.error_message();
    EXPECT_THAT(ended[i].status.error_message(), HasSubstr("idle"));
    EXPECT_GE(ended[i].after, kIdle);
    EXPECT_LT(ended[i].after, absl::Seconds(30));
  }
  EXPECT_EQ(metric("vidclf_active_streams{model=\"unknown\"}"), 0);
  EXPECT_EQ(metric("vidclf_inflight_requests"), 0);
  EXPECT_EQ(server->Stop(), 0);
}

// A live HTTP source that drops: the python server below sends the feed without a length, as
// a camera's HTTP stream does, one connection per entry of its plan ("half": the first half
// then a close, "full": all of it), then stops listening.
constexpr char kDroppingSource[] = R"py(import socket, sys
port, path, plan = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
data = open(path, "rb").read()
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(8)
while plan:
    connection, _ = server.accept()
    if not connection.recv(65536).startswith(b"GET"):  # a probe of the port
        connection.close()
        continue
    part = plan.pop(0)
    connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: video/mp2t\r\n\r\n")
    connection.sendall(data if part == "full" else data[: len(data) // 2 // 188 * 188])
    connection.close()
    print("served", part, flush=True)
server.close()
)py";

// What one WatchSource call brought back.
struct WatchOutcome {
  std::vector<v1::StreamPrediction> predictions;
  std::vector<v1::SourceEvent> events;
  grpc::Status status;
  // Predictions the server said it dropped.
  int64_t dropped = 0;
};

WatchOutcome Watch(v1::VideoClassifier::Stub& stub, const v1::WatchSourceRequest& request) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
  auto reader = stub.WatchSource(&context, request);
  WatchOutcome outcome;
  for (v1::WatchSourceResponse response; reader->Read(&response);) {
    if (response.has_prediction()) {
      outcome.predictions.push_back(response.prediction());
      outcome.dropped += response.prediction().dropped_before();
    }
    if (response.has_source()) outcome.events.push_back(response.source());
  }
  outcome.status = reader->Finish();
  return outcome;
}

// WatchSource follows a live source again after each drop, tells the client each time, goes on
// numbering frames and stepping the head where it left off, and gives up after the most
// attempts in a row allowed.
TEST_F(StreamServerTest, WatchSourceFollowsADroppingSourceAgain) {
  const std::string feed_path = *dir_ + "/feed.ts";
  testing::WriteFile(feed_path, *feed_);
  const std::string script_path = *dir_ + "/dropping_source.py";
  testing::WriteFile(script_path, kDroppingSource);
  auto source = testing::PythonServer::Start(
      [&](int port) -> std::vector<std::string> {
        return {script_path, std::to_string(port), feed_path, "half,full"};
      },
      *dir_ + "/dropping_source.log");
  ASSERT_NE(source, nullptr);
  auto server = StartServer({"--allow-uri", source->http() + "/", "--source-reconnects", "3"});
  ASSERT_NE(server, nullptr);

  v1::WatchSourceRequest request;
  request.set_uri(source->http() + "/camera.ts");
  *request.mutable_config() = Config("tiny");
  request.mutable_config()->set_emit_every_frames(5);
  request.set_max_reconnects(2);
  const WatchOutcome outcome = Watch(*Stub(*server), request);

  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << outcome.status.error_message();
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("2 attempts in a row"));
  // Connected, dropped after half the feed, connected again, dropped after the whole feed, then
  // two attempts find the source gone.
  std::vector<std::pair<v1::SourceEvent::Kind, uint32_t>> events;
  for (const auto& event : outcome.events) events.emplace_back(event.kind(), event.attempt());
  const auto connected = v1::SourceEvent::CONNECTED;
  const auto dropped = v1::SourceEvent::DROPPED;
  EXPECT_THAT(events, ::testing::ElementsAre(std::pair(connected, 1u), std::pair(dropped, 1u),
                                             std::pair(connected, 2u), std::pair(dropped, 1u),
                                             std::pair(dropped, 2u)))
      << source->log();
  ASSERT_EQ(outcome.events.size(), 5u);
  EXPECT_THAT(outcome.events[0].message(), HasSubstr("h264 160x120"));
  const uint64_t half = outcome.events[1].frames_seen();
  EXPECT_GT(half, 0u);
  EXPECT_LT(half, 40u);
  EXPECT_EQ(outcome.events[3].frames_seen(), half + 40);
  EXPECT_GT(outcome.events[1].retry_in_seconds(), 0);

  // One feed as far as the head is concerned: frames and times go on across the drop, and the
  // GRU's predictions cover everything from the first frame.
  ASSERT_FALSE(outcome.predictions.empty());
  for (size_t i = 0; i < outcome.predictions.size(); ++i) {
    const v1::StreamPrediction& prediction = outcome.predictions[i];
    EXPECT_EQ(prediction.first_frame(), 0u);
    if (i > 0) {
      EXPECT_GT(prediction.last_frame(), outcome.predictions[i - 1].last_frame());
      EXPECT_GT(prediction.last_seconds(), outcome.predictions[i - 1].last_seconds());
    }
  }
  EXPECT_EQ(outcome.predictions.back().frames_seen(), half + 40);
  EXPECT_EQ(outcome.predictions.back().frames_embedded(), half + 40);
  EXPECT_EQ(testing::MetricValue(Metrics(*server), "vidclf_source_reconnects_total"), 3);
}

// A file read to its end ends the call with OK; URIs the server may not pull are refused at once;
// with no reconnection allowed, a source that cannot be reached ends the call at once.
TEST_F(StreamServerTest, WatchSourceReadsAFileAndRefusesWhatItMayNotPull) {
  const std::string allowed = *dir_ + "/watched";
  std::filesystem::create_directories(allowed);
  testing::WriteFile(allowed + "/feed.ts", *feed_);
  const int unused_port = testing::UnusedLoopbackPort();
  const std::string unreachable = absl::StrCat("http://127.0.0.1:", unused_port, "/");
  auto server = StartServer({"--allow-uri", absl::StrCat("file://", allowed, "/,", unreachable)});
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);

  v1::WatchSourceRequest request;
  request.set_uri(absl::StrCat("file://", allowed, "/feed.ts"));
  *request.mutable_config() = Config("tiny");
  request.mutable_config()->set_emit_every_frames(8);
  WatchOutcome outcome = Watch(*stub, request);
  EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  ASSERT_EQ(outcome.events.size(), 1u);
  EXPECT_EQ(outcome.events[0].kind(), v1::SourceEvent::CONNECTED);
  // One prediction every 8 frames, sent or reported dropped.
  EXPECT_EQ(static_cast<int64_t>(outcome.predictions.size()) + outcome.dropped, 5);
  ASSERT_FALSE(outcome.predictions.empty());
  EXPECT_EQ(outcome.predictions.back().last_frame(), 39u);

  request.set_uri(absl::StrCat("file://", *dir_, "/repo/tiny/1/model.json"));
  outcome = Watch(*stub, request);
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << outcome.status.error_message();
  EXPECT_TRUE(outcome.events.empty());

  request.set_uri(unreachable + "camera.ts");
  request.set_max_reconnects(0);
  outcome = Watch(*stub, request);
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << outcome.status.error_message();
  EXPECT_TRUE(outcome.events.empty());
  EXPECT_TRUE(outcome.predictions.empty());
  EXPECT_EQ(testing::MetricValue(Metrics(*server), "vidclf_active_streams"), 0);
}

}  // namespace
}  // namespace vidclf
