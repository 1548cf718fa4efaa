// The vidclf.v1.VideoClassifier gRPC service: a thin adapter over the engine.
//
// "RPC service implementations remain stateless and perform all lookups of models via the core"
// (TF Serving's rule, ours too): each RPC converts its request, submits it to the engine, converts
// the result and status once, and records metrics. No decoding or model code lives here. A call
// the client cancels, or whose deadline passes, is cancelled in the engine too. Bearer tokens are
// checked before any of this, on a call's headers (security/call_gate.h).
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

class ClassifyService final : public vidclf::v1::VideoClassifier::CallbackService {
 public:
  // Both must outlive the service.
  ClassifyService(engine::ClassifyEngine* engine, ServerMetrics* metrics)
      : engine_(engine), metrics_(metrics) {}

  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const vidclf::v1::ClassifyRequest* request,
                                     vidclf::v1::ClassifyResponse* response) override;

  grpc::ServerReadReactor<vidclf::v1::ClassifyUploadRequest>* ClassifyUpload(
      grpc::CallbackServerContext* context, vidclf::v1::ClassifyResponse* response) override;

  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const vidclf::v1::ListModelsRequest* request,
                                       vidclf::v1::ListModelsResponse* response) override;

  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const vidclf::v1::GetModelRequest* request,
                                     vidclf::v1::ModelInfo* response) override;

  grpc::ServerBidiReactor<vidclf::v1::StreamClassifyRequest, vidclf::v1::StreamPrediction>*
  StreamClassify(grpc::CallbackServerContext* context) override;

  grpc::ServerWriteReactor<vidclf::v1::WatchSourceResponse>* WatchSource(
      grpc::CallbackServerContext* context, const vidclf::v1::WatchSourceRequest* request) override;

 private:
  using Clock = std::chrono::steady_clock;
  class ClassifyReactor;
  class UploadReactor;

  // Submits `input` to the engine, in the place of `reservation` when there is one. Once it is
  // answered, fills `response`, records the metrics and calls `finish` with the status to end
  // the RPC with (on an engine thread, or on this one when the engine refuses the call at once,
  // and then the handle is null).
  std::unique_ptr<engine::CallHandle> Submit(
      absl::string_view method, engine::ClassifyInput input, Clock::time_point start,
      vidclf::v1::ClassifyResponse* response, std::function<void(const grpc::Status&)> finish,
      std::shared_ptr<engine::Reservation> reservation = nullptr);
  // Records a call that ended before reaching the engine; returns the status to end it with.
  grpc::Status Refuse(absl::string_view method, absl::string_view requested_model,
                      Clock::time_point start, const absl::Status& status);
  // The metrics label for a requested model: the served model's name, never the raw request
  // text (bounded label values).
  std::string ModelLabel(absl::string_view requested_model) const;

  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
