// Three real vidclf-server replicas behind a real nginx, configured with deploy/nginx's files:
// calls spread over the replicas, uploads and live streams pass through, and a replica that
// drains and stops loses no call, since the client tries a refused call again.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::HasSubstr;

// nginx in the foreground, one process, everything under `dir`; stopped with the object.
class Nginx {
 public:
  Nginx(const std::string& dir, int port) : dir_(dir), port_(port) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("nginx", "nginx", "-p", dir.c_str(), "-c", (dir + "/nginx.conf").c_str(),
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 100 && !testing::AcceptsConnections(port); ++i) ::usleep(50 * 1000);
  }
  ~Nginx() {
    ::kill(pid_, SIGQUIT);
    ::waitpid(pid_, nullptr, 0);
  }
  bool running() const { return testing::AcceptsConnections(port_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string error_log() const { return testing::ReadFile(dir_ + "/error.log"); }

 private:
  const std::string dir_;
  const int port_;
  pid_t pid_ = -1;
};

// The nginx.conf of the test: deploy/nginx/grpc-proxy.conf as shipped, but listening on `port`,
// and an upstream of the replicas' loopback ports.
void WriteNginxConfig(const std::string& dir, int port, const std::vector<int>& replica_ports) {
  std::filesystem::create_directories(dir + "/temp");
  std::string upstream = "upstream vidclf_replicas {\n";
  for (const int replica : replica_ports) {
    absl::StrAppend(&upstream, "  server 127.0.0.1:", replica, " max_fails=1 fail_timeout=5s;\n");
  }
  absl::StrAppend(&upstream, "  keepalive 32;\n}\n");
  testing::WriteFile(dir + "/upstream.conf", upstream);
  const std::string proxy =
      testing::ReadFile(std::string(testing::SourceDir()) + "/deploy/nginx/grpc-proxy.conf");
  ASSERT_THAT(proxy, HasSubstr("listen 50050 http2;"));
  testing::WriteFile(
      dir + "/grpc-proxy.conf",
      absl::StrReplaceAll(proxy, {{"listen 50050", absl::StrCat("listen 127.0.0.1:", port)}}));
  testing::WriteFile(dir + "/nginx.conf", absl::StrCat(R"(
daemon off;
master_process off;
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path temp/body;
  proxy_temp_path temp/proxy;
  fastcgi_temp_path temp/fastcgi;
  uwsgi_temp_path temp/uwsgi;
  scgi_temp_path temp/scgi;
  include upstream.conf;
  include grpc-proxy.conf;
}
)"));
}

double ClassifyCallsServed(const testing::ServerProcess& replica) {
  absl::StatusOr<std::string> page = testing::HttpGet(replica.metrics_port(), "/metrics");
  if (!page.ok()) return -1;
  std::smatch match;
  const std::regex line(
      R"re(vidclf_requests_total\{code="OK",method="Classify",model="tiny"\} (\S+))re");
  return std::regex_search(*page, match, line) ? std::stod(match[1]) : 0;
}

// A real Prometheus scraping the replicas' /metrics sees all three up, each with its calls.
void ExpectPrometheusScrapesAll(
    const std::string& dir, const std::vector<std::unique_ptr<testing::ServerProcess>>& replicas) {
  std::filesystem::create_directories(dir);
  std::string targets;
  for (const auto& replica : replicas) {
    absl::StrAppend(&targets, targets.empty() ? "" : ", ", "'127.0.0.1:", replica->metrics_port(),
                    "'");
  }
  testing::WriteFile(dir + "/prometheus.yml",
                     absl::StrCat("global: {scrape_interval: 1s}\nscrape_configs:\n",
                                  "  - job_name: vidclf\n    static_configs:\n",
                                  "      - targets: [", targets, "]\n"));
  const int port = testing::UnusedLoopbackPort();
  int exit_code = 0;
  testing::RunCommand(
      absl::StrCat("prometheus --config.file=", dir, "/prometheus.yml",
                   " --storage.tsdb.path=", dir, "/data", " --web.listen-address=127.0.0.1:", port,
                   " > ", dir, "/log 2>&1 & echo $! > ", dir, "/pid"),
      &exit_code);
  // The value of a query whose answer is one number; "" until it is.
  auto value = [port](const std::string& query) -> std::string {
    absl::StatusOr<std::string> answer = testing::HttpGet(port, "/api/v1/query?query=" + query);
    if (!answer.ok()) return "";
    const nlohmann::json json = nlohmann::json::parse(*answer, nullptr, false);
    if (json.is_discarded() || json["status"] != "success" || json["data"]["result"].empty()) {
      return "";
    }
    return json["data"]["result"][0]["value"][1];
  };
  const std::string up = "count(up%7Bjob%3D%22vidclf%22%7D%3D%3D1)";
  const std::string serving = "count(vidclf_requests_total%7Bmethod%3D%22Classify%22%7D%3E0)";
  std::string replicas_up, replicas_serving;
  for (int i = 0; i < 150 && (replicas_up != "3" || replicas_serving != "3"); ++i) {
    ::usleep(200 * 1000);
    replicas_up = value(up);
    replicas_serving = value(serving);
  }
  testing::RunCommand("kill $(cat " + dir + "/pid)", &exit_code);
  EXPECT_EQ(replicas_up, "3") << testing::ReadFile(dir + "/log");
  EXPECT_EQ(replicas_serving, "3");
}

// Each test's files (repository, videos, nginx's and Prometheus's) in a directory removed after
// the test, once its servers have stopped.
class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeScratchDir("replicas"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

TEST_F(ReplicasTest, ThreeReplicasBehindNginxShareCallsAndOneCanDrain) {
  testing::SaveModel(testing::TinyConfig(), dir_ + "/repo/tiny/1");
  testing::MakeVideo("-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 20 -c:v libx264",
                     dir_ + "/clip.mp4");
  std::vector<std::unique_ptr<testing::ServerProcess>> replicas;
  std::vector<int> ports;
  for (int i = 0; i < 3; ++i) {
    auto replica = testing::ServerProcess::Start(
        testing::ServerBinary(),
        {"--model-repository", dir_ + "/repo", "--cores", "1", "--decode-slots", "4"});
    ASSERT_TRUE(replica.ok()) << replica.status();
    ports.push_back(std::stoi((*replica)->grpc_address().substr(10)));
    replicas.push_back(*std::move(replica));
  }
  const int port = testing::UnusedLoopbackPort();
  WriteNginxConfig(dir_ + "/nginx", port, ports);
  Nginx nginx(dir_ + "/nginx", port);
  ASSERT_TRUE(nginx.running()) << nginx.error_log();

  // Load from `vidclf bench` through nginx reaches every replica, and a real Prometheus scrapes
  // all three.
  const std::string bench = absl::StrCat(testing::ClientBinary(), " bench ", dir_,
                                         "/clip.mp4 --json --server ", nginx.address());
  int exit_code = -1;
  std::string output = testing::RunCommand(bench + " --concurrency 3 --requests 24", &exit_code);
  ASSERT_EQ(exit_code, 0) << output << nginx.error_log();
  EXPECT_EQ(nlohmann::json::parse(output)["levels"][0]["errors"], 0) << output;
  double served = 0;
  for (const auto& replica : replicas) {
    EXPECT_GE(ClassifyCallsServed(*replica), 1) << "a replica got no call";
    served += ClassifyCallsServed(*replica);
  }
  EXPECT_EQ(served, 24);
  ExpectPrometheusScrapesAll(dir_ + "/prometheus", replicas);

  // A client-streaming upload and a live stream pass through too.
  output = testing::RunCommand(absl::StrCat(testing::ClientBinary(), " upload ", dir_,
                                            "/clip.mp4 --server ", nginx.address(), " 2>&1"),
                               &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  output = testing::RunCommand(
      absl::StrCat(testing::ClientBinary(), " stream ", dir_,
                   "/clip.mp4 --emit-every-frames 5 --server ", nginx.address(), " 2>&1"),
      &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("predictions"));

  // Mid-run, one replica is sent SIGTERM and drains, held open by an upload it accepted (in one
  // of its decoding slots, the others left to calls): the calls nginx gives it are refused with
  // UNAVAILABLE, which the client tries again, reaching the two others, and the upload is
  // answered before it stops. nginx picks each attempt's replica in turn, so a refused call meets
  // the draining replica on all 4 retries about once in 81 (1/3^4), and then fails: a few may.
  auto first = v1::VideoClassifier::NewStub(
      grpc::CreateChannel(replicas[0]->grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext upload_context;
  v1::ClassifyResponse upload_response;
  auto upload = first->ClassifyUpload(&upload_context, &upload_response);
  const std::string video = testing::ReadFile(dir_ + "/clip.mp4");
  v1::ClassifyUploadRequest chunk;
  chunk.set_chunk(video.substr(0, video.size() / 2));
  ASSERT_TRUE(upload->Write(chunk));
  auto bench_run = std::async(std::launch::async, [&] {
    int code = -1;
    std::string text = testing::RunCommand(bench + " --concurrency 3 --requests 45", &code);
    return std::make_pair(code, text);
  });
  // SIGTERM once the bench has had 6 calls answered.
  while (ClassifyCallsServed(*replicas[0]) + ClassifyCallsServed(*replicas[1]) +
             ClassifyCallsServed(*replicas[2]) <
         served + 6) {
    ::usleep(20 * 1000);
  }
  replicas[0]->Signal(SIGTERM);
  ASSERT_TRUE(replicas[0]->WaitForOutput("draining", 30)) << replicas[0]->output();
  const auto [bench_code, bench_output] = bench_run.get();
  ASSERT_EQ(bench_code, 0) << bench_output;
  const nlohmann::json level = nlohmann::json::parse(bench_output)["levels"][0];
  const int errors = level["errors"];
  // Without the client's retries, every call nginx gives the draining replica would fail.
  EXPECT_LE(errors, 2) << bench_output;
  if (errors > 0) {
    EXPECT_THAT(level["first_error"].get<std::string>(), HasSubstr("shutting down"))
        << bench_output;
  }
  EXPECT_EQ(ClassifyCallsServed(*replicas[0]) + ClassifyCallsServed(*replicas[1]) +
                ClassifyCallsServed(*replicas[2]),
            served + 45 - errors)
      << "each call answered once, but for those the draining replica refused 5 times";
  absl::StatusOr<std::string> page = testing::HttpGet(replicas[0]->metrics_port(), "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("vidclf_requests_total{code=\"UNAVAILABLE\",method=\"Classify\""))
      << "nginx gave the draining replica no call: the retries were not tested";
  chunk.set_chunk(video.substr(video.size() / 2));
  ASSERT_TRUE(upload->Write(chunk));
  upload->WritesDone();
  const grpc::Status upload_status = upload->Finish();
  EXPECT_TRUE(upload_status.ok()) << upload_status.error_message();
  EXPECT_EQ(replicas[0]->Stop(), 0) << replicas[0]->output();
}

// --max-connection-age-s sends clients a GOAWAY so that their later calls may reach another
// replica; a live stream already open goes on to its end, unless a grace period cuts it.
TEST_F(ReplicasTest, ConnectionAgeMovesLaterCallsAndSparesStreamsWithoutGrace) {
  testing::SaveModel(testing::TinyConfig(), dir_ + "/repo/tiny/1");
  // 4 s of video, streamed at its real rate.
  testing::MakeVideo("-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 40 -c:v libx264",
                     dir_ + "/clip.mp4");
  for (const bool graceful : {true, false}) {
    auto server = testing::ServerProcess::Start(
        testing::ServerBinary(), {"--model-repository", dir_ + "/repo", "--max-connection-age-s",
                                  "1", "--max-connection-age-grace-s", graceful ? "0" : "1"});
    ASSERT_TRUE(server.ok()) << server.status();
    int exit_code = -1;
    const std::string output =
        testing::RunCommand(absl::StrCat(testing::ClientBinary(), " stream ", dir_,
                                         "/clip.mp4 --realtime --emit-every-frames 10 --server ",
                                         (*server)->grpc_address(), " 2>&1"),
                            &exit_code);
    if (graceful) {
      EXPECT_EQ(exit_code, 0) << output;
      EXPECT_THAT(output, HasSubstr("4 predictions"));
    } else {
      EXPECT_NE(exit_code, 0) << "the grace period should have ended the stream:\n" << output;
    }

    // A channel that made a call is told to go away once the connection is a second old.
    auto channel =
        grpc::CreateChannel((*server)->grpc_address(), grpc::InsecureChannelCredentials());
    grpc::ClientContext context;
    v1::ListModelsResponse models;
    ASSERT_TRUE(v1::VideoClassifier::NewStub(channel)
                    ->ListModels(&context, v1::ListModelsRequest(), &models)
                    .ok());
    EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
    while (channel->GetState(false) == GRPC_CHANNEL_READY &&
           channel->WaitForStateChange(GRPC_CHANNEL_READY, deadline)) {
    }
    EXPECT_NE(channel->GetState(false), GRPC_CHANNEL_READY) << "no GOAWAY came";
  }
}

}  // namespace
}  // namespace vidclf
