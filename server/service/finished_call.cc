#include "server/service/finished_call.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/internal_errors.h"
#include "server/service/grpc_status.h"
#include "server/service/raw_message.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

namespace {

std::atomic<AccessLog> access_log{AccessLog::kErrors};

}  // namespace

void SetAccessLog(AccessLog mode) { access_log = mode; }

void RecordFinishedCall(ServerMetrics& metrics, absl::string_view method, absl::string_view model,
                        const absl::Status& status, double seconds, absl::string_view peer) {
  const std::string code = absl::StatusCodeToString(status.code());
  metrics.RecordRequest(method, model, code, seconds);
  const AccessLog mode = access_log.load(std::memory_order_relaxed);
  const bool logged = mode == AccessLog::kAll || (mode == AccessLog::kErrors && !status.ok());
  const spdlog::level::level_enum level = logged ? spdlog::level::info : spdlog::level::debug;
  if (!spdlog::should_log(level)) return;
  // Status messages are the server's own, with URIs' secrets redacted where they are made.
  const absl::string_view message = status.message();
  spdlog::log(level, "{} model={} code={} seconds={:.3f} peer={}{}{}", std::string(method),
              std::string(model), code, seconds, std::string(peer), message.empty() ? "" : ": ",
              std::string(message));
}

grpc::ServerUnaryReactor* AnswerUnaryCall(ServerMetrics& metrics,
                                          grpc::CallbackServerContext* context,
                                          absl::string_view method, absl::string_view model,
                                          double seconds, const google::protobuf::Message& response,
                                          const absl::Status& status, grpc::ByteBuffer* out) {
  if (status.ok()) *out = SerializeMessage(response);
  RecordFinishedCall(metrics, method, model, status, seconds, context->peer());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status GuardedAnswer(absl::string_view method, const std::function<absl::Status()>& answer) {
  absl::Status status = absl::InternalError(kInternalErrorMessage);
  RunGuarded("grpc", method, [&] { status = answer(); });
  return status;
}

void RecordRefusedCall(ServerMetrics& metrics, absl::string_view path, const absl::Status& status) {
  // The generated code's descriptors: a fixed set of names.
  for (const char* service_name : {vidclf::v1::VideoClassifier::service_full_name(),
                                   inference::GRPCInferenceService::service_full_name()}) {
    const google::protobuf::ServiceDescriptor& service =
        *google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service_name);
    absl::string_view method = path;
    if (absl::ConsumePrefix(&method, absl::StrCat("/", service.full_name(), "/")) &&
        service.FindMethodByName(std::string(method)) != nullptr) {
      RecordFinishedCall(metrics, method, "unknown", status, 0, "unknown");
      return;
    }
  }
  RecordFinishedCall(metrics, "unknown", "unknown", status, 0, "unknown");
}

}  // namespace vidclf::service
