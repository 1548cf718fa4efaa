#include "server/service/finished_call.h"

#include <spdlog/spdlog.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

void RecordFinishedCall(ServerMetrics& metrics, absl::string_view method, absl::string_view model,
                        const absl::Status& status, double seconds) {
  const std::string code = absl::StatusCodeToString(status.code());
  metrics.RecordRequest(method, model, code, seconds);
  if (!spdlog::should_log(spdlog::level::debug)) return;
  const absl::string_view message = status.message();
  spdlog::debug("{} model={} code={} seconds={:.3f}{}{}", std::string(method), std::string(model),
                code, seconds, message.empty() ? "" : ": ", std::string(message));
}

void RecordRefusedCall(ServerMetrics& metrics, absl::string_view path, const absl::Status& status) {
  // The generated code's descriptor: a fixed set of names.
  static const google::protobuf::ServiceDescriptor& kService =
      *google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          vidclf::v1::VideoClassifier::service_full_name());
  absl::string_view method = path;
  const bool ours = absl::ConsumePrefix(&method, absl::StrCat("/", kService.full_name(), "/")) &&
                    kService.FindMethodByName(std::string(method)) != nullptr;
  RecordFinishedCall(metrics, ours ? method : "unknown", "unknown", status, 0);
}

}  // namespace vidclf::service
