// A streaming call's reactor is made inside gRPC's own thread, where an exception would end the
// process. NewGuardedReactor makes it; one whose making throws is reported
// (server/internal_errors.h) and replaced by a FinishedReactor that ends the call with INTERNAL.
#ifndef VIDCLF_SERVER_SERVICE_GUARDED_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_GUARDED_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/string_view.h"
#include "server/internal_errors.h"

namespace vidclf::service {

// Ends its call at once with `status`: a call refused before it started, or one whose reactor
// could not be made. Reactor is any of gRPC's server reactor kinds.
template <typename Reactor>
class FinishedReactor final : public Reactor {
 public:
  explicit FinishedReactor(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

template <typename Reactor, typename Make>
Reactor* NewGuardedReactor(absl::string_view method, Make&& make) {
  try {
    return make();
  } catch (...) {
    ReportInternalError("grpc", method, CurrentExceptionText());
    return new FinishedReactor<Reactor>(
        grpc::Status(grpc::StatusCode::INTERNAL, std::string(kInternalErrorMessage)));
  }
}

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_GUARDED_REACTOR_H_
