#include "server/service/watch_reactor.h"

#include <memory>
#include <utility>

#include "server/service/stream_call.h"

namespace vidclf::service {
namespace {

using vidclf::v1::WatchSourceRequest;
using vidclf::v1::WatchSourceResponse;

constexpr char kWatchMethod[] = "WatchSource";

class WatchReactor final
    : public StreamCall<grpc::ServerWriteReactor<grpc::ByteBuffer>, WatchSourceResponse> {
 public:
  WatchReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
               grpc::CallbackServerContext* context, const WatchSourceRequest& request)
      : StreamCall(kWatchMethod, metrics, context) {
    engine::StreamOptions options = HeadOptionsFromConfig(request.config());
    options.input = engine::StreamOptions::Input::kUri;
    options.uri = request.uri();
    if (request.has_max_reconnects())
      options.max_reconnects = CappedToInt(request.max_reconnects());
    options.input_options.insert(request.input_options().begin(), request.input_options().end());
    Adopt(engine->OpenStream(std::move(options), this));
  }
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewWatchReactor(engine::ClassifyEngine* engine,
                                                            ServerMetrics* metrics,
                                                            grpc::CallbackServerContext* context,
                                                            const WatchSourceRequest& request) {
  return new WatchReactor(engine, metrics, context, request);
}

}  // namespace vidclf::service
