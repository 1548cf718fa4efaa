// The vidclf.v1.Sources gRPC service: a thin adapter over the source registry
// (server/sources/). Each method parses its request, calls the registry, and answers once;
// Subscribe is a reactor of its own (subscribe_reactor.h). Which calls need the admin token is
// the call gate's to check, on the headers (security/call_gate.h).
#ifndef VIDCLF_SERVER_SERVICE_SOURCES_SERVICE_H_
#define VIDCLF_SERVER_SERVICE_SOURCES_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "server/metrics.h"
#include "server/sources/source_registry.h"
#include "vidclf/v1/sources.grpc.pb.h"

namespace vidclf::service {

using RawSources = vidclf::v1::Sources::WithRawCallbackMethod_CreateSource<
    vidclf::v1::Sources::WithRawCallbackMethod_GetSource<
        vidclf::v1::Sources::WithRawCallbackMethod_ListSources<
            vidclf::v1::Sources::WithRawCallbackMethod_UpdateSource<
                vidclf::v1::Sources::WithRawCallbackMethod_DeleteSource<
                    vidclf::v1::Sources::WithRawCallbackMethod_Subscribe<
                        vidclf::v1::Sources::Service>>>>>>;

class SourcesService final : public RawSources {
 public:
  // Both must outlive the service.
  SourcesService(sources::SourceRegistry* registry, ServerMetrics* metrics)
      : registry_(registry), metrics_(metrics) {}

  grpc::ServerUnaryReactor* CreateSource(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetSource(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListSources(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UpdateSource(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteSource(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Subscribe(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;

 private:
  sources::SourceRegistry* const registry_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_SOURCES_SERVICE_H_
