#include "server/startup_warnings.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf {

bool IsLoopback(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "::1" || host == "[::1]" || host == "localhost";
}

std::vector<std::string> ExposureWarnings(const ServerOptions& options) {
  std::vector<std::string> warnings;
  const bool grpc_tls = !options.tls.cert.empty();
  const bool grpc_tokens = !options.token_file.empty();
  if (grpc_tokens && !grpc_tls && !IsLoopback(options.host)) {
    warnings.push_back(
        absl::StrCat("bearer tokens travel in plaintext to ", options.host,
                     ": anyone on the network path can read and reuse them; serve gRPC over TLS "
                     "(--tls-cert, --tls-key), or listen on loopback behind a TLS proxy"));
  }
  const std::string& metrics_host = options.metrics.host;
  if ((grpc_tls || grpc_tokens) && !IsLoopback(metrics_host)) {
    if (options.metrics.tls_cert.empty() && grpc_tls) {
      warnings.push_back(absl::StrCat(
          "/metrics is served in plaintext on ", metrics_host,
          " while gRPC needs TLS; give it --metrics-tls-cert and --metrics-tls-key, or "
          "--metrics-host 127.0.0.1"));
    }
    if (options.metrics_token_file.empty()) {
      warnings.push_back(
          absl::StrCat("/metrics is open to anyone who reaches ", metrics_host,
                       " while gRPC needs ", grpc_tokens ? "tokens" : "TLS",
                       "; give it --metrics-token-file, or --metrics-host 127.0.0.1"));
    }
  }
  return warnings;
}

}  // namespace vidclf
