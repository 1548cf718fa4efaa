#include "server/service/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace vidclf::service {
namespace {
// A long message is a bug or an attack, not help; TF Serving cuts at the same length.
constexpr size_t kMaxMessageLength = 1024;
}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxMessageLength) {
    message = absl::StrCat(message.substr(0, kMaxMessageLength), "...TRUNCATED");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

}  // namespace vidclf::service
