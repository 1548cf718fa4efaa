// The ClassifySegments RPCs: a whole video (its bytes, or a URI the server pulls) or an upload in
// chunks, answered window by window with the segments merged from them, as an engine stream
// session in window mode computes them (see stream_call.h for how they are written).
#ifndef VIDCLF_SERVER_SERVICE_SEGMENTS_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_SEGMENTS_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {

// The session a request's settings ask for, without its source: sampling (4 frames/s unless
// said otherwise), windows and segments. INVALID_ARGUMENT naming the field for settings that
// cannot be used.
absl::StatusOr<engine::StreamOptions> SegmentsOptionsFrom(
    const vidclf::v1::ClassifySegmentsRequest& settings);

// Reactors for one call each; they delete themselves when the call is done. `engine` and
// `metrics` must outlive them. They write ClassifySegmentsResponse messages, serialized
// (raw_message.h); the upload reads ClassifySegmentsUploadRequest ones.
grpc::ServerWriteReactor<grpc::ByteBuffer>* NewSegmentsReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context,
    vidclf::v1::ClassifySegmentsRequest request);
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewSegmentsUploadReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context);

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_SEGMENTS_REACTOR_H_
