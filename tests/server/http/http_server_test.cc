// The HTTP door alone, over a real socket: a handler that throws costs its request a 500 and
// nothing else, and paths or queries that are not text (NUL, bytes that are not UTF-8) are
// refused with a 400 whose JSON is valid, before any handler sees them.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "server/internal_errors.h"

namespace vidclf::http {
namespace {

struct RawAnswer {
  int code = 0;  // 0: the connection closed without a status line
  std::string body;
};

// Sends `request` as it is on a new connection to 127.0.0.1:`port` and reads until it closes.
RawAnswer Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string text;
  char buffer[4096];
  for (ssize_t got; (got = recv(fd, buffer, sizeof(buffer), 0)) > 0;) text.append(buffer, got);
  close(fd);
  RawAnswer answer;
  if (text.size() < 12 || !absl::SimpleAtoi(text.substr(9, 3), &answer.code)) return answer;
  const size_t body = text.find("\r\n\r\n");
  if (body != std::string::npos) answer.body = text.substr(body + 4);
  return answer;
}

std::string Get(const std::string& target) {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.name = "test";
    absl::StatusOr<std::unique_ptr<HttpServer>> server =
        HttpServer::Start(options, [this](HttpRequest request, Responder respond) {
          if (request.path == "/throw") throw std::runtime_error("a handler's bug");
          if (request.path == "/throw-after") {
            respond(HttpResponse{200, "text/plain", "answered", {}});
            throw std::logic_error("a bug after answering");
          }
          seen_path_ = request.path;
          respond(HttpResponse{200, "text/plain", "path=" + request.path, {}});
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<HttpServer> server_;
  std::string seen_path_;
};

TEST_F(HttpServerTest, AHandlerThatThrowsCostsItsRequestA500AndNothingElse) {
  const int64_t before = InternalErrorCounts()["http"];
  const RawAnswer thrown = Exchange(server_->port(), Get("/throw"));
  EXPECT_EQ(thrown.code, 500);
  const nlohmann::json error = nlohmann::json::parse(thrown.body);
  EXPECT_EQ(error["error"], std::string(kInternalErrorMessage));
  EXPECT_FALSE(absl::StrContains(thrown.body, "a handler's bug")) << "no insides in the answer";
  EXPECT_EQ(InternalErrorCounts()["http"], before + 1);
  // An answer already given stands.
  const RawAnswer after = Exchange(server_->port(), Get("/throw-after"));
  EXPECT_EQ(after.code, 200);
  EXPECT_EQ(after.body, "answered");
  EXPECT_EQ(InternalErrorCounts()["http"], before + 2);
  // And the door goes on serving.
  EXPECT_EQ(Exchange(server_->port(), Get("/fine")).code, 200);
}

TEST_F(HttpServerTest, PathsAndQueriesThatAreNotTextAreRefusedWithValidJson) {
  for (const std::string target :
       {"/v2/health/live%FF", "/v2/health/live\xFF", "/v2/models/%FF%FE", "/x?attention=%FF",
        "/x?%FF=1", "/x?a=%01", "/v2/models/demo%00x", "/x%0Ay"}) {
    const RawAnswer answer = Exchange(server_->port(), Get(target));
    EXPECT_EQ(answer.code, 400) << target;
    const nlohmann::json error = nlohmann::json::parse(answer.body);  // throws on bad UTF-8
    EXPECT_TRUE(error["error"].is_string()) << target;
  }
  EXPECT_TRUE(seen_path_.empty()) << "the handler saw " << seen_path_;
  // A NUL is named, not cut off: "demo%00x" is not "demo".
  const RawAnswer nul = Exchange(server_->port(), Get("/v2/models/demo%00x"));
  EXPECT_TRUE(absl::StrContains(nul.body, "NUL")) << nul.body;
  // Escapes that are text pass as before.
  EXPECT_EQ(Exchange(server_->port(), Get("/caf%C3%A9%20x")).body, "path=/caf\xC3\xA9 x");
}

TEST_F(HttpServerTest, HeadersAndMethodsThatAreNotTextEndNoServer) {
  const std::string requests[] = {
      "G\xFFT /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "OPTIONS /x HTTP/1.1\r\nHost: x\r\nOrigin: http://a\xFF"
      "b\r\n"
      "Access-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
      "GET /x HTTP/1.1\r\nHost: x\r\nX-Anything: \xFF\xFE\r\nConnection: close\r\n\r\n",
  };
  for (const std::string& request : requests) {
    const RawAnswer answer = Exchange(server_->port(), request);
    if (!answer.body.empty() && answer.body.front() == '{') {
      EXPECT_NO_THROW(nlohmann::json::parse(answer.body)) << answer.body;
    }
  }
  EXPECT_EQ(Exchange(server_->port(), Get("/fine")).code, 200);
}

}  // namespace
}  // namespace vidclf::http
