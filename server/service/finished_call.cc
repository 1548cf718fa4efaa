#include "server/service/finished_call.h"

#include <spdlog/spdlog.h>

#include <string>

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

}  // namespace vidclf::service
