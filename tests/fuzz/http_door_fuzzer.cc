// libFuzzer target: the HTTP door (server/http/http_server.h) over arbitrary bytes. Each input is
// what one client sends on one connection to a real door on loopback: libmicrohttpd's parsing,
// the door's checks of paths and queries, CORS, bearer tokens and body limits, then a handler
// that answers as the REST routes do, repeating the client's method, path, query and headers in
// a JSON body. The first byte picks the door: even, without tokens; odd, with --token-file's
// tokens and an allowed origin. A crash, a sanitizer report, an internal error (an exception that
// escaped and was caught, server/internal_errors.h) or an answer whose JSON is not valid UTF-8 is
// a finding; libmicrohttpd's own refusals (505 for HTTP/0.1, say) are answers like any other. The
// client reads the first answer, or until the door is silent for 100 ms (a request still missing
// bytes waits for them, as it should, until the door's idle timeout). Seeds:
// scripts/media-sanitizer-check.sh (every request of issue 80's report among them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "common/json_text.h"
#include "media/quoted_text.h"
#include "server/http/http_server.h"
#include "server/internal_errors.h"
#include "server/security/bearer_tokens.h"

namespace {

using vidclf::http::HttpRequest;
using vidclf::http::HttpResponse;
using vidclf::http::HttpServer;
using vidclf::http::HttpServerOptions;
using vidclf::http::Responder;

// Answers as a route that does not know the path: the client's text quoted in the message, and
// everything it sent echoed as JSON.
void Handle(HttpRequest request, Responder respond) {
  nlohmann::json echo = {{"error", "no endpoint " + vidclf::media::QuoteInput(request.method) +
                                       " " + vidclf::media::QuoteInput(request.path, 128)},
                         {"method", request.method},
                         {"path", request.path},
                         {"query", request.query},
                         {"headers", request.headers},
                         {"body_bytes", request.body.size()}};
  respond(HttpResponse{404, "application/json", vidclf::JsonText(echo), {}});
}

// Whether `answer` holds a whole answer: its head and as many bytes of body as it declares.
bool AnswerComplete(const std::string& answer) {
  const size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::string head = absl::AsciiStrToLower(answer.substr(0, head_end));
  const size_t length = head.find("\r\ncontent-length:");
  if (length == std::string::npos) return false;
  size_t bytes = 0;
  const size_t value = length + std::string("\r\ncontent-length:").size();
  if (!absl::SimpleAtoi(head.substr(value, head.find("\r\n", value) - value), &bytes)) {
    return false;
  }
  return answer.size() >= head_end + 4 + bytes;
}

struct Doors {
  std::unique_ptr<vidclf::security::BearerTokens> tokens;
  std::unique_ptr<HttpServer> open;
  std::unique_ptr<HttpServer> guarded;
};

Doors& TheDoors() {
  static Doors* doors = [] {
    auto* made = new Doors();
    char token_file[] = "/tmp/http-door-fuzzer-tokens-XXXXXX";
    const int fd = mkstemp(token_file);
    const std::string line = "fuzzer-token-0123456789abcdef\n";
    if (fd < 0 || write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) abort();
    close(fd);
    auto tokens = vidclf::security::BearerTokens::Load(token_file);
    unlink(token_file);
    if (!tokens.ok()) abort();
    made->tokens = *std::move(tokens);
    HttpServerOptions options;
    options.name = "fuzzed HTTP";
    options.idle_timeout_seconds = 2;
    options.max_body_bytes = 4096;
    auto open = HttpServer::Start(options, Handle);
    options.tokens = made->tokens.get();
    options.open_to_all = [](absl::string_view path) { return path.rfind("/v2/health/", 0) == 0; };
    options.allowed_origins = {"http://ok.example"};
    auto guarded = HttpServer::Start(options, Handle);
    if (!open.ok() || !guarded.ok()) abort();
    made->open = *std::move(open);
    made->guarded = *std::move(guarded);
    return made;
  }();
  return *doors;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Doors& doors = TheDoors();
  const int port = (data[0] % 2 == 0 ? doors.open : doors.guarded)->port();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) abort();
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) abort();
  // The door may close early (a refusal, a malformed line): what it did not read is not sent.
  size_t sent = 1;
  while (sent < size) {
    const ssize_t wrote = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (wrote <= 0) break;
    sent += static_cast<size_t>(wrote);
  }
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[4096];
  pollfd readable{fd, POLLIN, 0};
  while (!AnswerComplete(answer) && poll(&readable, 1, 100) == 1) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    answer.append(buffer, got);
  }
  close(fd);
  if (absl::StrContains(answer, vidclf::kInternalErrorMessage)) {
    std::fprintf(stderr, "an exception escaped the door's handling:\n%s\n", answer.c_str());
    abort();
  }
  const size_t body = answer.find("\r\n\r\n");
  if (body != std::string::npos && answer.find("application/json") < body &&
      !vidclf::media::IsValidUtf8(answer.substr(body + 4))) {
    std::fprintf(stderr, "an answer's JSON is not UTF-8:\n%s\n", answer.c_str());
    abort();
  }
  return 0;
}
