#include "server/security/server_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
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

// Plaintext credentials that take an AuthMetadataProcessor: the gRPC core's insecure credentials,
// whose processor is a C callback that hands each call's headers to the C++ one.
class PlaintextCredentials final : public grpc::ServerCredentials {
 public:
  PlaintextCredentials() : core_(grpc_insecure_server_credentials_create()) {}
  ~PlaintextCredentials() override { grpc_server_credentials_release(core_); }

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override {
    // The core credentials own a reference, which the servers listening with them share.
    grpc_server_credentials_set_auth_metadata_processor(
        core_, {&Process, &Destroy, new std::shared_ptr<grpc::AuthMetadataProcessor>(processor)});
  }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    return grpc_server_add_http2_port(server, address.c_str(), core_);
  }

  // Runs the processor inline: the gate never blocks (CallGate::IsBlocking).
  static void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* metadata,
                      size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
    grpc::AuthMetadataProcessor::InputMetadata input;
    for (size_t i = 0; i < count; ++i) {
      input.emplace(
          grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(metadata[i].key)),
                           GRPC_SLICE_LENGTH(metadata[i].key)),
          grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(metadata[i].value)),
                           GRPC_SLICE_LENGTH(metadata[i].value)));
    }
    grpc::AuthMetadataProcessor::OutputMetadata consumed;
    grpc::AuthMetadataProcessor::OutputMetadata response;
    auto& processor = *static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
    const grpc::Status status = processor->Process(input, nullptr, &consumed, &response);
    done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.error_code()),
         status.ok() ? nullptr : status.error_message().c_str());
  }
  static void Destroy(void* state) {
    delete static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
  }

  grpc_server_credentials* const core_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, std::shared_ptr<grpc::AuthMetadataProcessor> gate,
    unsigned int refresh_seconds) {
  if (files.cert.empty() && files.key.empty()) {
    if (!files.client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key: clients are verified over TLS only");
    }
    if (gate == nullptr) return grpc::InsecureServerCredentials();
    auto credentials = std::make_shared<PlaintextCredentials>();
    credentials->SetAuthMetadataProcessor(gate);
    return credentials;
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
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(options);
  if (gate != nullptr) credentials->SetAuthMetadataProcessor(gate);
  return credentials;
}

}  // namespace vidclf::security
