// The Open Inference Protocol's ModelStreamInfer: live feeds as the protocol's sequences, any
// number of them on one call, each an engine stream session as vidclf.v1's StreamClassify has.
//
// A sequence opens with a request that sets sequence_start, feeds on a chunk of container bytes
// (VIDEO) or one encoded picture (IMAGE) per request, and ends with sequence_end. Its predictions
// come as responses whose id is that of the request that brought their newest frame; its end as
// a response with the parameter sequence_end, or, when it failed, one with error_message. A bad
// request is answered with error_message too, and the call goes on (as Triton's decoupled
// streams do). Reading follows the engine: the next request is read once the sequence just fed
// has room. Writing follows the client: of a sequence's predictions waiting to be sent only the
// newest is kept, and it says how many were dropped (dropped_before); errors and ends are never
// dropped.
#ifndef VIDCLF_SERVER_SERVICE_INFERENCE_STREAM_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_INFERENCE_STREAM_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "server/engine/classify_engine.h"
#include "server/metrics.h"

namespace vidclf::service {

// A reactor for one ModelStreamInfer call; it deletes itself when the call is done. `engine` and
// `metrics` must outlive it.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewInferenceStreamReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_INFERENCE_STREAM_REACTOR_H_
