// ClassifySegments seen from outside: the real vidclf-server on a loopback port answers windows
// and segments of a video sent whole, uploaded in chunks or pulled from a URI, checked against
// the model run offline on the same frames, decoded by the same media code in this process.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
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

// 40 frames of 160x120 H.264 at 25 fps in MPEG-TS, with B-frames and a keyframe every 10 frames.
constexpr char kVideo[] =
    "-f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 40 -c:v libx264 -g 10 -bf 2 -f mpegts";
// 2 minutes of the same, for a call cancelled midway.
constexpr char kLongVideo[] =
    "-f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 3000 -c:v libx264 -preset ultrafast "
    "-g 50 -f mpegts";

// What one call brought back.
struct Outcome {
  std::vector<v1::ClassifySegmentsResponse> responses;
  grpc::Status status;
  std::vector<v1::SegmentWindow> Windows() const {
    std::vector<v1::SegmentWindow> windows;
    for (const auto& response : responses) {
      windows.insert(windows.end(), response.windows().begin(), response.windows().end());
    }
    return windows;
  }
  std::vector<v1::SegmentEvent> Events() const {
    std::vector<v1::SegmentEvent> events;
    for (const auto& response : responses) {
      events.insert(events.end(), response.events().begin(), response.events().end());
    }
    return events;
  }
};

double StreamFramesCounted(const testing::ServerProcess& server) {
  auto page = testing::HttpGet(server.metrics_port(), "/metrics");
  EXPECT_TRUE(page.ok()) << page.status();
  for (const absl::string_view line : absl::StrSplit(page.ok() ? *page : "", '\n')) {
    double value = 0;
    if (absl::StartsWith(line, "vidclf_stream_frames_total ") &&
        absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &value)) {
      return value;
    }
  }
  return -1;
}

// Black for 3 s, white for 5 s, black for 4 s: segment boundaries at 3 s and 8 s.
constexpr char kDarkLightDark[] =
    "-f lavfi -i color=c=black:s=160x120:r=25:d=3 -f lavfi -i color=c=white:s=160x120:r=25:d=5 "
    "-f lavfi -i color=c=black:s=160x120:r=25:d=4 -filter_complex '[0:v][1:v][2:v]concat=n=3' "
    "-c:v libx264 -g 50 -f mp4";
// One black frame, then one white.
constexpr char kDarkThenLight[] =
    "-f lavfi -i color=c=black:s=160x120:r=25:d=0.04 -f lavfi -i "
    "color=c=white:s=160x120:r=25:d=0.04 -filter_complex '[0:v][1:v]concat=n=2' -c:v libx264 "
    "-f mp4";

// A model that tells dark frames from light ones: a bag-of-frames head (the mean of its window's
// standardised embeddings through one linear layer) centred between a black frame's embedding and
// a white one's, weighing the offset along their difference, so that a window's answer is the
// share of its frames on either side.
void SaveContrastModel(const std::string& bundle_dir) {
  model::ModelConfig config = testing::TinyConfig();
  config.name = "contrast";
  config.labels = {"dark", "light"};
  config.head = model::HeadType::kBagOfFrames;
  torch::manual_seed(1);
  auto created = model::VideoModel::Create(config);
  ASSERT_TRUE(created.ok()) << created.status();
  model::VideoModel& model = **created;
  const torch::Tensor both = testing::OfflineEmbeddings(
      model, testing::ReadFile(testing::CachedVideo(kDarkThenLight, ".mp4")));
  ASSERT_EQ(both.size(0), 2);
  const torch::Tensor dark = both[0], light = both[1], difference = light - dark;
  ASSERT_GT(difference.norm().item<float>(), 0);
  // logit(light) - logit(dark) = 2 s difference . (x - middle): +-10 at a white or black frame.
  const torch::Tensor weight = difference * (10 / difference.square().sum());
  torch::NoGradGuard no_grad;
  auto buffers = model.head().named_buffers();
  buffers["embedding_mean"].copy_((dark + light) / 2);
  buffers["embedding_std"].fill_(1);
  auto parameters = model.head().named_parameters();
  parameters["classifier.weight"].copy_(torch::stack({-weight, weight}));
  parameters["classifier.bias"].zero_();
  const absl::Status saved = model.Save(bundle_dir);
  ASSERT_TRUE(saved.ok()) << saved;
}

class SegmentsServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("segments-server"));
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    testing::SaveModel(testing::TinyTransformerConfig("tiny-linear", "causal-linear"),
                       *dir_ + "/repo/tiny-linear/1");
    testing::SaveModel(testing::TinyTransformerConfig("tiny-softmax", "softmax"),
                       *dir_ + "/repo/tiny-softmax/1");
    SaveContrastModel(*dir_ + "/repo/contrast/1");
    // Segmentation models over frame differences, trained (here: drawn) at 5 frames/s: an online
    // GRU and an offline softmax transformer.
    for (model::ModelConfig config :
         {testing::TinyConfig(), testing::TinyTransformerConfig("seg-softmax", "softmax")}) {
      if (config.head == model::HeadType::kGru) config.name = "seg-gru";
      config.frame_differences = true;
      config.segmentation = model::SegmentationConfig{5};
      testing::SaveModel(config, absl::StrCat(*dir_, "/repo/", config.name, "/1"));
    }
    video_ = new std::string(testing::ReadFile(testing::CachedVideo(kVideo, ".ts")));
    // The same frames in an MP4 whose moov box comes last, which only a whole video can be.
    std::filesystem::create_directories(*dir_ + "/videos");
    int exit_code = 0;
    testing::RunCommand(absl::StrCat("ffmpeg -v error -y -i ", testing::CachedVideo(kVideo, ".ts"),
                                     " -c copy ", *dir_, "/videos/video.mp4"),
                        &exit_code);
    ASSERT_EQ(exit_code, 0);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete video_;
  }

  static std::unique_ptr<testing::ServerProcess> StartServer() {
    auto server = testing::ServerProcess::Start(
        testing::ServerBinary(), {"--model-repository", *dir_ + "/repo", "--allow-uri",
                                  absl::StrCat("file://", *dir_, "/videos/")});
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::unique_ptr<v1::VideoClassifier::Stub> Stub(const testing::ServerProcess& server) {
    return v1::VideoClassifier::NewStub(
        grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  }

  // The segment bounds Settings asks for: low enough for the untrained heads' scores (about a
  // third each) to cross.
  static pipeline::SegmentOptions SettingsBounds() {
    pipeline::SegmentOptions bounds;
    bounds.enter_score = 0.34f;
    bounds.hysteresis = 0.01f;
    bounds.min_seconds = 0.08;
    bounds.max_gap_seconds = 0.04;
    return bounds;
  }

  // Every frame, windows of 8 every 4, and SettingsBounds.
  static v1::ClassifySegmentsRequest Settings(const std::string& model) {
    v1::ClassifySegmentsRequest request;
    request.set_model(model);
    request.set_top_k(3);
    request.set_every_nth_frame(1);
    request.set_window_frames(8);
    request.set_hop_frames(4);
    const pipeline::SegmentOptions bounds = SettingsBounds();
    v1::SegmentEventOptions* segments = request.mutable_segments();
    segments->set_threshold(bounds.enter_score);
    segments->set_hysteresis(bounds.hysteresis);
    segments->set_min_seconds(bounds.min_seconds);
    segments->set_max_gap_seconds(bounds.max_gap_seconds);
    return request;
  }

  static Outcome Segments(const testing::ServerProcess& server,
                          const v1::ClassifySegmentsRequest& request,
                          const std::function<void(grpc::ClientContext&)>& after_first = {}) {
    auto stub = Stub(server);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    auto call = stub->ClassifySegments(&context, request);
    Outcome outcome;
    for (v1::ClassifySegmentsResponse response; call->Read(&response);) {
      outcome.responses.push_back(response);
      if (after_first && outcome.responses.size() == 1) after_first(context);
    }
    outcome.status = call->Finish();
    return outcome;
  }

  // `first` (the settings, or a message testing how they are refused), then `bytes` in chunks.
  static Outcome Upload(const testing::ServerProcess& server,
                        const v1::ClassifySegmentsUploadRequest& first, const std::string& bytes) {
    auto stub = Stub(server);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    auto call = stub->ClassifySegmentsUpload(&context);
    std::thread writer([&] {
      if (!call->Write(first)) return;
      for (size_t offset = 0; offset < bytes.size(); offset += 4096) {
        v1::ClassifySegmentsUploadRequest message;
        message.set_chunk(bytes.substr(offset, 4096));
        if (!call->Write(message)) return;
      }
      call->WritesDone();
    });
    Outcome outcome;
    for (v1::ClassifySegmentsResponse response; call->Read(&response);) {
      outcome.responses.push_back(response);
    }
    writer.join();
    outcome.status = call->Finish();
    return outcome;
  }

  static std::unique_ptr<model::VideoModel> LoadModel(const std::string& name) {
    return testing::LoadServedModel(*dir_ + "/repo/" + name + "/1");
  }
  // Every `stride`-th frame of the video, embedded offline.
  static torch::Tensor OfflineEmbeddings(const model::VideoModel& model, int stride = 1) {
    return testing::OfflineEmbeddings(model, *video_, stride);
  }
  // The head's probabilities over embeddings [first, last] (rows), run from scratch.
  static torch::Tensor Offline(const model::VideoModel& model, const torch::Tensor& embeddings,
                               int64_t first, int64_t last) {
    return testing::OfflineProbabilities(model, embeddings, first, last);
  }

  static void ExpectScores(const v1::SegmentWindow& window, const model::VideoModel& model,
                           const torch::Tensor& expected) {
    const auto& labels = model.config().labels;
    ASSERT_EQ(window.top_k_size(), 3);
    for (const v1::LabelScore& score : window.top_k()) {
      const auto label = std::find(labels.begin(), labels.end(), score.label());
      ASSERT_NE(label, labels.end()) << score.label();
      EXPECT_NEAR(score.score(), expected[label - labels.begin()].item<float>(), 1e-4)
          << "window from frame " << window.first_frame();
    }
  }

  static std::string* dir_;
  static std::string* video_;
};

std::string* SegmentsServerTest::dir_ = nullptr;
std::string* SegmentsServerTest::video_ = nullptr;

std::string Describe(const v1::SegmentEvent& event) {
  return absl::StrCat(event.kind() == v1::SegmentEvent::SEGMENT_START ? "start " : "end ",
                      event.label(), " ", event.start_seconds(), "-", event.end_seconds());
}

// The tracker's event as the server would send it, described alike.
std::string Describe(const pipeline::SegmentEvent& event, const std::vector<std::string>& labels) {
  v1::SegmentEvent message;
  message.set_kind(event.kind == pipeline::SegmentEvent::Kind::kStart
                       ? v1::SegmentEvent::SEGMENT_START
                       : v1::SegmentEvent::SEGMENT_END);
  message.set_label(labels[event.segment.label]);
  message.set_start_seconds(event.segment.start_seconds);
  message.set_end_seconds(event.segment.end_seconds);
  return Describe(message);
}

// Each window's scores are the head run from scratch over that window's embeddings, whether the
// head steps a state per open window (the GRU, causal-linear attention) or runs over each window
// (softmax); each sampled frame is embedded once; the segments are the tracker's over the
// windows' scores, each window speaking for its middle hop.
TEST_F(SegmentsServerTest, WindowsEqualTheHeadOverEachWindowFromScratch) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  int64_t embedded = 0;
  for (const std::string name : {"tiny", "tiny-linear", "tiny-softmax"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<model::VideoModel> model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    const torch::Tensor embeddings = OfflineEmbeddings(*model);
    ASSERT_EQ(embeddings.size(0), 40);
    v1::ClassifySegmentsRequest request = Settings(name);
    request.set_video(*video_);
    const Outcome outcome = Segments(*server, request);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    const std::vector<v1::SegmentWindow> windows = outcome.Windows();
    ASSERT_EQ(windows.size(), 9u);  // starting at frames 0, 4, ..., 32
    const std::vector<std::string>& labels = model->config().labels;
    pipeline::SegmentTracker tracker(static_cast<int>(labels.size()), SettingsBounds());
    std::vector<std::string> expected;
    const auto settle = [&](const std::vector<pipeline::SegmentEvent>& events) {
      for (const pipeline::SegmentEvent& event : events)
        expected.push_back(Describe(event, labels));
    };
    double tracked = 0;
    for (size_t j = 0; j < windows.size(); ++j) {
      const int64_t first = 4 * static_cast<int64_t>(j);
      EXPECT_EQ(windows[j].first_frame(), first);
      EXPECT_EQ(windows[j].last_frame(), first + 7);
      EXPECT_NEAR(windows[j].first_seconds(), first / 25.0, 1e-6);
      const torch::Tensor scores = Offline(*model, embeddings, first, first + 7).contiguous();
      ExpectScores(windows[j], *model, scores);
      const double middle_end = (first + 6) / 25.0;
      settle(tracker.Add(tracked, middle_end,
                         absl::MakeConstSpan(scores.data_ptr<float>(), labels.size())));
      tracked = middle_end;
      if (j + 1 == windows.size()) {  // the last window speaks to the video's end
        settle(tracker.Add(tracked, 40 / 25.0,
                           absl::MakeConstSpan(scores.data_ptr<float>(), labels.size())));
      }
    }
    settle(tracker.Finish());
    ASSERT_GE(expected.size(), 2u) << "the scores cross no bound: the test would show nothing";
    std::vector<std::string> received;
    for (const v1::SegmentEvent& event : outcome.Events()) received.push_back(Describe(event));
    EXPECT_EQ(received, expected);
    EXPECT_EQ(outcome.responses.back().frames_seen(), 40);
    EXPECT_EQ(outcome.responses.back().frames_embedded(), 40);
    embedded += 40;
  }

  // Sampled by media time: 5 frames/s of a 25 fps video is every fifth frame.
  const std::unique_ptr<model::VideoModel> model = LoadModel("tiny");
  const torch::Tensor sampled = OfflineEmbeddings(*model, /*stride=*/5);
  ASSERT_EQ(sampled.size(0), 8);
  v1::ClassifySegmentsRequest request = Settings("tiny");
  request.clear_every_nth_frame();
  request.set_frames_per_second(5);
  request.set_window_frames(4);
  request.clear_hop_frames();  // half the window
  request.set_video(*video_);
  const Outcome outcome = Segments(*server, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  const std::vector<v1::SegmentWindow> windows = outcome.Windows();
  ASSERT_EQ(windows.size(), 3u);
  for (size_t j = 0; j < windows.size(); ++j) {
    EXPECT_EQ(windows[j].first_frame(), 10 * j);
    EXPECT_EQ(windows[j].last_frame(), 10 * j + 15);
    ExpectScores(windows[j], *model, Offline(*model, sampled, 2 * j, 2 * j + 3));
  }
  EXPECT_EQ(outcome.responses.back().frames_embedded(), 8);
  embedded += 8;
  // Each sampled frame went through the backbone once, however many windows it lies in.
  EXPECT_EQ(StreamFramesCounted(*server), static_cast<double>(embedded));
}

// A segmentation model answers every frame it samples, at its own rate (5 of the 25 frames a
// second here), each as a window of one frame: its scores are the head's over the whole video (the
// GRU's over the frames up to it, stepped as they come; the softmax transformer's over all of
// them), and the segments are the tracker's over them, each frame's scores standing until the next
// frame's.
TEST_F(SegmentsServerTest, ASegmentationModelAnswersEverySampledFrame) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  for (const std::string name : {"seg-gru", "seg-softmax"}) {
    SCOPED_TRACE(name);
    const std::unique_ptr<model::VideoModel> model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    const torch::Tensor embeddings = OfflineEmbeddings(*model, /*stride=*/5);
    ASSERT_EQ(embeddings.size(0), 8);
    const absl::StatusOr<torch::Tensor> expected = model->ClassifyFrames(embeddings);
    ASSERT_TRUE(expected.ok()) << expected.status();
    v1::ClassifySegmentsRequest request = Settings(name);
    request.clear_every_nth_frame();
    request.clear_window_frames();
    request.clear_hop_frames();
    request.set_video(*video_);
    const Outcome outcome = Segments(*server, request);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    const std::vector<v1::SegmentWindow> windows = outcome.Windows();
    ASSERT_EQ(windows.size(), 8u);
    const std::vector<std::string>& labels = model->config().labels;
    pipeline::SegmentTracker tracker(static_cast<int>(labels.size()), SettingsBounds());
    std::vector<std::string> expected_events;
    const auto settle = [&](const std::vector<pipeline::SegmentEvent>& events) {
      for (const pipeline::SegmentEvent& event : events) {
        expected_events.push_back(Describe(event, labels));
      }
    };
    for (size_t k = 0; k < windows.size(); ++k) {
      EXPECT_EQ(windows[k].first_frame(), 5 * k);
      EXPECT_EQ(windows[k].last_frame(), 5 * k);
      EXPECT_NEAR(windows[k].first_seconds(), 0.2 * static_cast<double>(k), 1e-6);
      const torch::Tensor scores = (*expected)[static_cast<int64_t>(k)].contiguous();
      ExpectScores(windows[k], *model, scores);
      const double until = k + 1 < windows.size() ? 0.2 * static_cast<double>(k + 1) : 40 / 25.0;
      settle(tracker.Add(0.2 * static_cast<double>(k), until,
                         absl::MakeConstSpan(scores.data_ptr<float>(), labels.size())));
    }
    settle(tracker.Finish());
    ASSERT_GE(expected_events.size(), 2u)
        << "the scores cross no bound: the test would show nothing";
    std::vector<std::string> received;
    for (const v1::SegmentEvent& event : outcome.Events()) received.push_back(Describe(event));
    EXPECT_EQ(received, expected_events);
    EXPECT_EQ(outcome.responses.back().frames_embedded(), 8);

    // Windows, or another rate than the model's, are refused, saying why.
    v1::ClassifySegmentsRequest windowed = request;
    windowed.set_window_frames(4);
    const Outcome refused_windows = Segments(*server, windowed);
    EXPECT_EQ(refused_windows.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused_windows.status.error_message(), HasSubstr("leave window_frames"));
    v1::ClassifySegmentsRequest other_rate = request;
    other_rate.set_frames_per_second(4);
    const Outcome refused_rate = Segments(*server, other_rate);
    EXPECT_EQ(refused_rate.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(refused_rate.status.error_message(), HasSubstr("trained on 5 frames per second"));
  }
}

// On a video of known boundaries (black 0-3 s, white 3-8 s, black 8-12 s), the segments found with
// the server's defaults (4 frames/s, windows of 4 frames every 2, threshold 0.5) match them within
// one hop (0.5 s), and the video's end.
TEST_F(SegmentsServerTest, SegmentsMatchKnownBoundariesWithinOneHop) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  v1::ClassifySegmentsRequest request;
  request.set_model("contrast");
  request.set_video(testing::ReadFile(testing::CachedVideo(kDarkLightDark, ".mp4")));
  const Outcome outcome = Segments(*server, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  EXPECT_EQ(outcome.responses.back().frames_embedded(), 48);
  std::vector<v1::SegmentEvent> segments;
  for (const v1::SegmentEvent& event : outcome.Events()) {
    if (event.kind() == v1::SegmentEvent::SEGMENT_END) segments.push_back(event);
  }
  std::sort(segments.begin(), segments.end(),
            [](const auto& a, const auto& b) { return a.start_seconds() < b.start_seconds(); });
  const std::vector<std::tuple<std::string, double, double>> truth = {
      {"dark", 0, 3}, {"light", 3, 8}, {"dark", 8, 12}};
  ASSERT_EQ(segments.size(), truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    const auto& [label, start, end] = truth[i];
    SCOPED_TRACE(Describe(segments[i]));
    EXPECT_EQ(segments[i].label(), label);
    EXPECT_NEAR(segments[i].start_seconds(), start, 0.5);
    EXPECT_NEAR(segments[i].end_seconds(), end, 0.5);
    EXPECT_GT(segments[i].mean_score(), 0.9);
  }
}

// The same video sent whole (an MP4 whose index comes last), uploaded in chunks (MPEG-TS) or
// pulled from a file URI gets the same windows and segments; with events_only, no windows.
TEST_F(SegmentsServerTest, AnswersAreTheSameWholeUploadedOrPulled) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  v1::ClassifySegmentsRequest whole = Settings("tiny-linear");
  whole.set_video(testing::ReadFile(*dir_ + "/videos/video.mp4"));
  const Outcome reference = Segments(*server, whole);
  ASSERT_TRUE(reference.status.ok()) << reference.status.error_message();
  const std::vector<v1::SegmentWindow> reference_windows = reference.Windows();
  ASSERT_EQ(reference_windows.size(), 9u);

  v1::ClassifySegmentsUploadRequest upload;
  *upload.mutable_settings() = Settings("tiny-linear");
  v1::ClassifySegmentsRequest pulled = Settings("tiny-linear");
  pulled.set_uri(absl::StrCat("file://", *dir_, "/videos/video.mp4"));
  for (const Outcome& outcome : {Upload(*server, upload, *video_), Segments(*server, pulled)}) {
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    const std::vector<v1::SegmentWindow> windows = outcome.Windows();
    ASSERT_EQ(windows.size(), reference_windows.size());
    for (size_t j = 0; j < windows.size(); ++j) {
      const v1::SegmentWindow& expected = reference_windows[j];
      EXPECT_EQ(windows[j].first_frame(), expected.first_frame());
      EXPECT_NEAR(windows[j].last_seconds(), expected.last_seconds(), 1e-6);
      for (int k = 0; k < expected.top_k_size(); ++k) {
        EXPECT_EQ(windows[j].top_k(k).label(), expected.top_k(k).label());
        EXPECT_NEAR(windows[j].top_k(k).score(), expected.top_k(k).score(), 1e-5);
      }
    }
    std::vector<std::string> events, expected_events;
    for (const auto& event : outcome.Events()) events.push_back(Describe(event));
    for (const auto& event : reference.Events()) expected_events.push_back(Describe(event));
    EXPECT_EQ(events, expected_events);
  }

  whole.mutable_segments()->set_events_only(true);
  const Outcome events_only = Segments(*server, whole);
  ASSERT_TRUE(events_only.status.ok()) << events_only.status.error_message();
  EXPECT_TRUE(events_only.Windows().empty());
  EXPECT_EQ(events_only.Events().size(), reference.Events().size());
}

// Settings that cannot be used, videos that cannot be read and URIs outside the allowlist are
// refused with the status and a message that names the problem; the server goes on serving.
TEST_F(SegmentsServerTest, RefusesWhatItCannotUseAndGoesOnServing) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  struct Case {
    std::string name;
    std::function<void(v1::ClassifySegmentsRequest&)> change;
    grpc::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"window longer than the video", [](auto& r) { r.set_window_frames(64); },
       grpc::INVALID_ARGUMENT, "longer than the video (40 sampled frames)"},
      {"hop 0", [](auto& r) { r.set_hop_frames(0); }, grpc::INVALID_ARGUMENT,
       "hop_frames must be at least 1"},
      {"window 0", [](auto& r) { r.set_window_frames(0); }, grpc::INVALID_ARGUMENT,
       "window_frames must be at least 1"},
      {"huge window", [](auto& r) { r.set_window_frames(100000); }, grpc::INVALID_ARGUMENT,
       "window_frames must be in [1, 1024]"},
      {"hop not dividing", [](auto& r) { r.set_hop_frames(3); }, grpc::INVALID_ARGUMENT,
       "hop_frames (3) must divide window_frames (8)"},
      {"too many windows per frame",
       [](auto& r) {
         r.set_window_frames(64);
         r.set_hop_frames(1);
       },
       grpc::INVALID_ARGUMENT, "at most 32 windows"},
      {"no rate",
       [](auto& r) {
         r.clear_every_nth_frame();
         r.set_frames_per_second(0);
       },
       grpc::INVALID_ARGUMENT, "frames_per_second must be in (0, 1000]"},
      {"absurd rate",
       [](auto& r) {
         r.clear_every_nth_frame();
         r.set_frames_per_second(1e12);
       },
       grpc::INVALID_ARGUMENT, "frames_per_second must be in (0, 1000]"},
      {"NaN rate",
       [](auto& r) {
         r.clear_every_nth_frame();
         r.set_frames_per_second(std::numeric_limits<double>::quiet_NaN());
       },
       grpc::INVALID_ARGUMENT, "frames_per_second"},
      {"both samplings", [](auto& r) { r.set_frames_per_second(4); }, grpc::INVALID_ARGUMENT,
       "not both"},
      {"every 0th frame", [](auto& r) { r.set_every_nth_frame(0); }, grpc::INVALID_ARGUMENT,
       "every_nth_frame must be at least 1"},
      {"bad segment bounds", [](auto& r) { r.mutable_segments()->set_hysteresis(0.9f); },
       grpc::INVALID_ARGUMENT, "hysteresis"},
      {"no video", [](auto& r) { r.clear_video(); }, grpc::INVALID_ARGUMENT, "needs its video"},
      {"not a video", [](auto& r) { r.set_video(std::string(5000, 'x')); }, grpc::INVALID_ARGUMENT,
       "not a video container"},
      {"no such model", [](auto& r) { r.set_model("nope"); }, grpc::NOT_FOUND, "nope"},
      {"URI not allowed", [](auto& r) { r.set_uri("file:///etc/passwd"); }, grpc::PERMISSION_DENIED,
       "allowlist"},
      {"no such file",
       [](auto& r) { r.set_uri(absl::StrCat("file://", *dir_, "/videos/none.mp4")); },
       grpc::NOT_FOUND, "none.mp4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::ClassifySegmentsRequest request = Settings("tiny");
    request.set_video(*video_);
    c.change(request);
    const Outcome outcome = Segments(*server, request);
    EXPECT_EQ(outcome.status.error_code(), c.code) << outcome.status.error_message();
    EXPECT_THAT(outcome.status.error_message(), HasSubstr(c.says));
    EXPECT_THAT(outcome.status.error_message(), ::testing::Not(HasSubstr("root:")));
  }

  // Uploads: settings with a source, a chunk beside the settings, and an MP4 whose index comes
  // last, which cannot be decoded as it arrives.
  v1::ClassifySegmentsUploadRequest with_source;
  *with_source.mutable_settings() = Settings("tiny");
  with_source.mutable_settings()->set_uri("file:///etc/passwd");
  v1::ClassifySegmentsUploadRequest with_chunk;
  *with_chunk.mutable_settings() = Settings("tiny");
  with_chunk.set_chunk("x");
  v1::ClassifySegmentsUploadRequest settings;
  *settings.mutable_settings() = Settings("tiny");
  for (const auto& [first, bytes, says] :
       std::vector<std::tuple<v1::ClassifySegmentsUploadRequest, std::string, std::string>>{
           {with_source, *video_, "leave video and uri unset"},
           {with_chunk, *video_, "carries the settings alone"},
           {settings, testing::ReadFile(*dir_ + "/videos/video.mp4"), "moov"}}) {
    SCOPED_TRACE(says);
    const Outcome outcome = Upload(*server, first, bytes);
    EXPECT_EQ(outcome.status.error_code(), grpc::INVALID_ARGUMENT);
    EXPECT_THAT(outcome.status.error_message(), HasSubstr(says));
  }

  // A URI that ends midway (a file cut short) is answered for the frames it holds.
  const std::string cut = *dir_ + "/videos/cut.ts";
  testing::WriteFile(cut, video_->substr(0, video_->size() * 3 / 5));
  v1::ClassifySegmentsRequest pulled = Settings("tiny");
  pulled.set_uri("file://" + cut);
  const Outcome partial = Segments(*server, pulled);
  ASSERT_TRUE(partial.status.ok()) << partial.status.error_message();
  EXPECT_GT(partial.responses.back().frames_seen(), 8u);
  EXPECT_LT(partial.responses.back().frames_seen(), 40u);

  // And the server still answers.
  v1::ClassifySegmentsRequest good = Settings("tiny");
  good.set_video(*video_);
  const Outcome answered = Segments(*server, good);
  ASSERT_TRUE(answered.status.ok()) << answered.status.error_message();
  EXPECT_EQ(answered.Windows().size(), 9u);
}

// A client that cancels after the first answer stops the call: the server stops decoding and
// embedding long before the video's end.
TEST_F(SegmentsServerTest, ACancelledCallStopsDecoding) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  v1::ClassifySegmentsRequest request = Settings("tiny");
  request.set_video(testing::ReadFile(testing::CachedVideo(kLongVideo, ".ts")));
  const Outcome outcome =
      Segments(*server, request, [](grpc::ClientContext& context) { context.TryCancel(); });
  EXPECT_EQ(outcome.status.error_code(), grpc::CANCELLED);
  // The count settles once the session has let go of its frames.
  double counted = StreamFramesCounted(*server);
  for (int i = 0; i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    const double now = StreamFramesCounted(*server);
    if (now == counted) break;
    counted = now;
  }
  EXPECT_GT(counted, 0);
  EXPECT_LT(counted, 1500);
}

// Memory does not grow with the video's length: frames are not all held at once, and windows go
// out as they are answered. A 30-minute video pulled from a file (3,600 frames, every one
// embedded) takes the server's resident memory at most 32 MiB above what a 1-minute one took.
// Holding the 3,600 converted frames (64x64, 48 KiB each) would take 169 MiB more; the peaks of
// calls of any length scatter by some 10 MB (one run: 1 minute 376 MB; 30 minutes 386 and
// 393 MB; an hour 383 MB), which a 16 MiB bound failed on once.
TEST_F(SegmentsServerTest, MemoryDoesNotGrowWithTheVideo) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const auto peak_for = [&](int seconds) {
    const std::string path = absl::StrCat(*dir_, "/videos/", seconds, ".ts");
    std::filesystem::copy_file(
        testing::CachedVideo(absl::StrCat("-f lavfi -i testsrc2=size=96x64:rate=2 -t ", seconds,
                                          " -c:v libx264 -preset ultrafast -g 20 -f mpegts"),
                             ".ts"),
        path, std::filesystem::copy_options::overwrite_existing);
    v1::ClassifySegmentsRequest request = Settings("tiny-linear");
    request.set_uri("file://" + path);
    std::atomic<bool> done = false;
    Outcome outcome;
    std::thread call([&] {
      outcome = Segments(*server, request);
      done = true;
    });
    const int64_t peak =
        testing::PeakResidentBytesUntil(server->pid(), [&] { return done.load(); });
    call.join();
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    EXPECT_EQ(outcome.Windows().size(), static_cast<size_t>((2 * seconds - 8) / 4 + 1));
    return peak;
  };
  const int64_t one_minute = peak_for(60);
  const int64_t half_an_hour = peak_for(1800);
  EXPECT_LT(half_an_hour - one_minute, int64_t{32} << 20)
      << "1 minute: " << one_minute << " bytes at most; 30 minutes: " << half_an_hour;
}

// `vidclf segments` prints the segments the call finds, one JSON line each, and writes them as a
// WebVTT track that the W3C validator's parser reads without an error, cues in start order, and
// draws the timeline as a PNG; `vidclf classify --from-list --segments` writes a line of segments
// per video of a list.
TEST_F(SegmentsServerTest, TheClientPrintsSegmentsWritesWebVttAndListsSegmentsInBulk) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  v1::ClassifySegmentsRequest request = Settings("tiny-softmax");
  request.set_video(*video_);
  const Outcome outcome = Segments(*server, request);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
  std::vector<std::string> ends;
  for (const v1::SegmentEvent& event : outcome.Events()) {
    if (event.kind() == v1::SegmentEvent::SEGMENT_END) ends.push_back(event.label());
  }
  ASSERT_GE(ends.size(), 2u);

  const std::string video = *dir_ + "/videos/video.ts";
  const std::string track = *dir_ + "/track.vtt";
  const std::string plot = *dir_ + "/timeline.png";
  testing::WriteFile(video, *video_);
  int exit_code = -1;
  const std::string printed = testing::RunCommand(
      absl::StrCat(testing::ClientBinary(), " segments ", video, " --server ",
                   server->grpc_address(),
                   " --model tiny-softmax --every-nth-frame 1 --window-frames 8 "
                   "--hop-frames 4 --threshold 0.34 --hysteresis 0.01 --min-seconds 0.08 "
                   "--max-gap-seconds 0.04 --json --webvtt ",
                   track, " --plot ", plot, " 2>/dev/null"),
      &exit_code);
  ASSERT_EQ(exit_code, 0) << printed;
  std::vector<std::string> labels;
  for (const absl::string_view line : absl::StrSplit(printed, '\n', absl::SkipEmpty())) {
    const std::string::size_type at = line.find("\"label\":\"");
    ASSERT_NE(at, absl::string_view::npos) << line;
    const absl::string_view rest = line.substr(at + 9);
    labels.emplace_back(rest.substr(0, rest.find('"')));
  }
  EXPECT_EQ(labels, ends);

  // The plot is a PNG that FFmpeg reads, 1200 pixels wide.
  const std::string probed = testing::RunCommand(
      "ffprobe -v error -show_entries stream=codec_name,width -of csv=p=0 " + plot, &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(probed, "png,1200\n");

  const std::string check = absl::StrCat("node ", testing::SourceDir(), "/tests/webvtt/check.mjs ");
  const std::string checked = testing::RunCommand(check + track + " 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 0) << checked << testing::ReadFile(track);
  EXPECT_EQ(checked, absl::StrCat(ends.size(), " cues\n"));
  // A bulk job's list: a line per entry, segments for the video (with the server's defaults: 4
  // frames/s of the 1.6 s video is 7 frames), the refusals named; exit code 3 for refusals.
  const std::string list = *dir_ + "/list.txt";
  testing::WriteFile(list, absl::StrCat(video, "\n", *dir_, "/none.ts\nfile:///etc/passwd\n"));
  const std::string lines = testing::RunCommand(
      absl::StrCat(testing::ClientBinary(), " classify --from-list ", list, " --segments --server ",
                   server->grpc_address(), " --model tiny-softmax 2>/dev/null"),
      &exit_code);
  EXPECT_EQ(exit_code, 3) << lines;
  const std::vector<std::string> entries = absl::StrSplit(lines, '\n', absl::SkipEmpty());
  ASSERT_EQ(entries.size(), 3u) << lines;
  EXPECT_THAT(entries[0], HasSubstr("\"code\":\"OK\""));
  EXPECT_THAT(entries[0], HasSubstr("\"frames_embedded\":7"));
  EXPECT_THAT(entries[0], HasSubstr("\"segments\":["));
  EXPECT_THAT(entries[1], HasSubstr("\"code\":\"NOT_FOUND\""));
  EXPECT_THAT(entries[2], HasSubstr("\"code\":\"PERMISSION_DENIED\""));

  // The check can fail: a cue that ends before it starts.
  testing::WriteFile(track, "WEBVTT\n\n00:00:01.000 --> 00:00:00.500\nalpha\n");
  testing::RunCommand(check + track + " 2>&1", &exit_code);
  EXPECT_NE(exit_code, 0);
}

}  // namespace
}  // namespace vidclf
