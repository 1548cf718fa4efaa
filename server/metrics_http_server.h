// Serves Prometheus metrics over HTTP(S): GET /metrics answers the text exposition format.
//
// On GNU libmicrohttpd's event loop (one thread, epoll): a connection costs a descriptor, not a
// thread, so clients that trickle their requests cannot hold up a scrape; connections are
// bounded in all and per client address, and one idle past the timeout is closed.
// (prometheus-cpp's own Exposer, on civetweb, could not be used: inside a process that has
// Debian's LibTorch 1.13 loaded, civetweb's mg_start returns null right after binding its port.)
#ifndef VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
#define VIDCLF_SERVER_METRICS_HTTP_SERVER_H_

#include <microhttpd.h>
#include <prometheus/collectable.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

  // Stops the event loop and closes every connection.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttpServer(const MetricsHttpOptions& options,
                    std::vector<std::shared_ptr<prometheus::Collectable>> collectables)
      : options_(options), collectables_(std::move(collectables)) {}
  // libmicrohttpd's request handler; `self` is the server.
  static MHD_Result Answer(void* self, MHD_Connection* connection, const char* url,
                           const char* method, const char* version, const char* upload_data,
                           size_t* upload_data_size, void** request_state);
  std::string Scrape() const;

  const MetricsHttpOptions options_;
  const std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::string tls_cert_;  // the PEM texts, which libmicrohttpd reads while it runs
  std::string tls_key_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_METRICS_HTTP_SERVER_H_
