#include "server/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf {
namespace {

// A scrape request is one short line plus headers; anything longer is not one.
constexpr size_t kMaxRequestBytes = 8192;
// A client that sends nothing for this long is dropped, so it cannot hold the only thread.
constexpr int kReadTimeoutMs = 2000;

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const char* status, const char* content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.0 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host ", host, " is not an IPv4 address"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", error));
  }
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, ntohs(address.sin_port), std::move(collectables)));
}

MetricsHttpServer::MetricsHttpServer(
    int listen_fd, int port, std::vector<std::shared_ptr<prometheus::Collectable>> collectables)
    : listen_fd_(listen_fd), port_(port), collectables_(std::move(collectables)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() {
  stopping_ = true;
  thread_.join();
  ::close(listen_fd_);
}

void MetricsHttpServer::Serve() {
  while (!stopping_) {
    pollfd listener{listen_fd_, POLLIN, 0};
    // Wake up now and then to notice a stop request.
    if (::poll(&listener, 1, 100) <= 0) continue;
    const int connection = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    Answer(connection);
    ::close(connection);
  }
}

void MetricsHttpServer::Answer(int connection) const {
  std::string request;
  char buffer[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    pollfd readable{connection, POLLIN, 0};
    if (::poll(&readable, 1, kReadTimeoutMs) <= 0) return;
    const ssize_t n = ::recv(connection, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  const bool is_get = absl::StartsWith(request, "GET ");
  const std::string path = is_get ? request.substr(4, request.find(' ', 4) - 4) : "";
  if (!is_get) {
    SendAll(connection, Response("405 Method Not Allowed", "text/plain", "use GET /metrics\n"));
    return;
  }
  if (path != "/metrics" && !absl::StartsWith(path, "/metrics?")) {
    SendAll(connection, Response("404 Not Found", "text/plain", "metrics are at /metrics\n"));
    return;
  }
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collectable : collectables_) {
    std::vector<prometheus::MetricFamily> collected = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(collected.begin()),
                    std::make_move_iterator(collected.end()));
  }
  SendAll(connection, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                               prometheus::TextSerializer().Serialize(families)));
}

}  // namespace vidclf
