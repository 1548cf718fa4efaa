#include "server/security/call_gate.h"

#include "absl/strings/match.h"
#include "server/service/grpc_status.h"

namespace vidclf::security {
namespace {

// Health checks: gRPC's, and the Open Inference Protocol's, which answer "not ready" while the
// server drains.
bool IsHealthCheck(absl::string_view method) {
  return absl::StartsWith(method, "/grpc.health.v1.Health/") ||
         method == "/inference.GRPCInferenceService/ServerLive" ||
         method == "/inference.GRPCInferenceService/ServerReady" ||
         method == "/inference.GRPCInferenceService/ModelReady";
}

// Methods every caller may use: probes and tools carry no token.
bool IsOpenToAll(absl::string_view method) {
  return IsHealthCheck(method) || absl::StartsWith(method, "/grpc.reflection.");
}

absl::string_view Value(const grpc::AuthMetadataProcessor::InputMetadata& metadata,
                        absl::string_view key) {
  const auto found = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (found == metadata.end()) return "";
  return absl::string_view(found->second.data(), found->second.size());
}

// Methods that change what the server pulls on its own.
bool NeedsAdmin(absl::string_view method) {
  return method == "/vidclf.v1.Sources/CreateSource" ||
         method == "/vidclf.v1.Sources/UpdateSource" || method == "/vidclf.v1.Sources/DeleteSource";
}

}  // namespace

absl::Status CallGate::Check(absl::string_view method, absl::string_view authorization) const {
  if (draining_ && !IsHealthCheck(method)) {
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (IsOpenToAll(method)) return absl::OkStatus();
  const bool admin = admin_tokens_ != nullptr && admin_tokens_->Check(authorization).ok();
  if (NeedsAdmin(method)) {
    if (admin || (admin_tokens_ == nullptr && tokens_ == nullptr)) return absl::OkStatus();
    if (admin_tokens_ == nullptr) {
      return absl::PermissionDeniedError(
          "changing sources needs an admin token, and this server has none (--admin-token-file)");
    }
    if (tokens_ != nullptr && tokens_->Check(authorization).ok()) {
      return absl::PermissionDeniedError(
          "changing sources needs an admin token (--admin-token-file), not an inference token");
    }
    return admin_tokens_->Check(authorization);
  }
  if (tokens_ == nullptr || admin) return absl::OkStatus();
  return tokens_->Check(authorization);
}

grpc::Status CallGate::Process(const InputMetadata& metadata, grpc::AuthContext* /*context*/,
                               OutputMetadata* /*consumed_metadata*/,
                               OutputMetadata* /*response_metadata*/) {
  const absl::string_view method = Value(metadata, ":path");
  const absl::Status status = Check(method, Value(metadata, "authorization"));
  if (status.ok()) return grpc::Status::OK;
  if (on_refusal_) on_refusal_(method, status);
  return service::ToGrpcStatus(status);
}

}  // namespace vidclf::security
