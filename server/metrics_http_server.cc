#include "server/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <prometheus/text_serializer.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf {
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

MHD_Result Respond(MHD_Connection* connection, unsigned int code, const char* content_type,
                   const std::string& body) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (code == MHD_HTTP_UNAUTHORIZED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  }
  const MHD_Result queued = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return queued;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options,
    std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(options.port));
  if (::inet_pton(AF_INET, options.host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics host ", options.host, " is not an IPv4 address"));
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--metrics-tls-cert and --metrics-tls-key go together");
  }
  std::unique_ptr<MetricsHttpServer> server(
      new MetricsHttpServer(options, std::move(collectables)));
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--metrics-tls-cert", options.tls_cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--metrics-tls-key", options.tls_key);
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
      static_cast<unsigned int>(options.idle_timeout_seconds),
      tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, server->tls_cert_.c_str(),
      MHD_OPTION_HTTPS_MEM_KEY, server->tls_key_.c_str(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", options.host, ":", options.port,
        tls ? " (the address is taken, or the TLS certificate and key do not go together)"
            : " (the address is taken)"));
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = bound != nullptr ? bound->port : options.port;
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

MHD_Result MetricsHttpServer::Answer(void* self, MHD_Connection* connection, const char* url,
                                     const char* method, const char* /*version*/,
                                     const char* /*upload_data*/, size_t* upload_data_size,
                                     void** /*request_state*/) {
  const auto& server = *static_cast<const MetricsHttpServer*>(self);
  if (*upload_data_size != 0) {  // a body nobody asked for: take it, answer at its end
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (absl::string_view(method) != MHD_HTTP_METHOD_GET) {
    return Respond(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "use GET /metrics\n");
  }
  if (absl::string_view(url) != "/metrics") {
    return Respond(connection, MHD_HTTP_NOT_FOUND, "text/plain", "metrics are at /metrics\n");
  }
  if (server.options_.tokens != nullptr) {
    const char* authorization =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const absl::Status allowed =
        server.options_.tokens->Check(authorization != nullptr ? authorization : "");
    if (!allowed.ok()) {
      return Respond(connection, MHD_HTTP_UNAUTHORIZED, "text/plain",
                     absl::StrCat(allowed.message(), "\n"));
    }
  }
  return Respond(connection, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                 server.Scrape());
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
