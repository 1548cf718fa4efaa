// The one place where absl::Status becomes grpc::Status.
#ifndef VIDCLF_SERVER_SERVICE_GRPC_STATUS_H_
#define VIDCLF_SERVER_SERVICE_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace vidclf::service {

// Same code (the two enums share their values), same message cut to 1024 characters.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_GRPC_STATUS_H_
