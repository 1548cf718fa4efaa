#include "server/metrics_http_server.h"

#include <prometheus/text_serializer.h>

#include <iterator>
#include <utility>

namespace vidclf {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(std::move(collectables)));
  http::HttpServerOptions http;
  http.name = "metrics";
  http.host = options.host;
  http.port = options.port;
  http.tls_cert = options.tls_cert;
  http.tls_key = options.tls_key;
  http.tls_cert_flag = "--metrics-tls-cert";
  http.tls_key_flag = "--metrics-tls-key";
  http.tokens = options.tokens;
  http.max_connections = options.max_connections;
  http.max_connections_per_address = options.max_connections_per_address;
  http.idle_timeout_seconds = options.idle_timeout_seconds;
  http.max_body_bytes = 0;  // a scrape sends none
  absl::StatusOr<std::unique_ptr<http::HttpServer>> started = http::HttpServer::Start(
      http, [self = server.get()](http::HttpRequest request, http::Responder respond) {
        respond(self->Serve(request));
      });
  if (!started.ok()) return started.status();
  server->http_ = *std::move(started);
  return server;
}

http::HttpResponse MetricsHttpServer::Serve(const http::HttpRequest& request) const {
  if (request.method != "GET") {
    return {405, "text/plain", "use GET /metrics\n", {}};
  }
  if (request.path != "/metrics") {
    return {404, "text/plain", "metrics are at /metrics\n", {}};
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8", Scrape(), {}};
}

std::string MetricsHttpServer::Scrape() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& collectable : collectables_) {
    std::vector<prometheus::MetricFamily> collected = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(collected.begin()),
                    std::make_move_iterator(collected.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace vidclf
