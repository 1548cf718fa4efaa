#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_text.h"
#include "media/quoted_text.h"
#include "server/internal_errors.h"

namespace vidclf::http {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  if (!absl::StrContains(contents.str(), "-----BEGIN")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds no PEM block"));
  }
  return contents.str();
}

// Queues `answer` with `cors`'s headers besides its own.
MHD_Result Queue(MHD_Connection* connection, const HttpResponse& answer, const HeaderList& cors) {
  MHD_Response* response =
      answer.stream != nullptr
          ? answer.stream->Respond(connection)
          : MHD_create_response_from_buffer(
                answer.body.size(), const_cast<char*>(answer.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type.c_str());
  if (answer.code == MHD_HTTP_UNAUTHORIZED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  }
  for (const HeaderList* headers : {&answer.headers, &cors}) {
    for (const auto& [name, value] : *headers) {
      MHD_add_response_header(response, name.c_str(), value.c_str());
    }
  }
  const MHD_Result queued = MHD_queue_response(connection, answer.code, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd's own unescaping of %XX in the path and the query, but for %00: a NUL would cut
// the C string it hands on ("/v2/models/demo%00x" read as "/v2/models/demo"), so it becomes
// media::kEncodedNul, which is not UTF-8 and which the door refuses. Never longer than before.
size_t Unescape(void* /*self*/, MHD_Connection* /*connection*/, char* text) {
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  char* out = text;
  for (const char* in = text; *in != '\0'; ++in) {
    const int high = in[0] == '%' ? hex(in[1]) : -1;
    const int low = high >= 0 ? hex(in[2]) : -1;
    if (low < 0) {
      *out++ = *in;
      continue;
    }
    const char byte = static_cast<char>(high * 16 + low);
    if (byte == '\0') {
      out = std::copy(media::kEncodedNul.begin(), media::kEncodedNul.end(), out);
    } else {
      *out++ = byte;
    }
    in += 2;
  }
  *out = '\0';
  return static_cast<size_t>(out - text);
}

// The path, then each query parameter, must be text: what is not (NUL, control characters,
// bytes that are not UTF-8) is refused before anything looks names up in it.
absl::Status CheckRequestText(const HttpRequest& request) {
  if (absl::Status path = media::CheckPlainText("path", request.path); !path.ok()) return path;
  for (const auto& [name, value] : request.query) {
    if (absl::Status plain = media::CheckPlainText("query parameter name", name); !plain.ok()) {
      return plain;
    }
    const std::string field = absl::StrCat("query parameter ", name);
    if (absl::Status plain = media::CheckPlainText(field, value); !plain.ok()) return plain;
  }
  return absl::OkStatus();
}

MHD_Result CollectInto(void* map, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  if (key != nullptr) {
    (*static_cast<std::map<std::string, std::string>*>(map))[absl::AsciiStrToLower(key)] =
        value != nullptr ? value : "";
  }
  return MHD_YES;
}

MHD_Result CollectQuery(void* map, MHD_ValueKind /*kind*/, const char* key, const char* value) {
  if (key != nullptr) {
    (*static_cast<std::map<std::string, std::string>*>(map))[key] = value != nullptr ? value : "";
  }
  return MHD_YES;
}

// The connection's client address as gRPC writes a peer: "ipv4:ADDR:PORT" or "ipv6:[ADDR]:PORT".
std::string PeerOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "unknown";
  char address[INET6_ADDRSTRLEN] = {};
  if (info->client_addr->sa_family == AF_INET) {
    const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(info->client_addr);
    inet_ntop(AF_INET, &ipv4->sin_addr, address, sizeof(address));
    return absl::StrCat("ipv4:", address, ":", ntohs(ipv4->sin_port));
  }
  if (info->client_addr->sa_family == AF_INET6) {
    const auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(info->client_addr);
    inet_ntop(AF_INET6, &ipv6->sin6_addr, address, sizeof(address));
    return absl::StrCat("ipv6:[", address, "]:", ntohs(ipv6->sin6_port));
  }
  return "unknown";
}

}  // namespace

HttpResponse JsonError(unsigned int code, absl::string_view message) {
  return HttpResponse{code, "application/json", JsonText(nlohmann::json{{"error", message}}), {}};
}

// One request on a connection, from its headers until libmicrohttpd is done with it; shared with
// the handler's responder, which may outlive the connection's wait.
struct HttpServer::Exchange {
  MHD_Connection* connection = nullptr;
  HttpRequest request;
  HeaderList cors;  // the headers each answer carries
  std::chrono::steady_clock::time_point headers_received;
  bool too_large = false;
  bool handed_over = false;  // to the handler
  std::mutex mutex;
  std::optional<HttpResponse> response;  // once answered, until queued
  bool suspended = false;
  int socket = -1;                       // open while suspended (libmicrohttpd keeps it)
  std::function<void()> on_client_gone;  // taken when run
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              Handler handler) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(options.port));
  if (::inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.name, " host ", options.host, " is not an IPv4 address"));
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.tls_cert_flag, " and ", options.tls_key_flag, " go together"));
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handler)));
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(options.tls_cert_flag, options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.tls_key_flag, options.tls_key);
    if (!key.ok()) return key.status();
    server->tls_cert_ = *std::move(cert);
    server->tls_key_ = *std::move(key);
    flags |= MHD_USE_TLS;
  }
  // The variadic list ends at MHD_OPTION_END: the TLS options are left out by ending it early.
  const bool tls = !server->tls_cert_.empty();
  server->daemon_ = MHD_start_daemon(
      flags, 0, nullptr, nullptr, &Answer, server.get(), MHD_OPTION_SOCK_ADDR,
      reinterpret_cast<sockaddr*>(&address), MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(options.max_connections), MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      static_cast<unsigned int>(options.max_connections_per_address), MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(options.idle_timeout_seconds), MHD_OPTION_NOTIFY_COMPLETED,
      &Completed, server.get(), MHD_OPTION_UNESCAPE_CALLBACK, &Unescape, nullptr,
      tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, server->tls_cert_.c_str(),
      MHD_OPTION_HTTPS_MEM_KEY, server->tls_key_.c_str(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve ", options.name, " on ", options.host, ":", options.port,
        tls ? " (the address is taken, or the TLS certificate and key do not go together)"
            : " (the address is taken)"));
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = bound != nullptr ? bound->port : options.port;
  server->watcher_ = std::thread([raw = server.get()] { raw->WatchWaitingClients(); });
  return server;
}

HttpServer::~HttpServer() {
  if (watcher_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(waiting_mutex_);
      stopping_ = true;
    }
    stop_watching_.notify_all();
    watcher_.join();
  }
  // Streamed bodies end here: libmicrohttpd stops no daemon with connections suspended.
  for (const std::weak_ptr<StreamedBody>& stream : streams_) {
    if (const auto body = stream.lock()) body->Close();
  }
  // Their clients get the body's end, unless they do not read it within a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline &&
         std::any_of(streams_.begin(), streams_.end(),
                     [](const std::weak_ptr<StreamedBody>& stream) { return !stream.expired(); })) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

void HttpServer::WatchWaitingClients() {
  std::unique_lock<std::mutex> lock(waiting_mutex_);
  while (!stop_watching_.wait_for(lock, std::chrono::milliseconds(200),
                                  [this] { return stopping_; })) {
    std::vector<std::function<void()>> cancels;
    std::vector<std::shared_ptr<Exchange>> still_waiting;
    for (const std::shared_ptr<Exchange>& exchange : waiting_) {
      std::lock_guard<std::mutex> exchange_lock(exchange->mutex);
      // Suspended, its socket stays open: libmicrohttpd closes none until it resumes.
      if (!exchange->suspended) continue;
      if (exchange->on_client_gone && PeerClosed(exchange->socket)) {
        cancels.push_back(std::move(exchange->on_client_gone));
        exchange->on_client_gone = nullptr;
      }
      still_waiting.push_back(exchange);
    }
    waiting_ = std::move(still_waiting);
    std::vector<std::shared_ptr<StreamedBody>> streams;
    std::vector<std::weak_ptr<StreamedBody>> still_streaming;
    for (const std::weak_ptr<StreamedBody>& stream : streams_) {
      if (auto body = stream.lock()) {
        streams.push_back(std::move(body));
        still_streaming.push_back(stream);
      }
    }
    streams_ = std::move(still_streaming);
    lock.unlock();
    for (const std::shared_ptr<StreamedBody>& body : streams) body->Watch();
    for (const std::function<void()>& cancel : cancels) cancel();
    lock.lock();
  }
}

MHD_Result HttpServer::Begin(MHD_Connection* connection, const char* url, const char* method,
                             void** request_state) const {
  auto exchange = std::make_shared<Exchange>();
  exchange->connection = connection;
  HttpRequest& request = exchange->request;
  request.method = method;
  request.path = url;
  request.peer = PeerOf(connection);
  MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectInto, &request.headers);
  MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectQuery, &request.query);
  const auto origin = request.headers.find("origin");
  const std::string from = origin != request.headers.end() ? origin->second : "";
  exchange->cors = cors_.HeadersFor(from);
  if (absl::Status text = CheckRequestText(request); !text.ok()) {
    return Refuse(connection, request, text, exchange->cors);
  }
  if (request.method == "OPTIONS" && request.headers.count("access-control-request-method") != 0) {
    const HeaderList allowed = cors_.PreflightHeadersFor(from);
    if (allowed.empty()) {
      return Refuse(connection, request,
                    absl::PermissionDeniedError(
                        absl::StrCat("pages from ", media::QuoteInput(from, 128),
                                     " may not call this server (--http-allow-origin)")),
                    {});
    }
    return Queue(connection, HttpResponse{MHD_HTTP_NO_CONTENT, "text/plain", "", {}}, allowed);
  }
  const auto length = request.headers.find("content-length");
  int64_t declared = 0;
  if (length != request.headers.end() && absl::SimpleAtoi(length->second, &declared) &&
      declared > options_.max_body_bytes) {
    return Refuse(connection, request,
                  absl::ResourceExhaustedError(absl::StrCat(
                      "the body of ", declared, " bytes is over this server's limit of ",
                      options_.max_body_bytes, " bytes")),
                  exchange->cors);
  }
  if (options_.tokens != nullptr && !(options_.open_to_all && options_.open_to_all(request.path))) {
    const auto authorization = request.headers.find("authorization");
    const absl::Status allowed =
        options_.tokens->Check(authorization != request.headers.end() ? authorization->second : "");
    if (!allowed.ok()) return Refuse(connection, request, allowed, exchange->cors);
  }
  exchange->headers_received = std::chrono::steady_clock::now();
  const MHD_ConnectionInfo* socket =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (socket != nullptr) exchange->socket = socket->connect_fd;
  *request_state = new std::shared_ptr<Exchange>(std::move(exchange));
  return MHD_YES;
}

MHD_Result HttpServer::Answer(void* self, MHD_Connection* connection, const char* url,
                              const char* method, const char* /*version*/, const char* upload_data,
                              size_t* upload_data_size, void** request_state) {
  auto& server = *static_cast<HttpServer*>(self);
  try {
    return server.Serve(connection, url, method, upload_data, upload_data_size, request_state);
  } catch (...) {
    ReportInternalError("http",
                        absl::StrCat(media::QuoteInput(method != nullptr ? method : ""), " ",
                                     media::QuoteInput(url != nullptr ? url : "", 128)),
                        CurrentExceptionText());
    return Queue(connection, JsonError(500, kInternalErrorMessage), {});
  }
}

MHD_Result HttpServer::Serve(MHD_Connection* connection, const char* url, const char* method,
                             const char* upload_data, size_t* upload_data_size,
                             void** request_state) {
  if (*request_state == nullptr) return Begin(connection, url, method, request_state);
  const std::shared_ptr<Exchange> exchange =
      *static_cast<std::shared_ptr<Exchange>*>(*request_state);
  if (*upload_data_size != 0) {  // the next part of the body
    HttpRequest& request = exchange->request;
    const int timeout = options_.body_timeout_seconds;
    if (timeout > 0 && std::chrono::steady_clock::now() - exchange->headers_received >
                           std::chrono::seconds(timeout)) {
      // libmicrohttpd answers no request before its body has arrived: the connection closes,
      // as nginx's client_body_timeout closes one.
      return MHD_NO;
    }
    if (static_cast<int64_t>(request.body.size() + *upload_data_size) > options_.max_body_bytes) {
      exchange->too_large = true;
      request.body.clear();
    }
    if (!exchange->too_large) request.body.append(upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  {
    std::lock_guard<std::mutex> lock(exchange->mutex);
    if (exchange->response.has_value()) {
      return QueueAnswer(connection, *exchange->response, exchange->cors);
    }
    if (exchange->handed_over) return MHD_YES;  // woken with no answer yet
    exchange->handed_over = true;
  }
  if (exchange->too_large) {
    return Refuse(
        connection, exchange->request,
        absl::ResourceExhaustedError(absl::StrCat("the body is over this server's limit of ",
                                                  options_.max_body_bytes, " bytes")),
        exchange->cors);
  }
  exchange->request.on_client_gone = [exchange](std::function<void()> cancel) {
    std::lock_guard<std::mutex> lock(exchange->mutex);
    exchange->on_client_gone = std::move(cancel);
  };
  Responder respond = [exchange](HttpResponse response) {
    std::lock_guard<std::mutex> lock(exchange->mutex);
    if (exchange->response.has_value()) return;  // answered once already
    exchange->response = std::move(response);
    // Answered: nothing to cancel, and what the hook holds (the call, whose callback holds this
    // responder) must not outlive the exchange in a cycle.
    exchange->on_client_gone = nullptr;
    if (exchange->suspended) {
      exchange->suspended = false;
      MHD_resume_connection(exchange->connection);
    }
  };
  const std::string request_line = absl::StrCat(media::QuoteInput(exchange->request.method), " ",
                                                media::QuoteInput(exchange->request.path, 128));
  try {
    handler_(std::move(exchange->request), respond);
  } catch (...) {
    ReportInternalError("http", request_line, CurrentExceptionText());
    respond(JsonError(500, kInternalErrorMessage));
  }
  {
    std::lock_guard<std::mutex> lock(exchange->mutex);
    if (exchange->response.has_value()) {
      return QueueAnswer(connection, *exchange->response, exchange->cors);
    }
    exchange->suspended = true;  // answered later: the connection waits until then
    MHD_suspend_connection(connection);
  }
  std::lock_guard<std::mutex> lock(waiting_mutex_);
  waiting_.push_back(exchange);
  return MHD_YES;
}

MHD_Result HttpServer::Refuse(MHD_Connection* connection, const HttpRequest& request,
                              const absl::Status& refusal, const HeaderList& cors) const {
  if (options_.on_refused) options_.on_refused(request, refusal);
  const unsigned int code = refusal.code() == absl::StatusCode::kResourceExhausted
                                ? MHD_HTTP_CONTENT_TOO_LARGE
                                : HttpCodeOf(refusal.code());
  return Queue(connection, JsonError(code, refusal.message()), cors);
}

MHD_Result HttpServer::QueueAnswer(MHD_Connection* connection, const HttpResponse& answer,
                                   const HeaderList& cors) {
  if (answer.stream != nullptr) {
    std::lock_guard<std::mutex> lock(waiting_mutex_);
    streams_.push_back(answer.stream);
  }
  return Queue(connection, answer, cors);
}

void HttpServer::Completed(void* /*self*/, MHD_Connection* /*connection*/, void** request_state,
                           MHD_RequestTerminationCode /*code*/) {
  delete static_cast<std::shared_ptr<Exchange>*>(*request_state);
  *request_state = nullptr;
}

unsigned int HttpCodeOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

}  // namespace vidclf::http
