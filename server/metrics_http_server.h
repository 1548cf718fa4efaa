// Serves Prometheus metrics over HTTP: GET /metrics answers the text exposition format.
//
// prometheus-cpp's own Exposer (civetweb) cannot be used: inside a process that has Debian's
// LibTorch 1.13 loaded, civetweb's mg_start returns null right after binding its port, so the
// server could not start. The scrape endpoint needs little: one thread, HTTP/1.0, one path.
#ifndef VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
#define VIDCLF_SERVER_METRICS_HTTP_SERVER_H_

#include <prometheus/collectable.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace vidclf {

class MetricsHttpServer {
 public:
  // Listens on host:port (IPv4; port 0 picks a free one) and serves what `collectables` collect at
  // each scrape, in order. Fails when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);

  // Stops accepting and joins the serving thread.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer(int listen_fd, int port,
                    std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  void Serve();
  void Answer(int connection) const;

  const int listen_fd_;
  const int port_;
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
