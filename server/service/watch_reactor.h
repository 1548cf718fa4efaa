// The WatchSource RPC: the server pulls a live source from an allowed URI and streams
// predictions and source events back (see stream_call.h for how they are written).
#ifndef VIDCLF_SERVER_SERVICE_WATCH_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_WATCH_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

// A reactor for one WatchSource call; it deletes itself when the call is done. `engine` and
// `metrics` must outlive it.
// Writes WatchSourceResponse messages, serialized (raw_message.h).
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewWatchReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context,
    const vidclf::v1::WatchSourceRequest& request);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_WATCH_REACTOR_H_
