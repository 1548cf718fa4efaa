// The unary Classify, served as a generic method: gRPC C++ reads a typed unary call's whole
// request before any handler runs, where a generic call's reactor starts on its headers. So a
// Classify counts against the engine's bounds, or is refused, before its body (up to
// --max-upload-mib) arrives: a burst of large calls is refused in milliseconds, not after each
// body has come in and been held.
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_REACTOR_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include "server/service/classify_submission.h"

namespace vidclf::service {

// Serves "/vidclf.v1.VideoClassifier/Classify", which the typed service leaves to it
// (WithGenericMethod_Classify), and answers UNIMPLEMENTED to a method no service has.
class GenericMethods final : public grpc::CallbackGenericService {
 public:
  // `submitter` must outlive the service.
  explicit GenericMethods(const ClassifySubmitter* submitter) : submitter_(submitter) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  const ClassifySubmitter* const submitter_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_REACTOR_H_
