// The real vidclf-server with TLS, mutual TLS and bearer tokens, called by the real vidclf client
// and by gRPC stubs; and its JSON log. Certificates are made at test time with the openssl CLI.
#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/test_util/built_paths.h"
#include "tests/test_util/python_server.h"
#include "tests/test_util/server_process.h"
#include "tests/test_util/test_files.h"
#include "tests/test_util/test_models.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "first-token-0123456789abcdef";
constexpr char kOtherToken[] = "second-token-0123456789abcdef";
constexpr char kExpiredToken[] = "expired-token-0123456789abcdef";

// Runs a shell command and fails the current test if it fails.
void Shell(const std::string& command) {
  int exit_code = 0;
  const std::string output = testing::RunCommand(command + " 2>&1", &exit_code);
  ASSERT_EQ(exit_code, 0) << command << "\n" << output;
}

// A CA in `dir`/`name`-ca.{pem,key}, and a certificate it signs for `subject` in
// `dir`/`subject`.{pem,key}, valid for localhost.
void MakeCertificate(const std::string& dir, const std::string& ca, const std::string& subject) {
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  if (!std::filesystem::exists(dir + "/" + ca + ".pem")) {
    Shell(absl::StrCat("openssl req -x509 ", ec, " -days 2 -subj /CN=", ca, " -keyout ", dir, "/",
                       ca, ".key -out ", dir, "/", ca, ".pem"));
  }
  testing::WriteFile(dir + "/" + subject + ".ext",
                     "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                     "extendedKeyUsage=serverAuth,clientAuth\n");
  Shell(absl::StrCat("openssl req ", ec, " -subj /CN=", subject, " -keyout ", dir, "/", subject,
                     ".key -out ", dir, "/", subject, ".csr"));
  Shell(absl::StrCat("openssl x509 -req -days 2 -in ", dir, "/", subject, ".csr -CA ", dir, "/", ca,
                     ".pem -CAkey ", dir, "/", ca, ".key -CAcreateserial -extfile ", dir, "/",
                     subject, ".ext -out ", dir, "/", subject, ".pem"));
}

class SecurityServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeScratchDir("security"));
    testing::SaveModel(testing::TinyConfig(), *dir_ + "/repo/tiny/1");
    testing::MakeVideo("-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 20 -c:v libx264",
                       *dir_ + "/clip.mp4");
    MakeCertificate(*dir_, "ca", "server");
    MakeCertificate(*dir_, "ca", "client");
    MakeCertificate(*dir_, "stranger-ca",
                    "stranger");  // a client whose CA the server does not know
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static std::unique_ptr<testing::ServerProcess> StartServer(std::vector<std::string> arguments) {
    arguments.insert(arguments.begin(), {"--model-repository", Path("repo")});
    auto server = testing::ServerProcess::Start(testing::ServerBinary(), arguments);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // Runs the vidclf client against `server`; returns what it printed, both streams.
  static std::string Client(const testing::ServerProcess& server, const std::string& arguments,
                            int* exit_code) {
    return testing::RunCommand(absl::StrCat(testing::ClientBinary(), " ", arguments, " --server ",
                                            server.grpc_address(), " 2>&1"),
                               exit_code);
  }

  static std::string TlsServerArguments() {
    return absl::StrCat("--tls-ca ", Path("ca.pem"), " --tls-server-name localhost");
  }

  static std::unique_ptr<v1::VideoClassifier::Stub> Stub(const testing::ServerProcess& server) {
    return v1::VideoClassifier::NewStub(
        grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  }

  static void Prepare(grpc::ClientContext* context, const std::string& token) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  }

  // ListModels with `token` ("": none) through a plain stub.
  static grpc::StatusCode ListModels(const testing::ServerProcess& server,
                                     const std::string& token) {
    grpc::ClientContext context;
    Prepare(&context, token);
    v1::ListModelsResponse response;
    return Stub(server)->ListModels(&context, v1::ListModelsRequest(), &response).error_code();
  }

  static std::string* dir_;
};

std::string* SecurityServerTest::dir_ = nullptr;

TEST_F(SecurityServerTest, TlsServesClientsThatTrustItsCertificate) {
  // With tokens too: over TLS, gRPC's own credentials run the gate that checks them.
  testing::WriteFile(Path("tls-tokens"), absl::StrCat(kToken, "\n"));
  testing::WriteFile(Path("tls-client-token"), kToken);
  auto server = StartServer({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
                             "--token-file", Path("tls-tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("(TLS, bearer tokens required)"));

  int exit_code = -1;
  const std::string token = " --token-file " + Path("tls-client-token");
  std::string output = Client(*server, "models " + TlsServerArguments() + token, &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("tiny"));
  output = Client(*server, "models " + TlsServerArguments(), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("UNAUTHENTICATED"));
  output = Client(*server, "classify " + Path("clip.mp4") + " " + TlsServerArguments() + token,
                  &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  output = Client(*server, "health " + TlsServerArguments(), &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("SERVING"));

  // Plaintext, and TLS that trusts another CA, do not get through; plaintext is told why.
  output = Client(*server, "models --timeout-seconds 5", &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(output, HasSubstr("the server may expect TLS: add --tls"));
  output = Client(
      *server,
      "models --timeout-seconds 5 --tls-server-name localhost --tls-ca " + Path("stranger-ca.pem"),
      &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("UNAVAILABLE"));
  // A file the client cannot read is named before anything is sent.
  output = Client(*server, "models --tls-ca " + Path("missing.pem"), &exit_code);
  EXPECT_EQ(exit_code, 2) << output;
  EXPECT_THAT(output, HasSubstr("--tls-ca: cannot read"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, MutualTlsServesOnlyClientsItsCaSigned) {
  auto server = StartServer({"--tls-cert", Path("server.pem"), "--tls-key", Path("server.key"),
                             "--tls-client-ca", Path("ca.pem")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("(mutual TLS)"));

  int exit_code = -1;
  const std::string signed_client =
      absl::StrCat(" --tls-cert ", Path("client.pem"), " --tls-key ", Path("client.key"));
  std::string output =
      Client(*server, "models " + TlsServerArguments() + signed_client, &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  EXPECT_THAT(output, HasSubstr("tiny"));

  output = Client(*server, "models --timeout-seconds 5 " + TlsServerArguments(), &exit_code);
  EXPECT_EQ(exit_code, 1) << "no client certificate:\n" << output;
  output = Client(*server,
                  absl::StrCat("models --timeout-seconds 5 ", TlsServerArguments(), " --tls-cert ",
                               Path("stranger.pem"), " --tls-key ", Path("stranger.key")),
                  &exit_code);
  EXPECT_EQ(exit_code, 1) << "a certificate of another CA:\n" << output;
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, BearerTokensGuardEveryMethodButHealth) {
  testing::WriteFile(Path("tokens"), absl::StrCat("# clients of the test\n\n  ", kToken, "  \n",
                                                  kExpiredToken, " expires=2020-01-01T00:00:00Z\n",
                                                  kOtherToken, "\texpires=2099-01-01T00:00:00Z\n"));
  auto server = StartServer({"--token-file", Path("tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("bearer tokens required"));

  // Our client, with the token, without it and with a wrong one.
  testing::WriteFile(Path("client-token"), kToken);
  int exit_code = -1;
  std::string output =
      Client(*server, "classify " + Path("clip.mp4") + " --token-file " + Path("client-token"),
             &exit_code);
  EXPECT_EQ(exit_code, 0) << output;
  output = Client(*server, "models", &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("UNAUTHENTICATED"));
  EXPECT_THAT(output, HasSubstr("needs a bearer token"));
  testing::WriteFile(Path("wrong-token"), "a-token-nobody-has-0123456789");
  output = Client(*server, "models --token-file " + Path("wrong-token"), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("not accepted"));
  // A token past its expiry is refused, one before it accepted.
  testing::WriteFile(Path("expired-token"), kExpiredToken);
  output = Client(*server, "models --token-file " + Path("expired-token"), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output,
              HasSubstr("UNAUTHENTICATED: the bearer token expired at 2020-01-01T00:00:00"));
  EXPECT_EQ(ListModels(*server, kOtherToken), grpc::StatusCode::OK) << "expires in 2099";
  // Health stays open, so that probes work.
  output = Client(*server, "health", &exit_code);
  EXPECT_EQ(exit_code, 0) << output;

  // Every method of the service, through stubs.
  auto stub = Stub(*server);
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(ListModels(*server, ""), grpc::StatusCode::UNAUTHENTICATED);
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    context.AddMetadata("authorization", std::string("Basic ") + kToken);
    v1::ListModelsResponse response;
    EXPECT_EQ(stub->ListModels(&context, v1::ListModelsRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "a-token-nobody-has-0123456789");
    v1::ModelInfo response;
    EXPECT_EQ(stub->GetModel(&context, v1::GetModelRequest(), &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::ClassifyRequest request;
    request.set_video(testing::ReadFile(Path("clip.mp4")));
    v1::ClassifyResponse response;
    EXPECT_EQ(stub->Classify(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::ClassifyResponse response;
    auto writer = stub->ClassifyUpload(&context, &response);
    v1::ClassifyUploadRequest chunk;
    chunk.set_chunk(testing::ReadFile(Path("clip.mp4")));
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    auto stream = stub->StreamClassify(&context);
    stream->WritesDone();
    v1::StreamPrediction prediction;
    EXPECT_FALSE(stream->Read(&prediction));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::WatchSourceRequest request;
    request.set_uri("file:///dev/null");
    auto reader = stub->WatchSource(&context, request);
    v1::WatchSourceResponse response;
    EXPECT_FALSE(reader->Read(&response));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::health::v1::HealthCheckResponse response;
    EXPECT_TRUE(grpc::health::v1::Health::NewStub(
                    grpc::CreateChannel(server->grpc_address(), grpc::InsecureChannelCredentials()))
                    ->Check(&context, grpc::health::v1::HealthCheckRequest(), &response)
                    .ok());
  }
  // Refused calls are counted by code; the server went on serving.
  absl::StatusOr<std::string> metrics = testing::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  // Refused on their headers, before they named a model.
  EXPECT_THAT(*metrics, HasSubstr("vidclf_requests_total{code=\"UNAUTHENTICATED\","
                                  "method=\"ClassifyUpload\",model=\"unknown\"} 1"));
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, CallsWithoutATokenAreRefusedBeforeTheirBodiesArrive) {
  testing::WriteFile(Path("tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--token-file", Path("tokens")});
  ASSERT_NE(server, nullptr);
  // One 60 MB request, shared by every call (a slice is reference-counted, not copied).
  v1::ClassifyRequest request;
  request.set_video(std::string(60 << 20, 'v'));
  const std::string serialized = request.SerializeAsString();
  grpc::Slice slice(serialized);
  const grpc::ByteBuffer body(&slice, 1);
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(100 << 20);
  grpc::GenericStub stub(grpc::CreateCustomChannel(server->grpc_address(),
                                                   grpc::InsecureChannelCredentials(), arguments));
  constexpr int kCalls = 32;
  const int64_t resident_before = testing::ResidentBytes(server->pid());
  ASSERT_GT(resident_before, 0);

  absl::Mutex mutex;
  int finished = 0;
  std::vector<grpc::StatusCode> codes;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<grpc::ByteBuffer> responses(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub.UnaryCall(contexts.back().get(), "/vidclf.v1.VideoClassifier/Classify",
                   grpc::StubOptions(), &body, &responses[i], [&](grpc::Status status) {
                     absl::MutexLock lock(&mutex);
                     codes.push_back(status.error_code());
                     ++finished;
                   });
  }
  const int64_t resident_peak = testing::PeakResidentBytesUntil(server->pid(), [&] {
    absl::MutexLock lock(&mutex);
    return finished == kCalls;
  });
  EXPECT_EQ(std::count(codes.begin(), codes.end(), grpc::StatusCode::UNAUTHENTICATED), kCalls);
  EXPECT_LT(resident_peak - resident_before, int64_t{64} << 20)
      << "resident before " << resident_before << ", at most " << resident_peak;
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, SecretsInUrisAndTokensStayOutOfMessagesAndTheLog) {
  constexpr char kSecret[] = "hunter2-secret";
  const std::string www = Path("www");
  std::filesystem::create_directories(www);
  auto http = testing::PythonServer::Start(
      [&](int port) -> std::vector<std::string> {
        return {"-m", "http.server", "--bind", "127.0.0.1", std::to_string(port), "--directory",
                www};
      },
      Path("http.log"));
  ASSERT_NE(http, nullptr);
  const std::string host = absl::StrCat("127.0.0.1:", http->port());
  // A playlist whose segment lies on a port the allowlist refuses, with secrets of its own.
  testing::WriteFile(www + "/playlist.m3u8",
                     absl::StrCat("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:1.0,\nhttp://user:",
                                  kSecret, "@127.0.0.1:", testing::UnusedLoopbackPort(),
                                  "/segment.ts?sig=", kSecret, "\n#EXT-X-ENDLIST\n"));
  testing::WriteFile(Path("tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--token-file", Path("tokens"), "--allow-uri",
                             absl::StrCat("http://", host, "/"), "--log-level", "debug",
                             "--media-log-level", "debug"});
  ASSERT_NE(server, nullptr);

  std::vector<std::string> messages;
  auto stub = Stub(*server);
  for (const std::string& uri :
       {absl::StrCat("http://user:", kSecret, "@", host, "/playlist.m3u8?token=", kSecret),
        absl::StrCat("http://admin:", kSecret, "@", host, "/missing.mp4"),
        absl::StrCat("http://user:", kSecret, "@10.255.255.1/clip.mp4?key=", kSecret),
        absl::StrCat("file:///videos/clip.mp4?", kSecret)}) {
    grpc::ClientContext context;
    Prepare(&context, kToken);
    v1::ClassifyRequest request;
    request.set_uri(uri);
    v1::ClassifyResponse response;
    const grpc::Status status = stub->Classify(&context, request, &response);
    EXPECT_FALSE(status.ok()) << uri;
    messages.push_back(status.error_message());

    grpc::ClientContext watch_context;
    Prepare(&watch_context, kToken);
    v1::WatchSourceRequest watch;
    watch.set_uri(uri);
    watch.set_max_reconnects(1);
    auto reader = stub->WatchSource(&watch_context, watch);
    v1::WatchSourceResponse event;
    while (reader->Read(&event)) messages.push_back(event.source().message());
    messages.push_back(reader->Finish().error_message());
  }
  {
    grpc::ClientContext context;
    Prepare(&context, absl::StrCat("wrong-token-", kSecret));
    v1::ListModelsResponse response;
    const grpc::Status status = stub->ListModels(&context, v1::ListModelsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    messages.push_back(status.error_message());
  }
  ASSERT_EQ(server->Stop(), 0) << server->output();
  for (const std::string& message : messages) EXPECT_THAT(message, Not(HasSubstr(kSecret)));
  EXPECT_THAT(server->output(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(server->output(), HasSubstr("<redacted>"));  // the URIs were logged, redacted
}

// A DASH manifest whose segment is on a recording http.server that no allowlist names: uploaded
// through each method it opens nothing (the server's allowlist is for another port), and pulled
// from an allowed URI it reaches nothing either. Were it followed, the segment would decode.
TEST_F(SecurityServerTest, ManifestsOpenNothingWhicheverMethodCarriesThem) {
  const std::string target = Path("dash-target");
  const std::string allowed = Path("dash-allowed");
  std::filesystem::create_directories(target);
  std::filesystem::create_directories(allowed);
  testing::MakeVideo(
      "-f lavfi -i testsrc2=size=160x120:rate=10 -frames:v 20 -c:v libx264 -f mpegts",
      target + "/segment.ts");
  const auto serve = [&](const std::string& directory) {
    return testing::PythonServer::Start(
        [&](int port) -> std::vector<std::string> {
          return {"-m",          "http.server", "--bind", "127.0.0.1", std::to_string(port),
                  "--directory", directory};
        },
        directory + ".log");
  };
  auto recorder = serve(target);
  auto source = serve(allowed);
  ASSERT_NE(recorder, nullptr);
  ASSERT_NE(source, nullptr);
  const std::string manifest = absl::StrCat(
      "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" "
      "mediaPresentationDuration=\"PT2S\" minBufferTime=\"PT1S\" "
      "profiles=\"urn:mpeg:dash:profile:isoff-on-demand:2011\">\n<BaseURL>",
      recorder->http(),
      "/</BaseURL>\n<Period><AdaptationSet mimeType=\"video/mp2t\"><Representation id=\"1\" "
      "bandwidth=\"100000\"><BaseURL>segment.ts</BaseURL></Representation></AdaptationSet>"
      "</Period></MPD>\n");
  testing::WriteFile(allowed + "/manifest.mpd", manifest);
  auto server = StartServer({"--allow-uri", source->http() + "/"});
  ASSERT_NE(server, nullptr);
  auto stub = Stub(*server);
  const auto expect_refused = [](const grpc::Status& status, const std::string& method) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("(FFmpeg format 'dash')")) << method;
  };
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::ClassifyRequest request;
    request.set_video(manifest);
    v1::ClassifyResponse response;
    expect_refused(stub->Classify(&context, request, &response), "Classify");
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::ClassifyResponse response;
    auto writer = stub->ClassifyUpload(&context, &response);
    v1::ClassifyUploadRequest upload;
    upload.mutable_settings()->set_top_k(1);
    upload.set_chunk(manifest);
    writer->Write(upload);
    writer->WritesDone();
    expect_refused(writer->Finish(), "ClassifyUpload");
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    auto stream = stub->StreamClassify(&context);
    v1::StreamClassifyRequest config;
    config.mutable_config()->set_input(v1::StreamConfig::CONTAINER);
    stream->Write(config);
    v1::StreamClassifyRequest chunk;
    chunk.set_chunk(manifest);
    stream->Write(chunk);
    stream->WritesDone();
    for (v1::StreamPrediction prediction; stream->Read(&prediction);) {
    }
    expect_refused(stream->Finish(), "StreamClassify");
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::ClassifyRequest request;
    request.set_uri(source->http() + "/manifest.mpd");
    v1::ClassifyResponse response;
    expect_refused(stub->Classify(&context, request, &response), "Classify from a URI");
  }
  {
    grpc::ClientContext context;
    Prepare(&context, "");
    v1::WatchSourceRequest request;
    request.set_uri(source->http() + "/manifest.mpd");
    auto reader = stub->WatchSource(&context, request);
    for (v1::WatchSourceResponse response; reader->Read(&response);) {
    }
    expect_refused(reader->Finish(), "WatchSource");
  }
  EXPECT_THAT(recorder->log(), Not(HasSubstr("GET")));
  EXPECT_THAT(source->log(), HasSubstr("GET /manifest.mpd"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// /metrics over HTTPS with a bearer token, as Prometheus scrapes it with tls_config and
// authorization.credentials_file; here through curl.
TEST_F(SecurityServerTest, MetricsServeHttpsWithATokenWhenAsked) {
  testing::WriteFile(Path("scrape-tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--metrics-tls-cert", Path("server.pem"), "--metrics-tls-key",
                             Path("server.key"), "--metrics-token-file", Path("scrape-tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("metrics on https://127.0.0.1:"));
  EXPECT_THAT(server->output(), HasSubstr("(bearer tokens required)"));
  const std::string url = absl::StrCat("https://localhost:", server->metrics_port(), "/metrics");
  const auto curl = [&](const std::string& options) {
    int exit_code = 0;
    return testing::RunCommand(
        absl::StrCat("curl -sS --max-time 20 -w '\\nstatus %{http_code}' --cacert ", Path("ca.pem"),
                     " ", options, " ", url, " 2>&1"),
        &exit_code);
  };
  std::string page = curl(absl::StrCat("-H 'Authorization: Bearer ", kToken, "'"));
  EXPECT_THAT(page, HasSubstr("vidclf_frames_decoded_total"));
  EXPECT_THAT(page, HasSubstr("status 200"));
  page = curl("");
  EXPECT_THAT(page, HasSubstr("status 401"));
  EXPECT_THAT(page, HasSubstr("needs a bearer token"));
  EXPECT_THAT(curl("-H 'Authorization: Bearer a-token-nobody-has-0123456789'"),
              HasSubstr("status 401"));
  // Plaintext gets no page.
  EXPECT_FALSE(testing::HttpGet(server->metrics_port(), "/metrics").ok());
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

// On an address other machines reach, tokens over plaintext and an open /metrics are warned of.
TEST_F(SecurityServerTest, WarnsOfTokensInPlaintextAndOpenMetrics) {
  testing::WriteFile(Path("tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--host", "0.0.0.0", "--token-file", Path("tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), HasSubstr("bearer tokens travel in plaintext to 0.0.0.0"));
  EXPECT_THAT(server->output(), HasSubstr("/metrics is open to anyone who reaches 0.0.0.0"));
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::OK);
  // A client that speaks TLS to this plaintext port is told so.
  int exit_code = -1;
  const std::string output =
      Client(*server, "models --timeout-seconds 5 " + TlsServerArguments(), &exit_code);
  EXPECT_EQ(exit_code, 1) << output;
  EXPECT_THAT(output, HasSubstr("the server may not serve TLS"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
  // On loopback, the default, there is nothing to warn of.
  server = StartServer({"--token-file", Path("tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(server->output(), Not(HasSubstr("warn")));
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, ReadsTheTokenFileAgainOnSighup) {
  testing::WriteFile(Path("rotated-tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--token-file", Path("rotated-tokens")});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::OK);
  EXPECT_EQ(ListModels(*server, kOtherToken), grpc::StatusCode::UNAUTHENTICATED);

  testing::WriteFile(Path("rotated-tokens"), absl::StrCat(kOtherToken, "\n"));
  server->Signal(SIGHUP);
  ASSERT_TRUE(server->WaitForOutput("1 tokens accepted", 60)) << server->output();
  EXPECT_EQ(ListModels(*server, kOtherToken), grpc::StatusCode::OK);
  EXPECT_EQ(ListModels(*server, kToken), grpc::StatusCode::UNAUTHENTICATED);

  // A file that became unusable leaves the tokens read before in force.
  testing::WriteFile(Path("rotated-tokens"), "# nobody\n");
  server->Signal(SIGHUP);
  ASSERT_TRUE(server->WaitForOutput("token file not reloaded", 60)) << server->output();
  EXPECT_THAT(server->output(), HasSubstr("holds no token"));
  EXPECT_EQ(ListModels(*server, kOtherToken), grpc::StatusCode::OK);
  EXPECT_EQ(server->Stop(), 0) << server->output();
}

TEST_F(SecurityServerTest, RefusesToStartWithFilesItCannotUse) {
  testing::WriteFile(Path("short-token"), "abc\n");
  testing::WriteFile(Path("bad-expiry"), absl::StrCat(kToken, " expires=tomorrow\n"));
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tls-cert", Path("missing.pem"), "--tls-key", Path("server.key")},
       "--tls-cert: cannot read"},
      {{"--tls-cert", Path("server.pem")}, "--tls-cert and --tls-key go together"},
      {{"--tls-cert", Path("server.key"), "--tls-key", Path("server.key")},
       "holds no PEM CERTIFICATE"},
      {{"--tls-client-ca", Path("ca.pem")}, "--tls-client-ca needs --tls-cert"},
      {{"--token-file", Path("short-token")}, "at least 16 characters"},
      {{"--token-file", Path("bad-expiry")}, "only expires=TIME"},
      {{"--token-file", Path("missing-tokens")}, "cannot read the token file"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> arguments = {"--model-repository", Path("repo")};
    arguments.insert(arguments.end(), flags.begin(), flags.end());
    auto server = testing::ServerProcess::Start(testing::ServerBinary(), arguments);
    ASSERT_FALSE(server.ok()) << flags[0];
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(message)) << flags[0];
  }
}

// FFmpeg's lines too: with --media-log-level debug, decoding logs some.
TEST_F(SecurityServerTest, AccessLogSaysFailedCallsByDefaultAndEveryCallWhenAsked) {
  testing::WriteFile(Path("not-a-video.mp4"), "not a video at all");
  // What the server logged at info of a good call and a bad one, with `flags`.
  auto logged = [&](std::vector<std::string> flags) {
    auto server = StartServer(flags);
    EXPECT_NE(server, nullptr);
    if (server == nullptr) return std::vector<std::string>{};
    int exit_code = -1;
    std::string output = Client(*server, "classify " + Path("clip.mp4"), &exit_code);
    EXPECT_EQ(exit_code, 0) << output;
    output = Client(*server, "classify " + Path("not-a-video.mp4"), &exit_code);
    EXPECT_EQ(exit_code, 1) << output;
    EXPECT_EQ(server->Stop(), 0) << server->output();
    std::vector<std::string> lines;
    for (absl::string_view line : absl::StrSplit(server->output(), '\n', absl::SkipEmpty())) {
      if (absl::StrContains(line, " info Classify model=")) lines.emplace_back(line);
    }
    return lines;
  };
  std::vector<std::string> lines = logged({});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("Classify model=tiny code=INVALID_ARGUMENT seconds="));
  EXPECT_THAT(lines[0], HasSubstr(" peer=ipv4:127.0.0.1:"));
  EXPECT_THAT(lines[0], HasSubstr(": input is not a video container"));
  lines = logged({"--access-log", "all"});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[0], HasSubstr("Classify model=tiny code=OK seconds="));
  EXPECT_THAT(lines[1], HasSubstr("code=INVALID_ARGUMENT"));
  EXPECT_TRUE(logged({"--access-log", "off"}).empty());
}

// A request the HTTP door refuses before any handler (no token, a body over the limit) gets its
// line too, with its client's address.
TEST_F(SecurityServerTest, AccessLogSaysHttpRefusals) {
  testing::WriteFile(Path("tokens"), absl::StrCat(kToken, "\n"));
  auto server = StartServer({"--http-port", "0", "--token-file", Path("tokens")});
  ASSERT_NE(server, nullptr);
  const std::string listening = "HTTP listening on 127.0.0.1:";
  const size_t at = server->output().find(listening);
  ASSERT_NE(at, std::string::npos) << server->output();
  const std::string port = server->output().substr(at + listening.size(), 5);
  const std::string digits = port.substr(0, port.find_first_not_of("0123456789"));
  int exit_code = 0;
  const std::string answer = testing::RunCommand(
      absl::StrCat("curl -sS --max-time 20 -w '\\nstatus %{http_code}' -X POST --data-binary @",
                   Path("clip.mp4"), " http://127.0.0.1:", digits, "/v2/models/tiny/classify 2>&1"),
      &exit_code);
  EXPECT_THAT(answer, HasSubstr("status 401"));
  EXPECT_EQ(server->Stop(), 0) << server->output();
  EXPECT_THAT(server->output(), HasSubstr("info HttpRefused model=unknown code=UNAUTHENTICATED"));
  EXPECT_THAT(server->output(), HasSubstr("peer=ipv4:127.0.0.1:"));
}

TEST_F(SecurityServerTest, JsonLogHoldsOneObjectPerLine) {
  auto server =
      StartServer({"--log-format", "json", "--log-level", "debug", "--media-log-level", "debug"});
  ASSERT_NE(server, nullptr);
  int exit_code = -1;
  const std::string output = Client(*server, "classify " + Path("clip.mp4"), &exit_code);
  ASSERT_EQ(exit_code, 0) << output;
  ASSERT_EQ(server->Stop(), 0) << server->output();

  int lines = 0;
  bool call_logged = false;
  int ffmpeg_lines = 0;
  for (absl::string_view line : absl::StrSplit(server->output(), '\n', absl::SkipEmpty())) {
    ++lines;
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(event.is_object()) << line;
    EXPECT_TRUE(event.contains("time") && event.contains("level") && event.contains("message"))
        << line;
    const std::string message = event.value("message", "");
    if (message.rfind("Classify model=tiny code=OK", 0) == 0) {
      call_logged = event.value("level", "") == "debug";
    }
    if (message.rfind("ffmpeg: ", 0) == 0) ++ffmpeg_lines;
  }
  EXPECT_GT(lines, 4);
  EXPECT_TRUE(call_logged) << server->output();
  EXPECT_GT(ffmpeg_lines, 0) << server->output();
}

}  // namespace
}  // namespace vidclf
