#include "server/service/inference_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/finished_call.h"
#include "server/service/guarded_reactor.h"
#include "server/service/inference_models.h"
#include "server/service/inference_stream_reactor.h"
#include "server/service/inference_tensors.h"
#include "server/service/raw_message.h"

namespace vidclf::service {
namespace {

constexpr char kModelInfer[] = "ModelInfer";

// Serves a unary call of `method`: its request parsed, `answer` filling the response and naming
// the served model it concerns (left "unknown" for none), the call recorded and finished.
template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* ServeUnary(ServerMetrics& metrics, grpc::CallbackServerContext* context,
                                     absl::string_view method, const grpc::ByteBuffer& bytes,
                                     grpc::ByteBuffer* out, Answer answer) {
  const Clock::time_point start = Clock::now();
  Request request;
  Response response;
  std::string model = "unknown";
  absl::Status status = ParseRequest(bytes, &request);
  if (status.ok()) {
    status = GuardedAnswer(method, [&] { return answer(request, &response, &model); });
  }
  return AnswerUnaryCall(metrics, context, method, model, SecondsSince(start), response, status,
                         out);
}

// One ModelInfer: its request parsed and submitted to the engine, the engine's answer converted
// to the protocol's tensors; cancelled in the engine when gRPC cancels the call.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(const ClassifySubmitter* submitter, grpc::CallbackServerContext* context,
               const grpc::ByteBuffer& request, grpc::ByteBuffer* response)
      : response_(response), call_(context->deadline()) {
    const Clock::time_point start = Clock::now();
    absl::Status status = ParseRequest(request, &request_);
    absl::StatusOr<InferRequestParts> parts =
        status.ok() ? ParseInferRequest(request_) : absl::StatusOr<InferRequestParts>(status);
    if (!parts.ok()) {
      Finish(submitter->Refuse(kModelInfer, context->peer(), nullptr, start, parts.status()));
      return;
    }
    parts_ = *std::move(parts);
    status = FindServedModel(*submitter->engine().repository(), request_.model_name(),
                             request_.model_version())
                 .status();
    absl::StatusOr<engine::ClassifyInput> input =
        status.ok() ? InputFromSettings(parts_.settings, context->deadline())
                    : absl::StatusOr<engine::ClassifyInput>(status);
    if (!input.ok()) {
      Finish(
          submitter->Refuse(kModelInfer, context->peer(), &parts_.settings, start, input.status()));
      return;
    }
    // request_ and parts_ live until the call is done.
    input->source = parts_.settings.uri().empty() ? media::VideoSource::Bytes(parts_.video())
                                                  : media::VideoSource::Uri(parts_.settings.uri());
    call_.Adopt(submitter->Submit(kModelInfer, context->peer(), *std::move(input), start, &answer_,
                                  [this](const grpc::Status& status) { Answer(status); }));
  }

  void OnCancel() override { call_.Cancel(); }
  void OnDone() override { delete this; }

 private:
  // The engine's answer, once.
  void Answer(const grpc::Status& status) {
    if (status.ok()) {
      *response_ = SerializeMessage(InferResponseOf(request_.id(), parts_.outputs, answer_));
    }
    Finish(status);
  }

  grpc::ByteBuffer* const response_;
  inference::ModelInferRequest request_;
  InferRequestParts parts_;
  vidclf::v1::ClassifyResponse answer_;
  CancellableCall call_;
};

}  // namespace

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return ServeUnary<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      *metrics_, context, "ServerLive", *request, response,
      [](const auto&, inference::ServerLiveResponse* live, std::string*) {
        live->set_live(true);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return ServeUnary<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      *metrics_, context, "ServerReady", *request, response,
      [this](const auto&, inference::ServerReadyResponse* ready, std::string*) {
        ready->set_ready(!engine_->draining());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return ServeUnary<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      *metrics_, context, "ModelReady", *request, response,
      [this](const inference::ModelReadyRequest& asked, inference::ModelReadyResponse* ready,
             std::string* model) {
        // A model not served is not ready: an answer, not an error, as probes expect.
        const absl::StatusOr<const engine::ModelRepository::Entry*> entry =
            FindServedModel(*engine_->repository(), asked.name(), asked.version());
        if (entry.ok()) *model = (*entry)->model->config().name;
        ready->set_ready(entry.ok() && !engine_->draining());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(grpc::CallbackServerContext* context,
                                                           const grpc::ByteBuffer* request,
                                                           grpc::ByteBuffer* response) {
  return ServeUnary<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      *metrics_, context, "ServerMetadata", *request, response,
      [](const auto&, inference::ServerMetadataResponse* metadata, std::string*) {
        metadata->set_name("vidclf");
        metadata->set_version(VIDCLF_VERSION);
        // The protocol's extensions served: request and response parameters, model
        // configuration, statistics, sequences (ModelStreamInfer).
        for (const char* extension :
             {"parameters", "model_configuration", "statistics", "sequence"}) {
          metadata->add_extensions(extension);
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  return ServeUnary<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      *metrics_, context, "ModelMetadata", *request, response,
      [this](const inference::ModelMetadataRequest& asked,
             inference::ModelMetadataResponse* metadata, std::string* model) {
        const absl::StatusOr<const engine::ModelRepository::Entry*> entry =
            FindServedModel(*engine_->repository(), asked.name(), asked.version());
        if (!entry.ok()) return entry.status();
        *model = (*entry)->model->config().name;
        *metadata = ModelMetadataOf(**entry);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return NewGuardedReactor<grpc::ServerUnaryReactor>(
      "ModelInfer", [&] { return new InferReactor(&submitter_, context, *request, response); });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(
    grpc::CallbackServerContext* context) {
  return NewGuardedReactor<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
      "ModelStreamInfer", [&] { return NewInferenceStreamReactor(engine_, metrics_, context); });
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return ServeUnary<inference::ModelConfigRequest, inference::ModelConfigResponse>(
      *metrics_, context, "ModelConfig", *request, response,
      [this](const inference::ModelConfigRequest& asked, inference::ModelConfigResponse* answer,
             std::string* model) {
        const absl::StatusOr<const engine::ModelRepository::Entry*> entry =
            FindServedModel(*engine_->repository(), asked.name(), asked.version());
        if (!entry.ok()) return entry.status();
        *model = (*entry)->model->config().name;
        *answer->mutable_config() =
            ModelConfigOf(**entry, engine_->options().batching.max_queue_delay);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return ServeUnary<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>(
      *metrics_, context, "ModelStatistics", *request, response,
      [this](const inference::ModelStatisticsRequest& asked,
             inference::ModelStatisticsResponse* answer, std::string* model) {
        const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
        if (asked.name().empty()) {
          for (const auto& [name, entry] : repository->entries()) {
            *answer->add_model_stats() =
                ModelStatisticsOf(entry, metrics_->InferenceTotalsOf(name));
          }
          return absl::OkStatus();
        }
        const absl::StatusOr<const engine::ModelRepository::Entry*> entry =
            FindServedModel(*repository, asked.name(), asked.version());
        if (!entry.ok()) return entry.status();
        *model = (*entry)->model->config().name;
        *answer->add_model_stats() =
            ModelStatisticsOf(**entry, metrics_->InferenceTotalsOf(*model));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return ServeUnary<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>(
      *metrics_, context, "RepositoryIndex", *request, response,
      [this](const auto&, inference::RepositoryIndexResponse* index, std::string*) {
        // `ready` filters nothing: every model served is ready.
        *index = RepositoryIndexOf(*engine_->repository());
        return absl::OkStatus();
      });
}

}  // namespace vidclf::service
