#include "server/service/stream_reactor.h"

#include <utility>

#include "server/service/feed_reactor.h"

namespace vidclf::service {
namespace {

using vidclf::v1::StreamClassifyRequest;
using vidclf::v1::StreamPrediction;

class StreamReactor final : public FeedReactor<StreamClassifyRequest, StreamPrediction> {
 public:
  StreamReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
                grpc::CallbackServerContext* context)
      : FeedReactor("StreamClassify", "StreamConfig", engine, metrics, context) {}

 private:
  absl::StatusOr<engine::StreamOptions> OptionsFromFirst(
      const StreamClassifyRequest& first) override {
    if (!first.has_config()) {
      return absl::InvalidArgumentError("StreamClassify's first message must be a StreamConfig");
    }
    return StreamOptionsFromConfig(first.config());
  }

  absl::Status Push(engine::StreamSession& session, StreamClassifyRequest& request,
                    bool* room) override {
    switch (request.message_case()) {
      case StreamClassifyRequest::kChunk:
        return session.PushBytes(request.chunk(), room);
      case StreamClassifyRequest::kFrame:
        return session.PushPicture(std::move(*request.mutable_frame()->mutable_data()),
                                   request.frame().timestamp_seconds(), room);
      case StreamClassifyRequest::kConfig:
        return absl::InvalidArgumentError(
            "StreamClassify takes a StreamConfig in its first message only; a later one had one");
      default:
        return absl::OkStatus();  // an empty message: nothing to feed
    }
  }
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context) {
  return new StreamReactor(engine, metrics, context);
}

}  // namespace vidclf::service
