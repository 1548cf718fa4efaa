#include "server/service/classify_service.h"

#include <memory>
#include <utility>

#include "server/service/finished_call.h"
#include "server/service/grpc_status.h"
#include "server/service/guarded_reactor.h"
#include "server/service/model_info.h"
#include "server/service/raw_message.h"
#include "server/service/segments_reactor.h"
#include "server/service/stream_reactor.h"
#include "server/service/upload_reactor.h"
#include "server/service/watch_reactor.h"

namespace vidclf::service {

void ClassifyService::Register(grpc::ServerBuilder& builder) {
  builder.RegisterService(this);
  builder.RegisterCallbackGenericService(&generic_);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ClassifyService::ClassifyUpload(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return NewGuardedReactor<grpc::ServerReadReactor<grpc::ByteBuffer>>(
      "ClassifyUpload", [&] { return NewUploadReactor(&submitter_, context, response); });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ClassifyService::StreamClassify(
    grpc::CallbackServerContext* context) {
  return NewGuardedReactor<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
      "StreamClassify", [&] { return NewStreamReactor(engine_, metrics_, context); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ClassifyService::WatchSource(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  vidclf::v1::WatchSourceRequest parsed;
  if (absl::Status status = ParseRequest(*request, &parsed); !status.ok()) {
    RecordFinishedCall(*metrics_, "WatchSource", "unknown", status, 0, context->peer());
    return new FinishedReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>>(ToGrpcStatus(status));
  }
  return NewGuardedReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>>(
      "WatchSource", [&] { return NewWatchReactor(engine_, metrics_, context, parsed); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ClassifyService::ClassifySegments(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  vidclf::v1::ClassifySegmentsRequest parsed;
  if (absl::Status status = ParseRequest(*request, &parsed); !status.ok()) {
    RecordFinishedCall(*metrics_, "ClassifySegments", "unknown", status, 0, context->peer());
    return new FinishedReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>>(ToGrpcStatus(status));
  }
  return NewGuardedReactor<grpc::ServerWriteReactor<grpc::ByteBuffer>>("ClassifySegments", [&] {
    return NewSegmentsReactor(engine_, metrics_, context, std::move(parsed));
  });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ClassifyService::ClassifySegmentsUpload(grpc::CallbackServerContext* context) {
  return NewGuardedReactor<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
      "ClassifySegmentsUpload",
      [&] { return NewSegmentsUploadReactor(engine_, metrics_, context); });
}

grpc::ServerUnaryReactor* ClassifyService::ListModels(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  const Clock::time_point start = Clock::now();
  vidclf::v1::ListModelsRequest parsed;
  vidclf::v1::ListModelsResponse models;
  absl::Status status = ParseRequest(*request, &parsed);
  if (status.ok()) {
    status = GuardedAnswer("ListModels", [&] {
      const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
      for (const auto& [name, entry] : repository->entries()) {
        *models.add_models() = ModelInfoOf(entry, repository->default_model());
      }
      models.set_default_model(repository->default_model());
      return absl::OkStatus();
    });
  }
  return AnswerUnaryCall(*metrics_, context, "ListModels", "unknown", SecondsSince(start), models,
                         status, response);
}

grpc::ServerUnaryReactor* ClassifyService::GetModel(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  const Clock::time_point start = Clock::now();
  vidclf::v1::GetModelRequest parsed;
  vidclf::v1::ModelInfo info;
  absl::Status status = ParseRequest(*request, &parsed);
  if (status.ok()) {
    status = GuardedAnswer("GetModel", [&] {
      const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
      absl::StatusOr<const engine::ModelRepository::Entry*> entry = repository->FindEntry(
          parsed.name().empty() ? repository->default_model() : parsed.name());
      if (entry.ok()) info = ModelInfoOf(**entry, repository->default_model());
      return entry.status();
    });
  }
  return AnswerUnaryCall(*metrics_, context, "GetModel", status.ok() ? info.name() : "unknown",
                         SecondsSince(start), info, status, response);
}

}  // namespace vidclf::service
