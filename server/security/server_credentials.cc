#include "server/security/server_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vidclf::security {
namespace {

// OK when `path` can be read and holds a PEM block of `kind` ("CERTIFICATE", "PRIVATE KEY").
absl::Status CheckPemFile(const std::string& flag, const std::string& path,
                          const std::string& kind) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  // "-----BEGIN PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN EC ...".
  if (!absl::StrContains(contents.str(), "-----BEGIN") ||
      !absl::StrContains(contents.str(), kind + "-----")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " holds no PEM ", kind, " block"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, unsigned int refresh_seconds) {
  if (files.cert.empty() && files.key.empty()) {
    if (!files.client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key: clients are verified over TLS only");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  for (const absl::Status& status :
       {CheckPemFile("--tls-cert", files.cert, "CERTIFICATE"),
        CheckPemFile("--tls-key", files.key, "PRIVATE KEY"),
        files.client_ca.empty()
            ? absl::OkStatus()
            : CheckPemFile("--tls-client-ca", files.client_ca, "CERTIFICATE")}) {
    if (!status.ok()) return status;
  }
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.client_ca, refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.client_ca.empty()) {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  } else {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace vidclf::security
