// What the server keeps of every finished RPC: its metrics, and a log line at debug level.
#ifndef VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
#define VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "server/metrics.h"

namespace vidclf::service {

// `model` is a served model's name or "unknown" (a bounded metrics label, never request text).
void RecordFinishedCall(ServerMetrics& metrics, absl::string_view method, absl::string_view model,
                        const absl::Status& status, double seconds);

// Ends a unary call of `method` about `model` that took `seconds` with `status`, and `response`
// serialized into `out` when it is OK; records it as above.
grpc::ServerUnaryReactor* AnswerUnaryCall(ServerMetrics& metrics,
                                          grpc::CallbackServerContext* context,
                                          absl::string_view method, absl::string_view model,
                                          double seconds, const google::protobuf::Message& response,
                                          const absl::Status& status, grpc::ByteBuffer* out);

// A call refused on its headers, before it reached a handler: `path` is its method's full name
// as the client sent it ("/vidclf.v1.VideoClassifier/Classify"); the metrics label is the name
// of one of the methods of vidclf.v1.VideoClassifier or inference.GRPCInferenceService, or
// "unknown".
void RecordRefusedCall(ServerMetrics& metrics, absl::string_view path, const absl::Status& status);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
