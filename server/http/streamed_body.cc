#include "server/http/streamed_body.h"

#include <poll.h>

#include <algorithm>
#include <cstring>

namespace vidclf::http {
namespace {

constexpr auto kKeepaliveEvery = std::chrono::seconds(15);

}  // namespace

bool PeerClosed(int socket) {
  pollfd watched{socket, POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

MHD_Response* StreamedBody::Respond(MHD_Connection* connection) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connection_ = connection;
    const MHD_ConnectionInfo* socket =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (socket != nullptr) socket_ = socket->connect_fd;
  }
  auto* holder = new std::shared_ptr<StreamedBody>(shared_from_this());
  MHD_Response* response =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, &Read, holder, &Free);
  if (response == nullptr) delete holder;
  return response;
}

void StreamedBody::Wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  ResumeLocked();
}

void StreamedBody::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  ResumeLocked();
}

void StreamedBody::Watch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!suspended_) return;
  const bool idle = std::chrono::steady_clock::now() - last_sent_ >= kKeepaliveEvery;
  keepalive_due_ = keepalive_due_ || idle;
  // Resumed, libmicrohttpd writes the keep-alive, or finds the connection closed and ends it.
  if (idle || (socket_ >= 0 && PeerClosed(socket_))) ResumeLocked();
}

void StreamedBody::ResumeLocked() {
  if (!suspended_) return;
  suspended_ = false;
  MHD_resume_connection(connection_);
}

ssize_t StreamedBody::Read(void* self, uint64_t /*position*/, char* buffer, size_t max) {
  StreamedBody& body = **static_cast<std::shared_ptr<StreamedBody>*>(self);
  std::lock_guard<std::mutex> lock(body.mutex_);
  if (body.offset_ == body.pending_.size()) {
    body.pending_.clear();
    body.offset_ = 0;
    if (body.closed_) return MHD_CONTENT_READER_END_OF_STREAM;
    std::optional<std::string> next = body.pull_();
    if (!next.has_value()) return MHD_CONTENT_READER_END_OF_STREAM;
    body.pending_ = std::move(*next);
    if (body.pending_.empty() && body.keepalive_due_) body.pending_ = body.keepalive_;
    body.keepalive_due_ = false;
    if (body.pending_.empty()) {
      // Nothing yet: the connection waits, off the event loop, until Wake or Watch.
      body.suspended_ = true;
      MHD_suspend_connection(body.connection_);
      return 0;
    }
    body.last_sent_ = std::chrono::steady_clock::now();
  }
  const size_t size = std::min(max, body.pending_.size() - body.offset_);
  std::memcpy(buffer, body.pending_.data() + body.offset_, size);
  body.offset_ += size;
  return static_cast<ssize_t>(size);
}

void StreamedBody::Free(void* self) {
  auto* holder = static_cast<std::shared_ptr<StreamedBody>*>(self);
  std::function<void()> on_closed;
  {
    std::lock_guard<std::mutex> lock((*holder)->mutex_);
    (*holder)->closed_ = true;
    on_closed = std::move((*holder)->on_closed_);
  }
  if (on_closed) on_closed();
  delete holder;
}

}  // namespace vidclf::http
