// inference.GRPCInferenceService, the Open Inference Protocol (KServe v2) over gRPC: a second
// front door to the same engine as vidclf.v1, for Triton's and KServe's clients. ModelStreamInfer's
// live feeds are in inference_stream_reactor.h. ModelInfer is
// submitted as vidclf.v1's Classify is (classify_submission.h): the same admission, deadlines,
// cancellation, drain and metrics; its tensors are converted in inference_tensors.h. Tokens and
// the drain's refusals apply on a call's headers (security/call_gate.h), ServerLive, ServerReady
// and ModelReady being open as health checks are.
#ifndef VIDCLF_SERVER_SERVICE_INFERENCE_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_INFERENCE_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "inference/grpc_service.grpc.pb.h"
#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "server/service/classify_submission.h"

namespace vidclf::service {

using RawInferenceService = inference::GRPCInferenceService::WithRawCallbackMethod_ServerLive<
    inference::GRPCInferenceService::WithRawCallbackMethod_ServerReady<
        inference::GRPCInferenceService::WithRawCallbackMethod_ModelReady<
            inference::GRPCInferenceService::WithRawCallbackMethod_ServerMetadata<
                inference::GRPCInferenceService::WithRawCallbackMethod_ModelMetadata<
                    inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
                        inference::GRPCInferenceService::WithRawCallbackMethod_ModelStreamInfer<
                            inference::GRPCInferenceService::WithRawCallbackMethod_ModelConfig<
                                inference::GRPCInferenceService::
                                    WithRawCallbackMethod_ModelStatistics<
                                        inference::GRPCInferenceService::
                                            WithRawCallbackMethod_RepositoryIndex<
                                                inference::GRPCInferenceService::Service>>>>>>>>>>;

class InferenceService final : public RawInferenceService {
 public:
  // Both must outlive the service.
  InferenceService(engine::ClassifyEngine* engine, ServerMetrics* metrics)
      : engine_(engine), metrics_(metrics), submitter_(engine, metrics) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;

 private:
  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
  const ClassifySubmitter submitter_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_INFERENCE_SERVICE_H_
