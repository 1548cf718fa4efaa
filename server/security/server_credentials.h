// The credentials the gRPC port listens with: plaintext, TLS, or mutual TLS; and the gate that
// every call passes on its headers before its first message is read (call_gate.h).
#ifndef VIDCLF_SERVER_SECURITY_SERVER_CREDENTIALS_H_
#define VIDCLF_SERVER_SECURITY_SERVER_CREDENTIALS_H_

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace vidclf::security {

struct TlsFiles {
  std::string cert;       // PEM certificate chain of the server; empty: plaintext
  std::string key;        // PEM private key of that certificate
  std::string client_ca;  // PEM CA bundle; when set, clients must present a certificate it signed
};

// The files are read again every `refresh_seconds`, so a renewed certificate (cert-manager's,
// say) takes effect without a restart. Missing, unreadable or non-PEM files are an error here,
// before the server starts, rather than a handshake that fails later. `gate`, when not null,
// sees every call's headers first, in plaintext too (gRPC C++'s own plaintext credentials take
// no processor; these use the gRPC core's, which do).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, std::shared_ptr<grpc::AuthMetadataProcessor> gate = nullptr,
    unsigned int refresh_seconds = 60);

}  // namespace vidclf::security

#endif  // VIDCLF_SERVER_SECURITY_SERVER_CREDENTIALS_H_
