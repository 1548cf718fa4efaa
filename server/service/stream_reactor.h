// The StreamClassify RPC: a bidirectional stream adapting a gRPC call to an engine stream session.
//
// Reading follows the engine: the next message is read only while the session has room, so a
// client that sends faster than the server decodes is slowed down by gRPC's flow control rather
// than buffered without bound. Writing follows the client (see stream_call.h).
#ifndef VIDCLF_SERVER_SERVICE_STREAM_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_STREAM_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

// A reactor for one StreamClassify call; it deletes itself when the call is done. `engine` and
// `metrics` must outlive it.
// Reads StreamClassifyRequest messages and writes StreamPrediction ones, as bytes that it parses
// and serializes itself (raw_message.h).
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_STREAM_REACTOR_H_
