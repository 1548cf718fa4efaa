// The Sources.Subscribe RPC: every update of the sources asked for, from now on.
//
// One message is in flight at a time. Behind it wait, in order, the segment events and state
// changes, which are never dropped, and the newest prediction of each source: an older one
// waiting is replaced and counted in the next update's dropped_before. A subscriber 4,096 events
// and state changes behind is ended with RESOURCE_EXHAUSTED, so that memory stays bounded.
#ifndef VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "server/metrics.h"
#include "server/sources/source_registry.h"

namespace vidclf::service {

inline constexpr size_t kMaxWaitingSourceUpdates = 4096;

// A reactor for one Subscribe call from `peer`; it deletes itself when the call is done.
// `registry` and `metrics` must outlive it.
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewSubscribeReactor(sources::SourceRegistry* registry,
                                                                ServerMetrics* metrics,
                                                                std::string peer,
                                                                const grpc::ByteBuffer& request);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_SUBSCRIBE_REACTOR_H_
