// What the server keeps of every finished RPC: its metrics, and its line in the access log.
#ifndef VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
#define VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_

#include <grpcpp/grpcpp.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "server/metrics.h"

namespace vidclf::service {

// Which finished calls get a line at info (--access-log): none, those that did not end OK (the
// default), or all. A call the mode leaves out still gets its line at debug. Thread-safe.
enum class AccessLog { kOff, kErrors, kAll };
void SetAccessLog(AccessLog mode);

// `model` is a served model's name or "unknown" (a bounded metrics label, never request text);
// `peer` the client's address as gRPC gives it ("ipv4:127.0.0.1:5678"), for the log only.
void RecordFinishedCall(ServerMetrics& metrics, absl::string_view method, absl::string_view model,
                        const absl::Status& status, double seconds, absl::string_view peer);

// Ends a unary call of `method` about `model` that took `seconds` with `status`, and `response`
// serialized into `out` when it is OK; records it as above, from `context`'s peer.
grpc::ServerUnaryReactor* AnswerUnaryCall(ServerMetrics& metrics,
                                          grpc::CallbackServerContext* context,
                                          absl::string_view method, absl::string_view model,
                                          double seconds, const google::protobuf::Message& response,
                                          const absl::Status& status, grpc::ByteBuffer* out);

// Runs `answer`, which works out a unary call of `method` and says how it ended. An exception it
// throws ends the call, not the server: INTERNAL with kInternalErrorMessage, reported at "grpc"
// (server/internal_errors.h).
absl::Status GuardedAnswer(absl::string_view method, const std::function<absl::Status()>& answer);

// A call refused on its headers, before it reached a handler: `path` is its method's full name
// as the client sent it ("/vidclf.v1.VideoClassifier/Classify"); the metrics label is the name
// of one of the methods of vidclf.v1.VideoClassifier or inference.GRPCInferenceService, or
// "unknown". The gate sees no peer address: the log says "unknown".
void RecordRefusedCall(ServerMetrics& metrics, absl::string_view path, const absl::Status& status);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_FINISHED_CALL_H_
