// The staged engine seen from outside: the real vidclf-server on a loopback port under
// concurrent, cancelled, expired and excessive calls, drained by SIGTERM, reloaded by SIGHUP,
// asked for its models, and scraped by a real Prometheus server.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "model/thread_affinity.h"
#include "model/video_model.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A video whose uniform sampling decodes all of it (one keyframe, no B-frames): 2000 frames at
// 720p in 5 MB, about 2 s of decoding on one core.
constexpr char kLongVideo[] =
    "-f lavfi -i testsrc2=size=1280x720:rate=25 -frames:v 2000 -c:v libx264 -preset superfast "
    "-crf 45 -g 100000 -bf 0";

class EngineServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("engine-server"));
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    testing::SaveModel(testing::TinyTransformerConfig("tiny-linear", "causal-linear"),
                       *dir_ + "/repo/tiny-linear/1");
    *videos_ = testing::DistinctClips(*dir_);
    *long_video_ = testing::ReadFile(testing::CachedVideo(kLongVideo, ".mp4"));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::unique_ptr<testing::ServerProcess> StartServer(
      std::vector<std::string> arguments = {}, const std::string& repository = "") {
    arguments.insert(arguments.begin(),
                     {"--model-repository", repository.empty() ? *dir_ + "/repo" : repository});
    auto server = testing::ServerProcess::Start(testing::ServerBinary(), arguments);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static std::unique_ptr<v1::VideoClassifier::Stub> Stub(const testing::ServerProcess& server) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxSendMessageSize(64 << 20);
    return v1::VideoClassifier::NewStub(grpc::CreateCustomChannel(
        server.grpc_address(), grpc::InsecureChannelCredentials(), arguments));
  }

  static v1::ClassifyRequest Request(const std::string& video) {
    v1::ClassifyRequest request;
    request.set_video(video);
    request.set_top_k(3);
    return request;
  }

  // Calls Classify with `timeout`; `cancel_after` (when not zero) cancels the call then.
  static grpc::Status Classify(const testing::ServerProcess& server,
                               const v1::ClassifyRequest& request, v1::ClassifyResponse* response,
                               absl::Duration timeout = absl::Seconds(120),
                               absl::Duration cancel_after = absl::ZeroDuration()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    auto stub = Stub(server);
    if (cancel_after == absl::ZeroDuration()) return stub->Classify(&context, request, response);
    std::promise<grpc::Status> done;
    std::future<grpc::Status> status = done.get_future();
    stub->async()->Classify(&context, &request, response,
                            [&done](grpc::Status status) { done.set_value(status); });
    if (status.wait_for(absl::ToChronoMilliseconds(cancel_after)) != std::future_status::ready) {
      context.TryCancel();
    }
    return status.get();
  }

  static std::string Metrics(const testing::ServerProcess& server) {
    auto page = testing::HttpGet(server.metrics_port(), "/metrics");
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? *page : "";
  }

  static std::string* dir_;
  static std::vector<std::string>* videos_;
  static std::string* long_video_;
};

std::string* EngineServerTest::dir_ = nullptr;
std::vector<std::string>* EngineServerTest::videos_ = new std::vector<std::string>();
std::string* EngineServerTest::long_video_ = new std::string();

// Sixteen clients at once, their frames batched together, get the answers of calls made one at a
// time with batches of one frame.
TEST_F(EngineServerTest, ConcurrentClientsGetTheAnswersOfSequentialCalls) {
  std::vector<v1::ClassifyResponse> expected(videos_->size());
  {
    auto server = StartServer({"--max-batch-frames", "1"});
    ASSERT_NE(server, nullptr);
    for (size_t i = 0; i < videos_->size(); ++i) {
      ASSERT_TRUE(Classify(*server, Request((*videos_)[i]), &expected[i]).ok());
    }
  }
  auto server = StartServer({"--max-batch-frames", "32", "--max-queue-delay-us", "20000"});
  ASSERT_NE(server, nullptr);
  std::vector<std::future<std::pair<grpc::Status, v1::ClassifyResponse>>> calls;
  for (int i = 0; i < 16; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      v1::ClassifyResponse response;
      grpc::Status status = Classify(*server, Request((*videos_)[i % videos_->size()]), &response);
      return std::make_pair(status, response);
    }));
  }
  for (int i = 0; i < 16; ++i) {
    auto [status, response] = calls[i].get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    const v1::ClassifyResponse& want = expected[i % videos_->size()];
    ASSERT_EQ(response.top_k_size(), want.top_k_size());
    for (int k = 0; k < want.top_k_size(); ++k) {
      EXPECT_EQ(response.top_k(k).label(), want.top_k(k).label()) << "call " << i;
      EXPECT_NEAR(response.top_k(k).score(), want.top_k(k).score(), 1e-4) << "call " << i;
    }
  }
  const std::string metrics = Metrics(*server);
  EXPECT_EQ(testing::MetricValue(metrics, "vidclf_frames_embedded_total"), 64);
  // Some batch held frames of several calls.
  EXPECT_LT(testing::MetricValue(metrics, "vidclf_batch_frames_count"), 64);
}

// Cancelled calls and calls whose deadline passes stop at once and give back their place and
// bytes; a short call after them is not held up by their work.
TEST_F(EngineServerTest, CancelledAndExpiredCallsStopAndFreeWhatTheyHeld) {
  auto server = StartServer({"--decode-slots", "1"});
  ASSERT_NE(server, nullptr);
  v1::ClassifyResponse response;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Classify(*server, Request(*long_video_), &response).ok());
  const absl::Duration long_call = absl::Now() - start;

  std::vector<std::future<grpc::Status>> abandoned;
  for (int i = 0; i < 4; ++i) {
    abandoned.push_back(std::async(std::launch::async, [&] {
      v1::ClassifyResponse ignored;
      return Classify(*server, Request(*long_video_), &ignored, absl::Seconds(120),
                      absl::Milliseconds(100));
    }));
    abandoned.push_back(std::async(std::launch::async, [&] {
      v1::ClassifyResponse ignored;
      return Classify(*server, Request(*long_video_), &ignored, absl::Milliseconds(300));
    }));
  }
  for (auto& call : abandoned) {
    const grpc::StatusCode code = call.get().error_code();
    EXPECT_TRUE(code == grpc::StatusCode::CANCELLED || code == grpc::StatusCode::DEADLINE_EXCEEDED)
        << code;
  }
  // The server lets go of them within moments, not after decoding them.
  const absl::Time released_by = absl::Now() + long_call;
  std::string metrics;
  while (absl::Now() < released_by) {
    metrics = Metrics(*server);
    if (testing::MetricValue(metrics, "vidclf_inflight_requests") == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(testing::MetricValue(metrics, "vidclf_inflight_requests"), 0) << metrics;
  EXPECT_EQ(testing::MetricValue(metrics, "vidclf_inflight_bytes"), 0) << metrics;

  const absl::Time short_start = absl::Now();
  ASSERT_TRUE(Classify(*server, Request((*videos_)[0]), &response).ok());
  EXPECT_LT(absl::Now() - short_start, long_call / 2);
}

// Past the bounds, calls are refused with RESOURCE_EXHAUSTED at once, the bytes held stay within
// the bound, and the server keeps serving.
TEST_F(EngineServerTest, OverloadIsRefusedAtOnceWithinTheBounds) {
  auto server = StartServer(
      {"--max-inflight-requests", "4", "--max-inflight-mib", "16", "--decode-slots", "1"});
  ASSERT_NE(server, nullptr);
  std::atomic<double> most_bytes{0};
  std::atomic<bool> loading{true};
  std::thread watcher([&] {
    while (loading) {
      most_bytes = std::max(most_bytes.load(),
                            testing::MetricValue(Metrics(*server), "vidclf_inflight_bytes"));
      absl::SleepFor(absl::Milliseconds(10));
    }
  });
  std::vector<std::future<std::pair<grpc::Status, absl::Duration>>> calls;
  for (int i = 0; i < 24; ++i) {
    calls.push_back(std::async(std::launch::async, [&] {
      v1::ClassifyResponse response;
      const absl::Time start = absl::Now();
      grpc::Status status = Classify(*server, Request(*long_video_), &response, absl::Seconds(10),
                                     absl::Seconds(3));  // leave no work behind
      return std::make_pair(status, absl::Now() - start);
    }));
  }
  int refused = 0;
  for (auto& call : calls) {
    auto [status, took] = call.get();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(status.error_message(), HasSubstr("server is busy"));
      EXPECT_LT(took, absl::Seconds(2)) << "a refusal waited";
    }
  }
  loading = false;
  watcher.join();
  EXPECT_GE(refused, 4);
  EXPECT_GT(most_bytes.load(), 0);
  EXPECT_LE(most_bytes.load(), 16 << 20);
  const std::string metrics = Metrics(*server);
  EXPECT_THAT(metrics, HasSubstr("vidclf_rejected_total{reason="));
  v1::ClassifyResponse response;
  EXPECT_TRUE(Classify(*server, Request((*videos_)[0]), &response).ok());
}

// SIGTERM: health says NOT_SERVING, new calls get UNAVAILABLE, calls in flight finish (or, past
// the drain timeout, are cancelled with UNAVAILABLE), and the process exits 0.
TEST_F(EngineServerTest, DrainsOnSigterm) {
  auto server = StartServer({"--drain-timeout-s", "3", "--decode-slots", "1"});
  ASSERT_NE(server, nullptr);
  std::vector<std::future<grpc::Status>> inflight;
  for (int i = 0; i < 3; ++i) {
    inflight.push_back(std::async(std::launch::async, [&, i] {
      v1::ClassifyResponse response;
      return Classify(*server, Request((*videos_)[i]), &response);
    }));
  }
  // The short calls must queue for the one decoding slot ahead of the long ones, or one of them
  // could wait behind them past the drain timeout.
  // Waits until the server holds `count` calls plus the short calls that have not returned yet
  // (they may all be done before the long ones arrive; waiting for nine would then time out while
  // the long calls finish, leaving nothing to drain).
  auto wait_for_inflight = [&](int count) {
    auto short_calls_running = [&] {
      return static_cast<int>(std::count_if(inflight.begin(), inflight.end(), [](auto& call) {
        return call.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
      }));
    };
    const absl::Time wait_until = absl::Now() + absl::Seconds(10);
    while (testing::MetricValue(Metrics(*server), "vidclf_inflight_requests") <
               count + short_calls_running() &&
           absl::Now() < wait_until) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  };
  wait_for_inflight(0);
  // Long enough to outlast the drain timeout: six long calls on one decoding slot.
  std::vector<std::future<grpc::Status>> too_long;
  for (int i = 0; i < 6; ++i) {
    too_long.push_back(std::async(std::launch::async, [&] {
      v1::ClassifyResponse response;
      return Classify(*server, Request(*long_video_), &response);
    }));
  }
  wait_for_inflight(6);
  server->Signal(SIGTERM);
  ASSERT_TRUE(server->WaitForOutput("draining", 10)) << server->output();
  v1::ClassifyResponse response;
  const grpc::Status late = Classify(*server, Request((*videos_)[0]), &response);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
  for (auto& call : inflight) {
    const grpc::Status status = call.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  int cancelled = 0;
  for (auto& call : too_long) {
    const grpc::Status status = call.get();
    if (!status.ok()) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
      ++cancelled;
    }
  }
  EXPECT_GT(cancelled, 0);
  EXPECT_EQ(server->Stop(), 0) << server->output();
  EXPECT_THAT(server->output(), HasSubstr("drain timeout"));
}

// An upload accepted before SIGTERM whose request has not arrived yet is a call in flight like
// the others: the drain waits for it, then ends it with UNAVAILABLE, never cut by the final
// shutdown (CANCELLED, which clients do not retry).
TEST_F(EngineServerTest, DrainWaitsForAnUploadStillArriving) {
  auto server = StartServer({"--drain-timeout-s", "1"});
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);
  grpc::ClientContext context;
  v1::ClassifyResponse response;
  auto upload = stub->ClassifyUpload(&context, &response);
  const absl::Time wait_until = absl::Now() + absl::Seconds(10);
  while (testing::MetricValue(Metrics(*server), "vidclf_inflight_requests") < 1 &&
         absl::Now() < wait_until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  server->Signal(SIGTERM);
  ASSERT_TRUE(server->WaitForOutput("drain timeout", 10)) << server->output();
  const grpc::Status status = upload->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("shut down before the call finished"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// Calls raced against SIGTERM on connections already open get OK or UNAVAILABLE, which clients
// retry elsewhere, never CANCELLED: the gate refuses them on their headers from the drain's start
// through the final shutdown. Three rounds of 200 calls (Classify and ListModels) on 8 channels.
TEST_F(EngineServerTest, CallsRacingTheShutdownGetUnavailableNeverCancelled) {
  constexpr int kChannels = 8;
  constexpr int kCallsPerChannel = 25;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    auto server = StartServer();
    ASSERT_NE(server, nullptr);
    std::vector<std::unique_ptr<v1::VideoClassifier::Stub>> stubs;
    for (int i = 0; i < kChannels; ++i) {
      stubs.push_back(Stub(*server));
      grpc::ClientContext context;
      v1::ListModelsResponse models;
      ASSERT_TRUE(stubs.back()->ListModels(&context, v1::ListModelsRequest(), &models).ok());
    }
    std::atomic<int> answered{0};
    absl::Mutex mutex;
    std::map<grpc::StatusCode, int> codes;
    std::vector<std::thread> callers;
    for (int i = 0; i < kChannels; ++i) {
      callers.emplace_back([&, i] {
        for (int call = 0; call < kCallsPerChannel; ++call) {
          grpc::ClientContext context;
          context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
          grpc::Status status;
          if (call % 2 == 0) {
            v1::ClassifyResponse response;
            status = stubs[i]->Classify(&context, Request((*videos_)[call % 4]), &response);
          } else {
            v1::ListModelsResponse models;
            status = stubs[i]->ListModels(&context, v1::ListModelsRequest(), &models);
          }
          ++answered;
          absl::MutexLock lock(&mutex);
          ++codes[status.error_code()];
        }
      });
    }
    while (answered < 16) absl::SleepFor(absl::Milliseconds(1));
    server->Signal(SIGTERM);
    for (std::thread& caller : callers) caller.join();
    EXPECT_EQ(server->Stop(), 0) << server->output();
    for (const auto& [code, count] : codes) {
      EXPECT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::UNAVAILABLE)
          << count << " calls got code " << code;
    }
    EXPECT_GT(codes[grpc::StatusCode::UNAVAILABLE], 0);
  }
}

// SIGHUP loads the repository again: new calls get the new version, the call in flight keeps
// its model, and nothing is dropped.
TEST_F(EngineServerTest, ReloadsOnSighupWithoutDroppingCalls) {
  const std::string repository = *dir_ + "/reloaded";
  std::filesystem::create_directories(repository);
  std::filesystem::copy(*dir_ + "/repo/tiny", repository + "/tiny",
                        std::filesystem::copy_options::recursive);
  auto server = StartServer({"--decode-slots", "1"}, repository);
  ASSERT_NE(server, nullptr);
  auto before = std::async(std::launch::async, [&] {
    v1::ClassifyResponse response;
    grpc::Status status = Classify(*server, Request(*long_video_), &response);
    return std::make_pair(status, response);
  });
  absl::SleepFor(absl::Milliseconds(100));
  std::filesystem::copy(repository + "/tiny/1", repository + "/tiny/2",
                        std::filesystem::copy_options::recursive);
  std::string config = testing::ReadFile(repository + "/tiny/2/model.json");
  absl::StrReplaceAll({{"\"version\": \"1\"", "\"version\": \"2\""}}, &config);
  std::ofstream(repository + "/tiny/2/model.json") << config;
  server->Signal(SIGHUP);
  ASSERT_TRUE(server->WaitForOutput("model repository reloaded", 60)) << server->output();
  v1::ClassifyResponse after;
  ASSERT_TRUE(Classify(*server, Request((*videos_)[0]), &after).ok());
  EXPECT_EQ(after.model_version(), "2") << server->output();
  auto [status, first] = before.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(first.model_version(), "1");
}

TEST_F(EngineServerTest, ListsAndDescribesItsModels) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);
  grpc::ClientContext list_context;
  v1::ListModelsResponse list;
  ASSERT_TRUE(stub->ListModels(&list_context, v1::ListModelsRequest(), &list).ok());
  ASSERT_EQ(list.models_size(), 2);
  EXPECT_EQ(list.default_model(), "tiny");
  const v1::ModelInfo& gru = list.models(0);
  EXPECT_EQ(gru.name(), "tiny");
  EXPECT_EQ(gru.version(), "1");
  EXPECT_THAT(gru.versions(), ElementsAre("1"));
  EXPECT_THAT(gru.labels(), ElementsAre("alpha", "beta", "gamma"));
  EXPECT_EQ(gru.input().num_frames(), 4u);
  EXPECT_EQ(gru.input().crop_size(), 64u);
  EXPECT_EQ(gru.input().default_sampling(), "uniform");
  EXPECT_EQ(gru.head(), "gru");
  EXPECT_EQ(nlohmann::json::parse(gru.head_options_json())["hidden_size"], 32);
  EXPECT_EQ(gru.streaming().mode(), "recurrent");
  EXPECT_TRUE(gru.is_default());

  grpc::ClientContext get_context;
  v1::GetModelRequest get;
  get.set_name("tiny-linear");
  v1::ModelInfo linear;
  ASSERT_TRUE(stub->GetModel(&get_context, get, &linear).ok());
  EXPECT_EQ(linear.head(), "transformer");
  EXPECT_EQ(linear.attention(), "causal-linear");
  EXPECT_EQ(nlohmann::json::parse(linear.attention_options_json())["type"], "causal-linear");
  EXPECT_EQ(linear.streaming().mode(), "recurrent");
  EXPECT_FALSE(linear.is_default());

  grpc::ClientContext missing_context;
  get.set_name("nope");
  const grpc::Status missing = stub->GetModel(&missing_context, get, &linear);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.error_message(), HasSubstr("tiny, tiny-linear"));
}

// --metrics-host puts /metrics on another address than gRPC's (127.0.0.2 is loopback too).
TEST_F(EngineServerTest, MetricsListenWhereTheyAreToldTo) {
  auto server = StartServer({"--metrics-host", "127.0.0.2"});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("metrics on http://127.0.0.2:"));
  v1::ClassifyResponse response;
  EXPECT_TRUE(Classify(*server, Request((*videos_)[0]), &response).ok());
  const absl::StatusOr<std::string> page =
      testing::HttpGet("127.0.0.2", server->metrics_port(), "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("vidclf_requests_total"));
  EXPECT_FALSE(testing::HttpGet(server->metrics_port(), "/metrics").ok())
      << "/metrics answered on gRPC's address too";
}

// Two uploads that stall after their first 100 KB wait for their bytes on arrival slots of their
// own, lending their cores meanwhile: a Classify of bytes in hand takes its usual time (within
// 2x of the median alone), where before they held both decode slots for the whole budget.
TEST_F(EngineServerTest, StalledUploadsDoNotHoldUpOtherCalls) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const auto timed_calls = [&] {
    std::vector<absl::Duration> took;
    for (int i = 0; i < 3; ++i) {
      v1::ClassifyResponse response;
      const absl::Time start = absl::Now();
      EXPECT_TRUE(Classify(*server, Request(*long_video_), &response).ok());
      took.push_back(absl::Now() - start);
    }
    std::sort(took.begin(), took.end());
    return took;
  };
  const absl::Duration alone = timed_calls()[1];  // the median

  auto stub = Stub(*server);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientWriter<v1::ClassifyUploadRequest>>> stalled;
  std::vector<v1::ClassifyResponse> responses(2);
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    stalled.push_back(stub->ClassifyUpload(contexts.back().get(), &responses[i]));
    v1::ClassifyUploadRequest first;
    first.mutable_settings()->set_top_k(3);
    first.set_chunk(long_video_->substr(0, 100 << 10));
    ASSERT_TRUE(stalled.back()->Write(first));
  }
  absl::SleepFor(absl::Milliseconds(500));  // both are decoding, waiting for their next bytes
  // Every one of them, not just their median: the first is the one a held slot would delay.
  for (const absl::Duration took : timed_calls()) EXPECT_LT(took, 2 * alone) << "alone " << alone;
  for (auto& context : contexts) context->TryCancel();
  for (auto& upload : stalled) upload->Finish();
}

// A request whose bytes are not its protobuf message gets INVALID_ARGUMENT saying so, on every
// method, counted in vidclf_requests_total; the server serves on. (gRPC C++ itself answers such a
// request UNIMPLEMENTED with no message.)
TEST_F(EngineServerTest, MalformedRequestsGetInvalidArgumentSayingSo) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  grpc::GenericStub stub(
      grpc::CreateChannel(server->grpc_address(), grpc::InsecureChannelCredentials()));
  // Field 1 as a varint whose continuation never ends: no message parses from it.
  const std::string garbage = "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
  grpc::Slice slice(garbage);
  const grpc::ByteBuffer malformed(&slice, 1);
  const std::string prefix = "/vidclf.v1.VideoClassifier/";
  for (const auto& [method, message] : std::vector<std::pair<std::string, std::string>>{
           {"Classify", "vidclf.v1.ClassifyRequest"},
           {"GetModel", "vidclf.v1.GetModelRequest"},
           {"ListModels", "vidclf.v1.ListModelsRequest"},
           {"WatchSource", "vidclf.v1.WatchSourceRequest"},
           {"ClassifyUpload", "vidclf.v1.ClassifyUploadRequest"},
           {"StreamClassify", "vidclf.v1.StreamClassifyRequest"}}) {
    SCOPED_TRACE(method);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    grpc::CompletionQueue queue;
    auto call = stub.PrepareCall(&context, prefix + method, &queue);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(queue.Next(&tag, &ok) && ok);
    call->WriteLast(malformed, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(3));
    ASSERT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat("is not a valid ", message)));
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
  }
  const std::string page = Metrics(*server);
  EXPECT_THAT(page,
              HasSubstr("vidclf_requests_total{code=\"INVALID_ARGUMENT\",method=\"Classify\""));
  EXPECT_THAT(page,
              HasSubstr("vidclf_requests_total{code=\"INVALID_ARGUMENT\",method=\"GetModel\""));
  // An unknown method is UNIMPLEMENTED, named.
  {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    grpc::Status status = grpc::Status::OK;
    absl::Notification done;
    stub.UnaryCall(&context, prefix + "NoSuchMethod", grpc::StubOptions(), &malformed, &response,
                   [&](grpc::Status s) {
                     status = s;
                     done.Notify();
                   });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(status.error_message(), HasSubstr("NoSuchMethod"));
  }
  v1::ClassifyResponse response;
  EXPECT_TRUE(Classify(*server, Request((*videos_)[0]), &response).ok());
}

// Classify takes its place in the engine on its headers: past --max-inflight-requests a call is
// refused before its body arrives, so a burst of large calls costs the server the bodies of
// those it admitted, not of all of them.
TEST_F(EngineServerTest, BurstsOfLargeCallsAreRefusedBeforeTheirBodies) {
  auto server = StartServer({"--max-inflight-requests", "2"});
  ASSERT_NE(server, nullptr);
  v1::ClassifyRequest request = Request(*long_video_);
  *request.mutable_video() += std::string((20 << 20) - request.video().size(), '\0');  // 20 MB
  const std::string serialized = request.SerializeAsString();
  grpc::Slice slice(serialized);
  const grpc::ByteBuffer body(&slice, 1);
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(64 << 20);
  grpc::GenericStub stub(grpc::CreateCustomChannel(server->grpc_address(),
                                                   grpc::InsecureChannelCredentials(), arguments));
  constexpr int kCalls = 20;
  const int64_t resident_before = testing::ResidentBytes(server->pid());
  absl::Mutex mutex;
  int finished = 0;
  std::vector<grpc::Status> statuses;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::ByteBuffer> responses(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(120)));
    stub.UnaryCall(contexts.back().get(), "/vidclf.v1.VideoClassifier/Classify",
                   grpc::StubOptions(), &body, &responses[i], [&](grpc::Status status) {
                     absl::MutexLock lock(&mutex);
                     statuses.push_back(status);
                     ++finished;
                   });
  }
  const int64_t resident_peak = testing::PeakResidentBytesUntil(server->pid(), [&] {
    absl::MutexLock lock(&mutex);
    return finished == kCalls;
  });
  int refused = 0;
  for (const grpc::Status& status : statuses) {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(status.error_message(), HasSubstr("calls are in flight"));
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
  }
  EXPECT_GE(refused, kCalls - 4);
  // The admitted bodies, each once as bytes and once parsed, and what decoding them holds: far
  // below the 400 MB that every body would have been.
  EXPECT_LT(resident_peak - resident_before, int64_t{200} << 20)
      << "resident before " << resident_before << ", at most " << resident_peak;
}

// The server starts itself again with OMP_WAIT_POLICY and OPENBLAS_NUM_THREADS set (main.cc):
// the process keeps its name, so that `pgrep vidclf-server` and `top` find it.
TEST_F(EngineServerTest, KeepsItsNameAfterStartingItselfAgain) {
  auto server = testing::ServerProcess::Start(testing::ServerBinary(),
                                              {"--model-repository", *dir_ + "/repo"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(testing::ReadFile(absl::StrCat("/proc/", (*server)->pid(), "/comm")),
            "vidclf-server\n");
}

// OpenMP capped at one thread cannot give the backbone its team bound one per CPU: the log says
// so once, the metric counts each try, and the server serves on.
TEST_F(EngineServerTest, WarnsOnceWhereTheBackbonesThreadsCannotBeBound) {
  const int cpus = static_cast<int>(model::AllowedCpus().size());
  if (cpus < 2 || cpus != static_cast<int>(std::thread::hardware_concurrency())) {
    GTEST_SKIP() << "the server binds its threads only where it may run on every CPU, 2 or more";
  }
  auto server = testing::ServerProcess::Start(
      testing::ServerBinary(), {"--model-repository", *dir_ + "/repo"}, {"OMP_THREAD_LIMIT=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  v1::ClassifyResponse response;
  for (const std::string& video : *videos_) {
    ASSERT_TRUE(Classify(**server, Request(video), &response).ok());
  }
  const std::string warning = absl::StrCat(
      "backbone intra-op threads could not all be bound one per CPU: OpenMP ran 1 of the ", cpus,
      " intra-op threads asked for");
  EXPECT_TRUE((*server)->WaitForOutput(warning, 10)) << (*server)->output();
  const std::string& log = (*server)->output();
  EXPECT_EQ(log.find(warning), log.rfind(warning)) << "warned more than once";
  EXPECT_GE(
      testing::MetricValue(Metrics(**server), "vidclf_backbone_thread_binding_failures_total"), 1);
}

// A real Prometheus server scrapes /metrics, and a quantile of the stage histograms comes back,
// while 50 other clients (from 127.0.0.2: another address than Prometheus's, whose share the
// per-address bound keeps) trickle their requests to /metrics a byte every 1.5 s.
TEST_F(EngineServerTest, PrometheusScrapesTheServer) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::vector<int> tricklers;
  for (int i = 0; i < 50; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in source = testing::Loopback(0);
    ::inet_pton(AF_INET, "127.0.0.2", &source.sin_addr);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof(source)), 0);
    sockaddr_in address = testing::Loopback(server->metrics_port());
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    tricklers.push_back(fd);
  }
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    for (size_t sent = 0; trickling && sent < request.size(); ++sent) {
      for (const int fd : tricklers) ::send(fd, &request[sent], 1, MSG_NOSIGNAL);
      for (int i = 0; trickling && i < 15; ++i) absl::SleepFor(absl::Milliseconds(100));
    }
  });
  v1::ClassifyResponse response;
  ASSERT_TRUE(Classify(*server, Request((*videos_)[0]), &response).ok());
  const std::string prometheus_dir = *dir_ + "/prometheus";
  std::filesystem::create_directories(prometheus_dir);
  std::ofstream(prometheus_dir + "/metrics.txt") << Metrics(*server);
  int exit_code = 0;
  const std::string lint = testing::RunCommand(
      "promtool check metrics < " + prometheus_dir + "/metrics.txt 2>&1", &exit_code);
  EXPECT_EQ(exit_code, 0) << lint;
  for (const char* family :
       {"vidclf_stage_duration_seconds_bucket", "vidclf_batch_frames_bucket", "vidclf_queue_depth",
        "vidclf_inflight_requests", "vidclf_inflight_bytes", "vidclf_frames_decoded_total",
        "vidclf_frames_embedded_total", "vidclf_model_info", "process_open_fds",
        "process_resident_memory_bytes"}) {
    EXPECT_GE(testing::MetricValue(Metrics(*server), family), 0) << family;
  }

  std::ofstream(prometheus_dir + "/prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "scrape_configs:\n  - job_name: vidclf\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << server->metrics_port() << "']\n";
  const int port = testing::UnusedLoopbackPort();
  testing::RunCommand(
      absl::StrCat("prometheus --config.file=", prometheus_dir,
                   "/prometheus.yml --storage.tsdb.path=", prometheus_dir,
                   "/data --web.listen-address=127.0.0.1:", port, " > ", prometheus_dir,
                   "/log 2>&1 & echo $! > ", prometheus_dir, "/pid"),
      &exit_code);
  const std::string query =
      "/api/v1/query?query=histogram_quantile(0.9,sum%20by%20(le,stage)(rate("
      "vidclf_stage_duration_seconds_bucket%5B1m%5D)))";
  std::string answer;
  bool has_value = false;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(90);
       !has_value && absl::Now() < give_up;) {
    ASSERT_TRUE(Classify(*server, Request((*videos_)[1]), &response).ok());
    absl::SleepFor(absl::Milliseconds(500));
    auto got = testing::HttpGet(port, query);
    if (!got.ok()) continue;
    answer = *got;
    const nlohmann::json json = nlohmann::json::parse(answer, nullptr, false);
    if (json.is_discarded() || json["status"] != "success") continue;
    for (const auto& sample : json["data"]["result"]) {
      const std::string value = sample["value"][1];
      if (value != "NaN") has_value = std::stod(value) > 0;
    }
  }
  testing::RunCommand("kill $(cat " + prometheus_dir + "/pid)", &exit_code);
  trickling = false;
  trickle.join();
  for (const int fd : tricklers) ::close(fd);
  EXPECT_TRUE(has_value) << answer << "\n" << testing::ReadFile(prometheus_dir + "/log");
}

}  // namespace
}  // namespace vidclf
