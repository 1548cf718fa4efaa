#include "server/service/sources_service.h"

#include <google/protobuf/empty.pb.h>

#include <utility>

#include "server/service/classify_submission.h"
#include "server/service/finished_call.h"
#include "server/service/guarded_reactor.h"
#include "server/service/raw_message.h"
#include "server/service/subscribe_reactor.h"

namespace vidclf::service {
namespace {

// Parses `request` as a `Request`, runs `method` on it, and answers with what it gave.
template <typename Request, typename Method>
grpc::ServerUnaryReactor* Answer(ServerMetrics& metrics, grpc::CallbackServerContext* context,
                                 absl::string_view name, const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response, Method method) {
  const Clock::time_point start = Clock::now();
  Request parsed;
  absl::Status status = ParseRequest(*request, &parsed);
  decltype(method(parsed)) answer = absl::UnknownError("not run");
  if (status.ok()) {
    status = GuardedAnswer(name, [&] {
      answer = method(parsed);
      return answer.status();
    });
  }
  using Message = typename decltype(answer)::value_type;
  const Message empty;
  return AnswerUnaryCall(metrics, context, name, "unknown", SecondsSince(start),
                         answer.ok() ? *answer : empty, status, response);
}

}  // namespace

grpc::ServerUnaryReactor* SourcesService::CreateSource(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Answer<vidclf::v1::CreateSourceRequest>(
      *metrics_, context, "CreateSource", request, response,
      [this](const vidclf::v1::CreateSourceRequest& parsed) {
        return registry_->CreateSource(parsed);
      });
}

grpc::ServerUnaryReactor* SourcesService::GetSource(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Answer<vidclf::v1::GetSourceRequest>(*metrics_, context, "GetSource", request, response,
                                              [this](const vidclf::v1::GetSourceRequest& parsed) {
                                                return registry_->GetSource(parsed.name());
                                              });
}

grpc::ServerUnaryReactor* SourcesService::ListSources(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return Answer<vidclf::v1::ListSourcesRequest>(
      *metrics_, context, "ListSources", request, response,
      [this](const vidclf::v1::ListSourcesRequest& parsed) {
        return registry_->ListSources(parsed);
      });
}

grpc::ServerUnaryReactor* SourcesService::UpdateSource(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Answer<vidclf::v1::UpdateSourceRequest>(
      *metrics_, context, "UpdateSource", request, response,
      [this](const vidclf::v1::UpdateSourceRequest& parsed) {
        return registry_->UpdateSource(parsed);
      });
}

grpc::ServerUnaryReactor* SourcesService::DeleteSource(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Answer<vidclf::v1::DeleteSourceRequest>(
      *metrics_, context, "DeleteSource", request, response,
      [this](const vidclf::v1::DeleteSourceRequest& parsed)
          -> absl::StatusOr<google::protobuf::Empty> {
        if (auto status = registry_->DeleteSource(parsed.name()); !status.ok()) return status;
        return google::protobuf::Empty();
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SourcesService::Subscribe(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return NewGuardedReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>>("Subscribe", [&] {
    return NewSubscribeReactor(registry_, metrics_, context->peer(), *request);
  });
}

}  // namespace vidclf::service
