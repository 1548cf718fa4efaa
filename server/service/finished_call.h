// What the server keeps of every finished RPC: its metrics, and a log line at debug level.
#ifndef VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
#define VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/metrics.h"

namespace vidclf::service {

// `model` is a served model's name or "unknown" (a bounded metrics label, never request text).
void RecordFinishedCall(ServerMetrics& metrics, absl::string_view method, absl::string_view model,
                        const absl::Status& status, double seconds);

// A call refused on its headers, before it reached a handler: `path` is its method's full name
// as the client sent it ("/vidclf.v1.VideoClassifier/Classify"); the metrics label is the name
// of one of vidclf.v1.VideoClassifier's methods, or "unknown".
void RecordRefusedCall(ServerMetrics& metrics, absl::string_view path, const absl::Status& status);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
