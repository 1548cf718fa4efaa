// The Sources.Subscribe RPC: every update of the sources asked for, from now on.
//
// One message is in flight at a time; behind it, what waits is kept as sources/update_queue.h
// says. A subscriber too far behind is ended with RESOURCE_EXHAUSTED.
#ifndef VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "server/metrics.h"
#include "server/sources/source_registry.h"

namespace vidclf::service {

// A reactor for one Subscribe call from `peer`; it deletes itself when the call is done.
// `registry` and `metrics` must outlive it.
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewSubscribeReactor(sources::SourceRegistry* registry,
                                                                ServerMetrics* metrics,
                                                                std::string peer,
                                                                const grpc::ByteBuffer& request);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_
