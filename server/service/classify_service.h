// The vidclf.v1.VideoClassifier gRPC service: a thin adapter over the engine.
//
// "RPC service implementations remain stateless and perform all lookups of models via the core"
// (TF Serving's rule, ours too): each RPC converts its request, submits it to the engine, converts
// the result and status once, and records metrics. No decoding or model code lives here. A call
// the client cancels, or whose deadline passes, is cancelled in the engine too. Bearer tokens are
// checked before any of this, on a call's headers (security/call_gate.h).
//
// Every method takes and gives bytes and parses them itself (raw_message.h), so that a request
// gRPC cannot parse gets INVALID_ARGUMENT saying so; Classify is served as a generic method, on
// its headers (classify_reactor.h).
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "server/service/classify_reactor.h"
#include "server/service/classify_submission.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

using RawVideoClassifier = vidclf::v1::VideoClassifier::WithGenericMethod_Classify<
    vidclf::v1::VideoClassifier::WithRawCallbackMethod_ClassifyUpload<
        vidclf::v1::VideoClassifier::WithRawCallbackMethod_ListModels<
            vidclf::v1::VideoClassifier::WithRawCallbackMethod_GetModel<
                vidclf::v1::VideoClassifier::WithRawCallbackMethod_StreamClassify<
                    vidclf::v1::VideoClassifier::WithRawCallbackMethod_WatchSource<
                        vidclf::v1::VideoClassifier::WithRawCallbackMethod_ClassifySegments<
                            vidclf::v1::VideoClassifier::
                                WithRawCallbackMethod_ClassifySegmentsUpload<
                                    vidclf::v1::VideoClassifier::Service>>>>>>>>;

class ClassifyService final : public RawVideoClassifier {
 public:
  // Both must outlive the service.
  ClassifyService(engine::ClassifyEngine* engine, ServerMetrics* metrics)
      : engine_(engine), metrics_(metrics), submitter_(engine, metrics), generic_(&submitter_) {}

  // Registers this service and the generic one that serves Classify.
  void Register(grpc::ServerBuilder& builder);

  grpc::ServerReadReactor<grpc::ByteBuffer>* ClassifyUpload(grpc::CallbackServerContext* context,
                                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* StreamClassify(
      grpc::CallbackServerContext* context) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchSource(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ClassifySegments(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ClassifySegmentsUpload(
      grpc::CallbackServerContext* context) override;

 private:
  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
  const ClassifySubmitter submitter_;
  GenericMethods generic_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_SERVICE_H_
