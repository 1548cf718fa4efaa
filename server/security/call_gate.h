// The first look at every call, on its metadata alone, before gRPC reads its first message: a
// call refused here costs the server a few bytes of headers, however large the body it was
// about to send.
//
// gRPC C++ runs an AuthMetadataProcessor in the transport's auth filter, as soon as a call's
// headers arrive; a unary handler (or an interceptor) runs only once the whole request is in
// memory. So the token check lives here, for every service on the port but health checks and
// reflection, which stay open for probes and tools (the Open Inference Protocol's ServerLive,
// ServerReady and ModelReady are health checks too). So does the drain's refusal: a call the gate
// refuses never becomes one that the server's shutdown cancels (CANCELLED, which clients do not
// retry), so every call that arrives while the server drains and shuts down gets UNAVAILABLE.
#ifndef VIDCLF_SERVER_SECURITY_CALL_GATE_H_
#define VIDCLF_SERVER_SECURITY_CALL_GATE_H_

#include <grpcpp/security/auth_metadata_processor.h>

#include <atomic>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/security/bearer_tokens.h"

namespace vidclf::security {

class CallGate final : public grpc::AuthMetadataProcessor {
 public:
  // Hears each call the gate refuses: its method's full name ("/vidclf.v1.VideoClassifier/
  // Classify") and why. Called on a gRPC thread; must not block.
  using RefusalListener = std::function<void(absl::string_view method, const absl::Status&)>;

  // `tokens` (none asked for when null) and `admin_tokens` (null: none) must outlive the gate.
  CallGate(const BearerTokens* tokens, const BearerTokens* admin_tokens, RefusalListener on_refusal)
      : tokens_(tokens), admin_tokens_(admin_tokens), on_refusal_(std::move(on_refusal)) {}

  // OK when a call with these request headers may go on to its handler; UNAUTHENTICATED
  // otherwise, with the reason, or UNAVAILABLE for all but health checks once draining.
  // Changing the registered sources (Sources' Create, Update and Delete) needs an admin token:
  // PERMISSION_DENIED for another token, and for every caller when the server has inference
  // tokens but no admin tokens. An admin token also passes where an inference token does.
  absl::Status Check(absl::string_view method, absl::string_view authorization) const;

  // From now on every call but health checks is refused with UNAVAILABLE. Thread-safe.
  void StartDraining() { draining_ = true; }

  // grpc::AuthMetadataProcessor. The check is a few hashes: it runs inline on gRPC's thread.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const BearerTokens* const tokens_;
  const BearerTokens* const admin_tokens_;
  const RefusalListener on_refusal_;
  std::atomic<bool> draining_{false};
};

}  // namespace vidclf::security

#endif  // VIDCLF_SERVER_SECURITY_CALL_GATE_H_
