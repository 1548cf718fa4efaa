// The vidclf.v1.VideoClassifier gRPC service: a thin adapter over the engine.
//
// "RPC service implementations remain stateless and perform all lookups of models via the core"
// (TF Serving's rule, ours too): each RPC converts its request, submits it to the engine, converts
// the result and status once, and records metrics. No decoding or model code lives here.
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_

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

 private:
  engine::ClassifyEngine* const engine_;
  const engine::ModelRepository* const repository_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
