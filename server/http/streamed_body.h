// A response body written over time (server-sent events) rather than known at once.
// libmicrohttpd pulls it as the client reads; when nothing is ready its connection is suspended,
// costing nothing, until the producer wakes it. While it waits, the server's watcher (Watch)
// notices a client that has gone, and sends `keepalive` every 15 s so that proxies keep an idle
// connection open.
#ifndef VIDCLF_SERVER_HTTP_STREAMED_BODY_H_
#define VIDCLF_SERVER_HTTP_STREAMED_BODY_H_

#include <microhttpd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace vidclf::http {

// Whether the peer of `socket` has closed its side (or the connection failed).
bool PeerClosed(int socket);

class StreamedBody : public std::enable_shared_from_this<StreamedBody> {
 public:
  // The next piece of the body: text, empty when none is ready yet, nullopt once it has ended.
  // Called on the server's thread with the body's lock held: it must not block or call Wake.
  using Pull = std::function<std::optional<std::string>()>;
  StreamedBody(Pull pull, std::string keepalive)
      : pull_(std::move(pull)), keepalive_(std::move(keepalive)) {}

  // From any thread, holding no lock that the pull takes: the pull has something new, or has
  // ended.
  void Wake();
  // Runs once, on the server's thread, when the body is over: ended, its client gone, or the
  // server stopping. Before the body is queued.
  void OnClosed(std::function<void()> on_closed) { on_closed_ = std::move(on_closed); }

  // The server's side: a response (without headers yet) of this body on `connection`; every few
  // tenths of a second, a look at it while it waits (a client gone, a keep-alive due); Close ends
  // it.
  MHD_Response* Respond(MHD_Connection* connection);
  void Watch();
  void Close();

 private:
  static ssize_t Read(void* self, uint64_t position, char* buffer, size_t max);
  static void Free(void* self);
  // Lets libmicrohttpd pull again. `mutex_` held.
  void ResumeLocked();

  const Pull pull_;
  const std::string keepalive_;
  std::function<void()> on_closed_;

  std::mutex mutex_;
  MHD_Connection* connection_ = nullptr;
  int socket_ = -1;
  bool suspended_ = false;
  bool closed_ = false;         // by the server: the body ends now
  bool keepalive_due_ = false;  // an idle body's next piece is the keep-alive
  std::string pending_;         // the piece being sent, from offset_
  size_t offset_ = 0;
  std::chrono::steady_clock::time_point last_sent_ = std::chrono::steady_clock::now();
};

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_STREAMED_BODY_H_
