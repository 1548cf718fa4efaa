// An HTTP(S) server on GNU libmicrohttpd's event loop, for the server's HTTP front doors: a
// connection costs a descriptor, not a thread, so clients that trickle their requests or hold
// idle connections cannot hold up the others; connections are bounded in all and per client
// address, and one idle past the timeout is closed. Bodies are bounded in size, checked against
// their Content-Length before they are read, and in time, against clients that trickle them. A
// handler may answer later, from any thread: its connection waits, suspended, costing nothing
// meanwhile, and a thread of its own notices when such a client leaves. Browsers' cross-origin
// calls are allowed from the origins the options name.
#ifndef VIDCLF_SERVER_HTTP_HTTP_SERVER_H_
#define VIDCLF_SERVER_HTTP_HTTP_SERVER_H_

#include <microhttpd.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/http/cors.h"
#include "server/http/streamed_body.h"
#include "server/security/bearer_tokens.h"

namespace vidclf::http {

struct HttpRequest {
  std::string method;
  std::string path;                            // without the query
  std::map<std::string, std::string> query;    // its arguments, decoded
  std::map<std::string, std::string> headers;  // by lower-case name
  std::string body;
  // The client's address, as gRPC names a peer ("ipv4:127.0.0.1:5678"), for the access log.
  std::string peer;
  // Registers `cancel`, run once from the server's thread if the client closes its connection
  // before the answer, to stop work nobody will read (the handler answers all the same).
  std::function<void(std::function<void()> cancel)> on_client_gone;
};

struct HttpResponse {
  unsigned int code = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;
  // When set, the body is this, written over time (server-sent events), and `body` is unused.
  std::shared_ptr<StreamedBody> stream = nullptr;
};

// Answers a request, once, from any thread.
using Responder = std::function<void(HttpResponse)>;
using Handler = std::function<void(HttpRequest request, Responder respond)>;

struct HttpServerOptions {
  std::string name;                // what it serves, for errors ("metrics")
  std::string host = "127.0.0.1";  // an IPv4 address
  int port = 0;                    // 0: a free one
  // PEM certificate chain and key, and the flags that named them: HTTPS when set.
  std::string tls_cert, tls_key, tls_cert_flag, tls_key_flag;
  // When set (it must outlive the server), requests must send "Authorization: Bearer TOKEN",
  // but those for paths `open_to_all` accepts (health checks).
  const security::BearerTokens* tokens = nullptr;
  std::function<bool(absl::string_view path)> open_to_all;
  // Connections at once, in all and from one address; past them, new ones are closed.
  int max_connections = 64;
  int max_connections_per_address = 16;
  // A connection that sends or takes nothing for this long is closed.
  int idle_timeout_seconds = 10;
  // A larger body is refused with 413, unread when its Content-Length says so.
  int64_t max_body_bytes = 1 << 20;
  // A connection whose request body is still arriving this long after its headers is closed: a
  // client that trickles it would otherwise hold the connection for as long as it likes. 0: no
  // bound.
  int body_timeout_seconds = 0;
  // Origins whose pages may call with fetch (cors.h); none by default.
  std::vector<std::string> allowed_origins;
  // Hears each request refused before a handler saw it (no token, a body too large, an origin
  // not allowed), for the access log; from the server's thread, must not block.
  std::function<void(const HttpRequest& request, const absl::Status& refusal)> on_refused;
};

class HttpServer {
 public:
  // Listens as `options` say; `handler` answers every request that passes the bounds and the
  // token check. Fails when the address cannot be bound or the TLS files cannot be read.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           Handler handler);

  // Stops the event loop and closes every connection: every request handed to the handler must
  // have been answered.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  struct Exchange;
  HttpServer(const HttpServerOptions& options, Handler handler)
      : options_(options), handler_(std::move(handler)), cors_(options.allowed_origins) {}
  // libmicrohttpd's request handler and completion callback; `self` is the server. Answer
  // runs Serve, and answers 500 for what escapes it (server/internal_errors.h).
  static MHD_Result Answer(void* self, MHD_Connection* connection, const char* url,
                           const char* method, const char* version, const char* upload_data,
                           size_t* upload_data_size, void** request_state);
  MHD_Result Serve(MHD_Connection* connection, const char* url, const char* method,
                   const char* upload_data, size_t* upload_data_size, void** request_state);
  static void Completed(void* self, MHD_Connection* connection, void** request_state,
                        MHD_RequestTerminationCode code);
  // The first call for a request, on its headers: a refusal, or its exchange.
  MHD_Result Begin(MHD_Connection* connection, const char* url, const char* method,
                   void** request_state) const;
  // Answers a request refused before any handler, and tells options_.on_refused.
  MHD_Result Refuse(MHD_Connection* connection, const HttpRequest& request,
                    const absl::Status& refusal, const HeaderList& cors) const;
  // Queues `answer` on `connection`, and keeps a streamed body for the watcher.
  MHD_Result QueueAnswer(MHD_Connection* connection, const HttpResponse& answer,
                         const HeaderList& cors);
  // Until the server stops: every few tenths of a second, the clients of suspended requests
  // that have closed their connections get their on_client_gone, and streamed bodies are
  // watched.
  void WatchWaitingClients();

  const HttpServerOptions options_;
  const Handler handler_;
  const CorsPolicy cors_;
  std::string tls_cert_;  // the PEM texts, which libmicrohttpd reads while it runs
  std::string tls_key_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;

  std::mutex waiting_mutex_;
  std::vector<std::shared_ptr<Exchange>> waiting_;  // suspended at some point; pruned by the watch
  std::vector<std::weak_ptr<StreamedBody>> streams_;  // being sent; pruned by the watch
  std::condition_variable stop_watching_;
  bool stopping_ = false;  // under waiting_mutex_
  std::thread watcher_;
};

// "{"error": MESSAGE}" with `code`, as the Open Inference Protocol's REST errors are.
HttpResponse JsonError(unsigned int code, absl::string_view message);

// The HTTP status of a gRPC status code, as Triton's HTTP front end and Google's API design
// guide map them (ALREADY_EXISTS 409).
unsigned int HttpCodeOf(absl::StatusCode code);

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_HTTP_SERVER_H_
