// The real vidclf-server on a loopback port, called by the real vidclf client and a gRPC stub.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "model/onednn_resnet18.h"
#include "model/thread_affinity.h"
#include "model/video_model.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("server"));
    // Tiny bundles (seeded random weights, small frames) so the suite runs in seconds: a GRU,
    // and a softmax transformer whose bundle lets callers run it with clustered attention.
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    model::ModelConfig transformer = testing::TinyTransformerConfig("tiny-transformer", "softmax");
    transformer.transformer.attention_substitutions = {"clustered", "improved-clustered"};
    testing::SaveModel(transformer, *dir_ + "/repo/tiny-transformer/1");
    testing::MakeVideo("-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 20 -c:v libx264",
                       *dir_ + "/clip.mp4");
    // The same frames in Matroska, which the server decodes while the upload arrives (the MP4
    // above has its index at the end, so the server holds it whole first).
    testing::MakeVideo("-i " + *dir_ + "/clip.mp4 -c copy", *dir_ + "/clip.mkv");
    std::filesystem::create_directories(*dir_ + "/pullable");
    std::filesystem::copy_file(*dir_ + "/clip.mp4", *dir_ + "/pullable/clip.mp4");
    // On the CPU on every machine. Where a GPU is visible this is also the CPU server beside an
    // unused GPU, whose first /metrics scrape once ended the process (model/device_memory.cc).
    auto server = testing::ServerProcess::Start(
        testing::ServerBinary(),
        {"--model-repository", *dir_ + "/repo", "--allow-uri", "file://" + *dir_ + "/pullable/",
         "--device", "cpu", "--decode-device", "auto"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override { ASSERT_NE(server_, nullptr) << "the server did not start"; }

  static std::string Client(const std::string& arguments, int* exit_code) {
    return testing::RunCommand(std::string(testing::ClientBinary()) + " " + arguments +
                                   " --server " + server_->grpc_address() + " 2>&1",
                               exit_code);
  }

  static grpc::Status Call(const v1::ClassifyRequest& request, v1::ClassifyResponse* response) {
    auto stub = v1::VideoClassifier::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub->Classify(&context, request, response);
  }

  // Sends `messages` on one ClassifyUpload call, then ends the upload, or cancels the call when
  // `cancel` is set.
  static grpc::Status Upload(const std::vector<v1::ClassifyUploadRequest>& messages,
                             v1::ClassifyResponse* response, bool cancel = false) {
    auto stub = v1::VideoClassifier::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto writer = stub->ClassifyUpload(&context, response);
    for (const auto& message : messages) {
      if (!writer->Write(message)) break;
    }
    if (cancel) {
      context.TryCancel();
    } else {
      writer->WritesDone();
    }
    return writer->Finish();
  }

  // The settings message, then `bytes` in chunks of `chunk_bytes`.
  static std::vector<v1::ClassifyUploadRequest> UploadMessages(const v1::ClassifyRequest& settings,
                                                               const std::string& bytes,
                                                               size_t chunk_bytes) {
    std::vector<v1::ClassifyUploadRequest> messages(1);
    *messages[0].mutable_settings() = settings;
    for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
      messages.emplace_back().set_chunk(bytes.substr(offset, chunk_bytes));
    }
    return messages;
  }

  static std::string* dir_;
  static testing::ServerProcess* server_;
};

std::string* ServerTest::dir_ = nullptr;
testing::ServerProcess* ServerTest::server_ = nullptr;

TEST_F(ServerTest, ClassifiesAVideoWithTheCommandLineClient) {
  int exit_code = 0;
  const std::string output = Client("classify " + *dir_ + "/clip.mp4 --json --top-k 2", &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  const nlohmann::json json = nlohmann::json::parse(output);
  EXPECT_EQ(json["model"], "tiny");
  EXPECT_EQ(json["model_version"], "1");
  ASSERT_EQ(json["top_k"].size(), 2u);
  EXPECT_GE(json["top_k"][0]["score"].get<double>(), json["top_k"][1]["score"].get<double>());
  for (const auto& entry : json["top_k"]) {
    EXPECT_THAT((std::vector<std::string>{"alpha", "beta", "gamma"}),
                ::testing::Contains(entry["label"].get<std::string>()));
  }
  EXPECT_EQ(json["frames_used"], 4);
  // 20 frames at 10 fps sampled at 4 segment centres: frames 2, 7, 12, 17.
  const std::vector<double> times = json["frame_timestamps_seconds"];
  ASSERT_EQ(times.size(), 4u);
  EXPECT_NEAR(times[0], 0.2, 1e-6);
  EXPECT_NEAR(times[3], 1.7, 1e-6);
  EXPECT_GT(json["timings"]["embed_ms"].get<double>(), 0);
  EXPECT_GE(json["timings"]["total_ms"].get<double>(), json["timings"]["embed_ms"].get<double>());
}

// A batch job's shard: the list's entries I, I+N, ..., a JSON line each; a video the server refuses
// for what it is gives exit 3, not 1, so that a job does not retry it.
TEST_F(ServerTest, ClassifiesTheShardOfAListOfVideos) {
  testing::WriteFile(*dir_ + "/list.txt",
                     absl::StrCat("# videos of the test\n", *dir_, "/clip.mp4\n\n", *dir_,
                                  "/missing.mp4\n", *dir_, "/clip.mkv\n"));
  // The JSON lines of a run, by source.
  auto run = [](const std::string& shard, int* exit_code) {
    std::map<std::string, nlohmann::json> lines;
    const std::string output =
        Client("classify --from-list " + *dir_ + "/list.txt --shard " + shard, exit_code);
    for (absl::string_view line : absl::StrSplit(output, '\n')) {
      if (!absl::StartsWith(line, "{")) continue;
      nlohmann::json json = nlohmann::json::parse(line);
      lines[json["source"]] = json;
    }
    return std::make_pair(lines, output);
  };
  int exit_code = 0;
  auto [all, output] = run("0/1", &exit_code);
  EXPECT_EQ(exit_code, 3) << output;
  ASSERT_EQ(all.size(), 3u) << output;
  EXPECT_EQ(all[*dir_ + "/clip.mp4"]["code"], "OK");
  EXPECT_EQ(all[*dir_ + "/clip.mp4"]["response"]["model"], "tiny");
  EXPECT_EQ(all[*dir_ + "/clip.mkv"]["code"], "OK");
  EXPECT_EQ(all[*dir_ + "/missing.mp4"]["code"], "NOT_FOUND");
  EXPECT_THAT(
      output,
      HasSubstr(
          "3 videos, 0 answered before; 2 classified, 1 refused for what they are, 0 failed"));

  auto [first, first_output] = run("0/2", &exit_code);
  EXPECT_EQ(exit_code, 0) << first_output;
  EXPECT_EQ(first.size(), 2u) << first_output;
  EXPECT_EQ(first.count(*dir_ + "/missing.mp4"), 0u);
  auto [second, second_output] = run("1/2", &exit_code);
  EXPECT_EQ(exit_code, 3) << second_output;
  EXPECT_EQ(second.size(), 1u) << second_output;

  const std::string refused =
      Client("classify --from-list " + *dir_ + "/list.txt --shard 2/2", &exit_code);
  EXPECT_EQ(exit_code, 2) << refused;
  EXPECT_THAT(refused, HasSubstr("--shard must be I/N"));
}

// --output resumes a shard: what the file answers is not sent again, a call that failed for the
// server's sake is tried again, and a line a killed run cut short goes.
TEST_F(ServerTest, ResumesTheShardOfAListFromItsOutput) {
  const std::string mp4 = *dir_ + "/clip.mp4", mkv = *dir_ + "/clip.mkv";
  const std::string missing = *dir_ + "/missing.mp4", results = *dir_ + "/results.jsonl";
  testing::WriteFile(*dir_ + "/resume-list.txt", absl::StrCat(mp4, "\n", mkv, "\n", missing, "\n"));
  // An earlier run: the MP4 answered (with a response this run could not have made), the MKV
  // refused by an overloaded server, and a line cut short.
  testing::WriteFile(
      results,
      absl::StrCat(R"({"source":")", mp4, R"(","code":"OK","response":{"model":"earlier"}})", "\n",
                   R"({"source":")", mkv, R"(","code":"RESOURCE_EXHAUSTED","error":"busy"})", "\n",
                   R"({"source":")", missing, R"(","co)"));
  int exit_code = 0;
  const std::string command =
      "classify --from-list " + *dir_ + "/resume-list.txt --output " + results;
  std::string output = Client(command, &exit_code);
  EXPECT_EQ(exit_code, 3) << output;
  EXPECT_THAT(output, HasSubstr("3 videos, 1 answered before; 1 classified, 1 refused"));
  std::map<std::string, nlohmann::json> lines;
  int line_count = 0;
  for (absl::string_view line :
       absl::StrSplit(testing::ReadFile(results), '\n', absl::SkipEmpty())) {
    ++line_count;
    const nlohmann::json json = nlohmann::json::parse(line);
    lines[json["source"]] = json;
  }
  EXPECT_EQ(line_count, 3);
  EXPECT_EQ(lines[mp4]["response"]["model"], "earlier") << "the MP4 was sent again";
  EXPECT_EQ(lines[mkv]["code"], "OK");
  EXPECT_EQ(lines[mkv]["response"]["model"], "tiny");
  EXPECT_EQ(lines[missing]["code"], "NOT_FOUND");

  // All answered: nothing is sent, the file stays, and the exit code still tells of the refusal.
  output = Client(command, &exit_code);
  EXPECT_EQ(exit_code, 3) << output;
  EXPECT_THAT(output, HasSubstr("3 answered before; 0 classified"));
  const std::string after = testing::ReadFile(results);
  const std::vector<absl::string_view> after_lines = absl::StrSplit(after, '\n', absl::SkipEmpty());
  EXPECT_EQ(after_lines.size(), 3u);
}

// The server pulls a video from a URI its --allow-uri names, and the result is that of the
// uploaded bytes; anything else is refused before it is opened.
TEST_F(ServerTest, PullsAVideoFromAnAllowedUriOnly) {
  v1::ClassifyRequest upload;
  upload.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  v1::ClassifyResponse uploaded;
  ASSERT_TRUE(Call(upload, &uploaded).ok());

  int exit_code = 0;
  const std::string output =
      Client("classify file://" + *dir_ + "/pullable/clip.mp4 --json --top-k 3", &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  const nlohmann::json json = nlohmann::json::parse(output);
  ASSERT_EQ(json["top_k"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(json["top_k"][i]["label"], uploaded.top_k(i).label());
    EXPECT_NEAR(json["top_k"][i]["score"].get<double>(), uploaded.top_k(i).score(), 1e-6);
  }

  const std::vector<std::pair<std::string, grpc::StatusCode>> refused = {
      {"file://" + *dir_ + "/clip.mp4", grpc::StatusCode::PERMISSION_DENIED},
      {"file://" + *dir_ + "/pullable/../clip.mp4", grpc::StatusCode::PERMISSION_DENIED},
      {"http://127.0.0.1:1/clip.mp4", grpc::StatusCode::PERMISSION_DENIED},
      {"file://" + *dir_ + "/pullable/missing.mp4", grpc::StatusCode::NOT_FOUND},
      {"no-scheme.mp4", grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const auto& [uri, code] : refused) {
    v1::ClassifyRequest request;
    request.set_uri(uri);
    v1::ClassifyResponse response;
    const grpc::Status status = Call(request, &response);
    EXPECT_EQ(status.error_code(), code) << uri << ": " << status.error_message();
  }
}

// The same video uploaded in chunks, from a file or a pipe, in a container the server holds
// whole (MP4 with its index last) or decodes as it arrives (Matroska), scores as Classify does.
TEST_F(ServerTest, UploadsInChunksWithTheScoresOfClassify) {
  v1::ClassifyRequest whole;
  whole.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  whole.set_top_k(3);
  v1::ClassifyResponse expected;
  ASSERT_TRUE(Call(whole, &expected).ok());

  for (const std::string& arguments : {"upload " + *dir_ + "/clip.mp4 --chunk-kib 1",
                                       "upload - --chunk-kib 4 < " + *dir_ + "/clip.mkv"}) {
    int exit_code = 0;
    const std::string output = Client(arguments + " --json --top-k 3", &exit_code);
    ASSERT_EQ(exit_code, 0) << arguments << ": " << output;
    const nlohmann::json json = nlohmann::json::parse(output);
    ASSERT_EQ(json["top_k"].size(), 3u) << arguments;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(json["top_k"][i]["label"], expected.top_k(i).label()) << arguments;
      EXPECT_NEAR(json["top_k"][i]["score"].get<double>(), expected.top_k(i).score(), 1e-6)
          << arguments;
    }
    EXPECT_EQ(json["frame_timestamps_seconds"].size(), 4u) << arguments;
  }
}

// A live feed never ends: with a sampling that has a frame count, the answer comes once those
// frames have arrived and the client stops sending. The feed here would last ten minutes.
TEST_F(ServerTest, ClassifiesALiveFeedBeforeItEnds) {
  int exit_code = 0;
  const std::string output = testing::RunCommand(
      "ffmpeg -nostdin -loglevel error -re -f lavfi -i testsrc2=size=160x120:rate=25 -t 600 "
      "-c:v libx264 -g 25 -f mpegts - 2>/dev/null | timeout 120 " +
          testing::ClientBinary() +
          " upload - --sampling window --num-frames 4 --chunk-kib 16 --json --server " +
          server_->grpc_address(),
      &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  const nlohmann::json json = nlohmann::json::parse(output);
  EXPECT_EQ(json["frames_used"], 4);
  const std::vector<double> times = json["frame_timestamps_seconds"];
  EXPECT_THAT(times, ElementsAre(DoubleNear(0, 1e-3), DoubleNear(0.04, 1e-3),
                                 DoubleNear(0.08, 1e-3), DoubleNear(0.12, 1e-3)));
}

TEST_F(ServerTest, RefusesBadUploadsAndKeepsServing) {
  const std::string mp4 = testing::ReadFile(*dir_ + "/clip.mp4");
  v1::ClassifyResponse response;
  grpc::Status status = Upload({}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("the upload had no message"));

  v1::ClassifyRequest with_video;
  with_video.set_video(mp4);
  status = Upload(UploadMessages(with_video, mp4, 4096), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("cannot carry a video or a uri"));

  std::vector<v1::ClassifyUploadRequest> late_settings =
      UploadMessages(v1::ClassifyRequest(), mp4, 4096);
  late_settings[2].mutable_settings()->set_top_k(2);
  status = Upload(late_settings, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("settings in its first message only"));

  v1::ClassifyRequest unknown_model;
  unknown_model.set_model("nope");
  status = Upload(UploadMessages(unknown_model, mp4, 4096), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  status = Upload(UploadMessages(v1::ClassifyRequest(), std::string(50000, 'x'), 4096), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a video container"));

  // Past the server's 64 MiB limit: the MP4 is held whole, so every byte counts.
  std::vector<v1::ClassifyUploadRequest> too_large =
      UploadMessages(v1::ClassifyRequest(), mp4, 4096);
  for (int i = 0; i < 65; ++i) too_large.emplace_back().set_chunk(std::string(1 << 20, '\0'));
  status = Upload(too_large, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("input is over 67108864 bytes"));

  const std::vector<v1::ClassifyUploadRequest> half =
      UploadMessages(v1::ClassifyRequest(), mp4.substr(0, mp4.size() / 2), 4096);
  status = Upload(half, &response, /*cancel=*/true);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);

  v1::ClassifyResponse good;
  status = Upload(UploadMessages(v1::ClassifyRequest(), mp4, 4096), &good);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(good.frames_used(), 4u);
}

TEST_F(ServerTest, ScoresOfAllLabelsSumToOne) {
  v1::ClassifyRequest request;
  request.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  request.set_top_k(10);
  request.mutable_sampling()->set_num_frames(6);
  v1::ClassifyResponse response;
  ASSERT_TRUE(Call(request, &response).ok());
  ASSERT_EQ(response.top_k_size(), 3);  // capped at the model's labels
  double sum = 0;
  for (const auto& entry : response.top_k()) sum += entry.score();
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(response.frames_used(), 6u);
}

TEST_F(ServerTest, ServesATransformerHeadBesideTheGru) {
  v1::ClassifyRequest request;
  request.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  request.set_model("tiny-transformer");
  v1::ClassifyResponse response;
  const grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model(), "tiny-transformer");
  EXPECT_EQ(response.top_k_size(), 3);
  EXPECT_EQ(response.frames_used(), 4u);
}

TEST_F(ServerTest, RunsTheAttentionSubstitutionsTheBundleAllows) {
  v1::ClassifyRequest request;
  request.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  request.set_model("tiny-transformer");
  for (const char* attention : {"clustered", "improved-clustered"}) {
    request.set_attention(attention);
    v1::ClassifyResponse response;
    const grpc::Status status = Call(request, &response);
    ASSERT_TRUE(status.ok()) << attention << ": " << status.error_message();
    float total = 0;
    for (const v1::LabelScore& score : response.top_k()) total += score.score();
    EXPECT_NEAR(total, 1.0f, 1e-5) << attention;
  }

  request.set_attention("linear");
  v1::ClassifyResponse response;
  grpc::Status status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("cannot run with attention \"linear\"; its bundle allows clustered, "
                        "improved-clustered"));
  request.set_model("tiny");
  request.set_attention("clustered");
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("gru head"));
}

TEST_F(ServerTest, SamplesAsTheRequestAsks) {
  v1::ClassifyRequest request;
  request.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));  // 20 frames at 10 fps
  request.mutable_sampling()->set_strategy("fps");
  request.mutable_sampling()->set_frames_per_second(5);
  v1::ClassifyResponse response;
  grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.frames_used(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(response.frame_timestamps_seconds(i), 0.2 * i, 1e-6);

  request.mutable_sampling()->set_strategy("window");
  request.mutable_sampling()->set_num_frames(3);
  request.mutable_sampling()->set_stride_frames(2);
  request.mutable_sampling()->set_start_seconds(1.0);
  status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.frame_timestamps_seconds(),
              ElementsAre(DoubleNear(1.0, 1e-6), DoubleNear(1.2, 1e-6), DoubleNear(1.4, 1e-6)));

  request.mutable_sampling()->set_strategy("random");
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown sampling strategy \"random\""));
}

// Fast decoding is opt-in: snapping moves each uniform sample to the keyframe in its segment.
TEST_F(ServerTest, DecodesFastOnlyWhenAsked) {
  const std::string path = *dir_ + "/keyframes.mp4";  // 20 frames at 10 fps, a keyframe every 5
  testing::MakeVideo(
      "-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 20 -c:v libx264 "
      "-x264-params keyint=5:min-keyint=5:scenecut=0",
      path);
  v1::ClassifyRequest request;
  request.set_video(testing::ReadFile(path));
  request.mutable_sampling()->set_num_frames(4);
  v1::ClassifyResponse response;
  grpc::Status status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.frame_timestamps_seconds(),
              ElementsAre(DoubleNear(0.2, 1e-6), DoubleNear(0.7, 1e-6), DoubleNear(1.2, 1e-6),
                          DoubleNear(1.7, 1e-6)));

  request.mutable_sampling()->set_snap_to_keyframes(true);
  request.mutable_sampling()->set_skip_loop_filter(true);
  status = Call(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(response.frame_timestamps_seconds(),
              ElementsAre(DoubleNear(0.0, 1e-6), DoubleNear(0.5, 1e-6), DoubleNear(1.0, 1e-6),
                          DoubleNear(1.5, 1e-6)));

  request.mutable_sampling()->set_strategy("window");
  status = Call(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("snap_to_keyframes applies to uniform sampling"));
}

TEST_F(ServerTest, RefusesBadInputAndKeepsServing) {
  v1::ClassifyResponse response;
  v1::ClassifyRequest empty;
  grpc::Status status = Call(empty, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("empty input"));

  v1::ClassifyRequest random;
  std::mt19937 rng(7);
  std::string bytes(50000, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  random.set_video(bytes);
  status = Call(random, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a video container"));

  v1::ClassifyRequest unknown_model;
  unknown_model.set_video(testing::ReadFile(*dir_ + "/clip.mp4"));
  unknown_model.set_model("nope");
  status = Call(unknown_model, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("this server has: tiny, tiny-transformer"));

  int exit_code = 0;
  std::string output = Client("classify /dev/null", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(output, HasSubstr("INVALID_ARGUMENT: empty input"));

  output = Client("classify " + *dir_ + "/clip.mp4", &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("model   tiny (version 1)"));
}

TEST_F(ServerTest, HealthServiceAnswersServing) {
  int exit_code = 0;
  const std::string output = Client("health", &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_EQ(output, "SERVING\n");

  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("vidclf.v1.VideoClassifier");
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(stub->Check(&context, request, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// `vidclf models` lists what `ListModels` returns; `vidclf bench` loads the server and reports.
TEST_F(ServerTest, ListsModelsAndBenchmarksWithTheCommandLineClient) {
  int exit_code = 0;
  std::string output = Client("models --json", &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  nlohmann::json json = nlohmann::json::parse(output);
  ASSERT_EQ(json["models"].size(), 2u);
  EXPECT_EQ(json["models"][0]["name"], "tiny");
  EXPECT_EQ(json["models"][1]["attention_substitutions"][0], "clustered");
  output = Client("models tiny-transformer", &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("attention     softmax, substitutions: clustered"));
  output = Client("models nope", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(output, HasSubstr("NOT_FOUND"));
  output = Client("models --protocol v2", &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output,
              HasSubstr("tiny version 1 (platform vidclf)\n  inputs        VIDEO BYTES [1]; "
                        "URI BYTES [1]"));
  EXPECT_THAT(output, HasSubstr("tiny-transformer version 1"));
  output = Client("models nope --protocol v2", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(output, HasSubstr("NOT_FOUND"));

  output = Client("bench " + *dir_ + "/clip.mp4 " + *dir_ + "/clip.mkv --concurrency 1,3 " +
                      "--requests 6 --warmup 2 --json --metrics-url http://127.0.0.1:" +
                      std::to_string(server_->metrics_port()) + "/metrics",
                  &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  json = nlohmann::json::parse(output);
  ASSERT_EQ(json["levels"].size(), 2u);
  for (const auto& level : json["levels"]) {
    EXPECT_EQ(level["requests"], 6);
    EXPECT_EQ(level["errors"], 0);
    EXPECT_GT(level["clips_per_s"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(level["frames_per_s"].get<double>(), 4 * level["clips_per_s"].get<double>());
    EXPECT_LE(level["p50_ms"].get<double>(), level["p99_ms"].get<double>());
    EXPECT_GT(level["server_rss_bytes"].get<double>(), 0);
    EXPECT_GE(level["batch_frames_mean"].get<double>(), 1);
  }
  EXPECT_EQ(json["levels"][1]["concurrency"], 3);
}

// --protocol v2 sends classify's and bench's calls as the Open Inference Protocol's ModelInfer,
// with every setting as a request parameter: the same answers as Classify's.
TEST_F(ServerTest, ClassifiesThroughEitherFrontDoor) {
  const std::string settings =
      "classify " + *dir_ +
      "/clip.mp4 --json --top-k 3 --sampling window --num-frames 3 --stride-frames 2 "
      "--start-seconds 1.0 --model tiny-transformer --attention clustered";
  int exit_code = 0;
  const std::string classify = Client(settings, &exit_code);
  ASSERT_EQ(exit_code, 0) << classify;
  const std::string infer = Client(settings + " --protocol v2", &exit_code);
  ASSERT_EQ(exit_code, 0) << infer;
  const nlohmann::json expected = nlohmann::json::parse(classify);
  const nlohmann::json json = nlohmann::json::parse(infer);
  EXPECT_EQ(json["model"], "tiny-transformer");
  ASSERT_EQ(json["top_k"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(json["top_k"][i]["label"], expected["top_k"][i]["label"]);
    EXPECT_NEAR(json["top_k"][i]["score"].get<double>(),
                expected["top_k"][i]["score"].get<double>(), 1e-5);
  }
  EXPECT_THAT(json["frame_timestamps_seconds"].get<std::vector<double>>(),
              ElementsAre(DoubleNear(1.0, 1e-6), DoubleNear(1.2, 1e-6), DoubleNear(1.4, 1e-6)));
  EXPECT_GT(json["timings"]["total_ms"].get<double>(), 0);

  const std::string refused =
      Client("classify " + *dir_ + "/clip.mp4 --model nope --protocol v2", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(refused, HasSubstr("NOT_FOUND"));

  const std::string bench =
      Client("bench " + *dir_ + "/clip.mp4 --concurrency 2 --requests 4 " + "--json --protocol v2",
             &exit_code);
  ASSERT_EQ(exit_code, 0) << bench;
  const nlohmann::json level = nlohmann::json::parse(bench)["levels"][0];
  EXPECT_EQ(level["errors"], 0);
  EXPECT_DOUBLE_EQ(level["frames_per_s"].get<double>(), 4 * level["clips_per_s"].get<double>());
}

// vidclf stream --protocol v2 follows the feed as a sequence of ModelStreamInfer: the same last
// prediction as StreamClassify's, and a failed sequence's error as the exit status.
TEST_F(ServerTest, FollowsAFeedThroughEitherFrontDoor) {
  // The last JSON prediction line of a stream's output.
  auto last_prediction = [](const std::string& output) {
    nlohmann::json last;
    for (absl::string_view line : absl::StrSplit(output, '\n')) {
      if (absl::StartsWith(line, "{")) last = nlohmann::json::parse(line);
    }
    return last;
  };
  const std::string settings =
      "stream " + *dir_ + "/clip.mp4 --json --top-k 2 --emit-every-frames 5 --model tiny";
  int exit_code = 0;
  const std::string classify = Client(settings, &exit_code);
  ASSERT_EQ(exit_code, 0) << classify;
  const std::string infer = Client(settings + " --protocol v2", &exit_code);
  ASSERT_EQ(exit_code, 0) << infer;
  const nlohmann::json expected = last_prediction(classify);
  const nlohmann::json json = last_prediction(infer);
  ASSERT_FALSE(json.is_null()) << infer;
  EXPECT_EQ(json["model"], "tiny");
  EXPECT_EQ(json["last_frame"], expected["last_frame"]);
  EXPECT_EQ(json["frames_seen"], "20");  // protobuf's JSON writes 64-bit integers as text
  ASSERT_EQ(json["top_k"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(json["top_k"][i]["label"], expected["top_k"][i]["label"]);
    EXPECT_NEAR(json["top_k"][i]["score"].get<double>(),
                expected["top_k"][i]["score"].get<double>(), 1e-4);
  }
  const std::string refused = Client(settings + " --protocol v2 --attention nope", &exit_code);
  EXPECT_EQ(exit_code, 1);
  EXPECT_THAT(refused, HasSubstr("INVALID_ARGUMENT"));
}

// Every executable explains itself with --help and refuses an unknown option.
TEST_F(ServerTest, CommandLinesHaveHelp) {
  int exit_code = 0;
  std::string output =
      testing::RunCommand(std::string(testing::ClientBinary()) + " bench --help 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_THAT(output, HasSubstr("--concurrency"));
  output = testing::RunCommand(std::string(testing::ServerBinary()) + " --help 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 0);
  EXPECT_THAT(output, HasSubstr("--max-batch-frames"));
  output = testing::RunCommand(
      std::string(testing::ClientBinary()) + " classify clip.mp4 --frobnicate 2>&1", &exit_code);
  EXPECT_NE(exit_code, 0);
  EXPECT_THAT(output, HasSubstr("frobnicate"));
}

// OpenBLAS 0.3.21 runs its generic SSE3 kernels ("Prescott") on CPUs newer than its tables; the
// server starts itself again with the kernels the CPU runs and names them in its start-up log.
TEST_F(ServerTest, RunsTheBlasKernelsOfThisCpu) {
  const std::string& log = server_->output();
  ASSERT_THAT(log, HasSubstr("intra-op threads"));
  const std::string label = "OpenBLAS kernels: ";
  const size_t named = log.find(label);
  if (named == std::string::npos) GTEST_SKIP() << "the BLAS in use is not OpenBLAS";
  const size_t begin = named + label.size();
  const std::string kernels = log.substr(begin, log.find(')', begin) - begin);
  if (const char* chosen = std::getenv("OPENBLAS_CORETYPE")) {
    GTEST_SKIP() << "the caller chose OpenBLAS's kernels: " << chosen;
  }
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(kernels, "Prescott") << "on a CPU with AVX2 and FMA";
  }
}

// With the default --cores (the machine's), the server binds its backbone's threads where it may
// run on every CPU of the machine, and says so; in a smaller CPU set it says it leaves them be.
TEST_F(ServerTest, LogsWhereTheBackbonesThreadsRun) {
  const std::vector<int> cpus = model::AllowedCpus();
  if (static_cast<int>(cpus.size()) == static_cast<int>(std::thread::hardware_concurrency())) {
    EXPECT_THAT(server_->output(), HasSubstr("backbone intra-op threads bound one per CPU: " +
                                             absl::StrJoin(cpus, ",")));
  } else {
    EXPECT_THAT(server_->output(), HasSubstr("backbone intra-op threads left to the kernel"));
  }
}

// Left to choose (--max-batch-frames 0, the default), the server batches 16 frames at most where
// the models run on the CPU, as its benchmarks found best there, and says so.
TEST_F(ServerTest, ChoosesTheCpusBatchSize) {
  EXPECT_THAT(server_->output(),
              HasSubstr("backbone batches of up to 16 frames; heads on 1 thread"));
}

// The start-up log says which kernels the fp32 backbone runs on this CPU, and why.
TEST_F(ServerTest, SaysWhichConvolutionsTheBackboneRuns) {
  EXPECT_THAT(server_->output(),
              HasSubstr(model::OneDnnResNet18::WinogradAvailable()
                            ? "fused backbone (oneDNN's Winograd 3x3 convolutions)"
                            : "fused backbone (LibTorch's convolutions: oneDNN has no Winograd "
                              "kernels for this CPU)"));
}

// The suite's server runs its models on the CPU with --decode-device auto: it decodes on the CPU,
// says why once, and counts each call as a fallback; a server with the default, --decode-device
// cpu, counts none, and both give the same scores.
TEST_F(ServerTest, DecodesOnTheCpuWhereNoGpuDecodesAndSaysWhy) {
  int exit_code = 0;
  const std::string classify = "classify " + *dir_ + "/clip.mp4 --json --top-k 3";
  const auto top_k = [](const std::string& json) { return nlohmann::json::parse(json)["top_k"]; };
  const std::string first = Client(classify, &exit_code);
  ASSERT_EQ(exit_code, 0) << first;
  ASSERT_EQ(top_k(Client(classify, &exit_code)), top_k(first));
  EXPECT_THAT(server_->output(), HasSubstr("video decodes on the CPU: --decode-device auto and "
                                           "the models run on the CPU"));
  const std::string told = "no GPU decodes video for this server";
  ASSERT_TRUE(server_->WaitForOutput(told, 10)) << server_->output();
  const size_t said = server_->output().find(told);
  EXPECT_EQ(server_->output().find(told, said + 1), std::string::npos) << server_->output();
  auto metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("vidclf_decoded_clips_total{device=\"cpu\"}"));
  EXPECT_THAT(*metrics, HasSubstr("vidclf_decode_fallbacks_total{reason=\"no_gpu\"}"));
  EXPECT_THAT(*metrics, Not(HasSubstr("vidclf_nvdec_sessions")));
  EXPECT_THAT(*metrics, Not(HasSubstr("vidclf_idle_decoders")));  // no decoders kept on the CPU

  auto on_cpu = testing::ServerProcess::Start(
      testing::ServerBinary(), {"--model-repository", *dir_ + "/repo", "--device", "cpu"});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_THAT((*on_cpu)->output(), HasSubstr("video decodes on the CPU (--decode-device cpu)"));
  const std::string answer =
      testing::RunCommand(std::string(testing::ClientBinary()) + " " + classify + " --server " +
                              (*on_cpu)->grpc_address() + " 2>&1",
                          &exit_code);
  ASSERT_EQ(exit_code, 0) << answer;
  EXPECT_EQ(top_k(answer), top_k(first));
  metrics = testing::HttpGet((*on_cpu)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("vidclf_decoded_clips_total{device=\"cpu\"} 1"));
  EXPECT_THAT(*metrics, Not(HasSubstr("vidclf_decode_fallbacks_total{")));
}

// bf16 on the CPU: where the CPU has bf16 instructions the server runs oneDNN's bf16 kernels, says
// so, and answers with fp32's top label; elsewhere it does not start, and says why.
TEST_F(ServerTest, Bf16OnTheCpuRunsWhereTheCpuHasItsInstructions) {
  auto bf16 = testing::ServerProcess::Start(
      testing::ServerBinary(),
      {"--model-repository", *dir_ + "/repo", "--device", "cpu", "--precision", "bf16"});
  if (!model::OneDnnResNet18::Bf16Available()) {
    ASSERT_FALSE(bf16.ok());
    EXPECT_THAT(std::string(bf16.status().message()), HasSubstr("bf16 instructions"));
    GTEST_SKIP() << "no bf16 instructions on this CPU: the refusal checked";
  }
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_THAT((*bf16)->output(), HasSubstr("in bf16, channels-last, fused backbone on oneDNN's "
                                           "bf16 kernels"));
  int exit_code = 0;
  const std::string classify = "classify " + *dir_ + "/clip.mp4 --json --top-k 1";
  const std::string fp32 = Client(classify, &exit_code);
  ASSERT_EQ(exit_code, 0) << fp32;
  const std::string answer =
      testing::RunCommand(std::string(testing::ClientBinary()) + " " + classify + " --server " +
                              (*bf16)->grpc_address() + " 2>&1",
                          &exit_code);
  ASSERT_EQ(exit_code, 0) << answer;
  const auto top = [](const std::string& json) {
    return nlohmann::json::parse(json)["top_k"][0]["label"];
  };
  EXPECT_EQ(top(answer), top(fp32));
}

// A GPU named for decoding that cannot decode stops the start, naming the flag; a value that is
// no device, a negative count of kept decoders or an unknown place of conversion is refused as a
// flag error.
TEST_F(ServerTest, RefusesToStartWhereTheNamedDecodeDeviceCannotDecode) {
  auto server = testing::ServerProcess::Start(
      testing::ServerBinary(),
      {"--model-repository", *dir_ + "/repo", "--device", "cpu", "--decode-device", "cuda:0"});
  if (server.ok()) GTEST_SKIP() << "cuda:0 decodes on this machine";
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("--decode-device: cannot open cuda:0 for decoding (it needs an NVIDIA GPU "
                        "and the driver's libcuda.so.1 and libnvcuvid.so.1)"));
  int exit_code = 0;
  // The server's output when started with `flag`, which it refuses.
  const auto refused = [&](const std::string& flag) {
    return testing::RunCommand(std::string(testing::ServerBinary()) + " --model-repository " +
                                   *dir_ + "/repo --grpc-port 0 --metrics-port 0 " + flag + " 2>&1",
                               &exit_code);
  };
  const std::string output = refused("--decode-device gpu0");
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_THAT(output, HasSubstr("--decode-device: \"gpu0\" is none of auto, cpu, cuda:N"));
  const std::string negative = refused("--idle-nvdec-decoders -1");
  EXPECT_NE(exit_code, 0) << negative;
  EXPECT_THAT(negative, HasSubstr("--idle-nvdec-decoders: Value -1 not in range 0 to 4096"));
  const std::string conversion = refused("--nvdec-conversion cuda");
  EXPECT_NE(exit_code, 0) << conversion;
  EXPECT_THAT(conversion, HasSubstr("--nvdec-conversion: cuda not in {gpu,host}"));
  const std::string no_head = refused("--head-threads 0");
  EXPECT_NE(exit_code, 0) << no_head;
  EXPECT_THAT(no_head, HasSubstr("--head-threads: Value 0 not in range 1 to 256"));
  const std::string batch = refused("--max-batch-frames -1");
  EXPECT_NE(exit_code, 0) << batch;
  EXPECT_THAT(batch, HasSubstr("--max-batch-frames: Value -1 not in range 0 to 4096"));
  const std::string side_by_side = refused("--backbone-batches-with-feeds 65");
  EXPECT_NE(exit_code, 0) << side_by_side;
  EXPECT_THAT(side_by_side,
              HasSubstr("--backbone-batches-with-feeds: Value 65 not in range 0 to 64"));
  const std::string precision = refused("--precision int4");
  EXPECT_NE(exit_code, 0) << precision;
  EXPECT_THAT(precision, HasSubstr("--precision: int4 not in {fp32,fp16,bf16,int8,auto}"));
}

TEST_F(ServerTest, MetricsPassPromtoolAndCountRequestsByCode) {
  v1::ClassifyResponse response;
  Call(v1::ClassifyRequest(), &response);  // one INVALID_ARGUMENT for certain
  Upload({}, &response);                   // and one for the upload method
  auto metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("vidclf_requests_total{"));
  EXPECT_THAT(*metrics, HasSubstr("code=\"INVALID_ARGUMENT\",method=\"Classify\""));
  EXPECT_THAT(*metrics, HasSubstr("code=\"INVALID_ARGUMENT\",method=\"ClassifyUpload\""));
  EXPECT_THAT(*metrics, HasSubstr("vidclf_request_duration_seconds_bucket{"));
  EXPECT_THAT(*metrics, HasSubstr("process_resident_memory_bytes "));

  const std::string path = *dir_ + "/metrics.txt";
  std::ofstream(path) << *metrics;
  int exit_code = 0;
  const std::string lint =
      testing::RunCommand("promtool check metrics < " + path + " 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 0) << lint;
}

}  // namespace
}  // namespace vidclf
