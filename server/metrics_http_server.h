// Serves Prometheus metrics over HTTP(S): GET /metrics answers the text exposition format, on the
// server's HTTP server (http/http_server.h: libmicrohttpd's event loop, bounded connections).
// (prometheus-cpp's own Exposer, on civetweb, could not be used: inside a process that has
// Debian's LibTorch 1.13 loaded, civetweb's mg_start returns null right after binding its port.)
#ifndef VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
#define VIDCLF_SERVER_METRICS_HTTP_SERVER_H_

#include <prometheus/collectable.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/http/http_server.h"
#include "server/security/bearer_tokens.h"

namespace vidclf {

struct MetricsHttpOptions {
  std::string host = "127.0.0.1";  // an IPv4 address
  int port = 9464;                 // 0: a free one
  // PEM certificate chain and key: HTTPS when set (read once, at start).
  std::string tls_cert;
  std::string tls_key;
  // When set (it must outlive the server), a scrape must send "Authorization: Bearer TOKEN".
  const security::BearerTokens* tokens = nullptr;
  // Connections at once, in all and from one address; past them, new ones are closed.
  int max_connections = 64;
  int max_connections_per_address = 16;
  // A connection that sends or takes nothing for this long is closed.
  int idle_timeout_seconds = 10;
};

class MetricsHttpServer {
 public:
  // Listens as `options` say and serves what `collectables` collect at each scrape, in order.
  // Fails when the address cannot be bound or the TLS files cannot be read.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options,
      std::vector<std::shared_ptr<prometheus::Collectable>> collectables);

  int port() const { return http_->port(); }

 private:
  explicit MetricsHttpServer(std::vector<std::shared_ptr<prometheus::Collectable>> collectables)
      : collectables_(std::move(collectables)) {}
  http::HttpResponse Serve(const http::HttpRequest& request) const;
  std::string Scrape() const;

  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
