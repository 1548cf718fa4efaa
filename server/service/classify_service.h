// The vidclf.v1.VideoClassifier gRPC service: a thin adapter over the engine.
//
// "RPC service implementations remain stateless and perform all lookups of models via the core"
// (TF Serving's rule, ours too): each RPC converts its request, submits it to the engine, converts
// the result and status once, and records metrics. No decoding or model code lives here.
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/engine/classify_engine.h"
#include "server/engine/model_repository.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

class ClassifyService final : public vidclf::v1::VideoClassifier::CallbackService {
 public:
  // All three must outlive the service.
  ClassifyService(engine::ClassifyEngine* engine, const engine::ModelRepository* repository,
                  ServerMetrics* metrics)
      : engine_(engine), repository_(repository), metrics_(metrics) {}

  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const vidclf::v1::ClassifyRequest* request,
                                     vidclf::v1::ClassifyResponse* response) override;

  grpc::ServerReadReactor<vidclf::v1::ClassifyUploadRequest>* ClassifyUpload(
      grpc::CallbackServerContext* context, vidclf::v1::ClassifyResponse* response) override;

 private:
  using Clock = std::chrono::steady_clock;
  class UploadReactor;

  // Queues `input` on the engine. Once it is done, fills `response`, records the metrics and
  // calls `finish` with the status to end the RPC with (on a worker thread, or on this one when
  // the engine refuses the request at once).
  void Submit(absl::string_view method, engine::ClassifyInput input, Clock::time_point start,
              vidclf::v1::ClassifyResponse* response,
              std::function<void(const grpc::Status&)> finish);
  // Records a request that ended before reaching the engine; returns the status to end it with.
  grpc::Status Refuse(absl::string_view method, absl::string_view requested_model,
                      Clock::time_point start, const absl::Status& status);
  // The metrics label for a requested model: the served model's name, never the raw request
  // text (bounded label values).
  std::string ModelLabel(absl::string_view requested_model) const;

  engine::ClassifyEngine* const engine_;
  const engine::ModelRepository* const repository_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
