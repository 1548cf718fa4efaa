// Sources.Subscribe over the HTTP door, as server-sent events (the WHATWG HTML standard's
// text/event-stream): each SourceUpdate is an "update" event whose data is its JSON (the
// .proto's field names); a subscriber too far behind gets an "error" event and the stream ends.
// What waits is kept as over gRPC (sources/update_queue.h).
#ifndef VIDCLF_SERVER_HTTP_UPDATE_EVENT_STREAM_H_
#define VIDCLF_SERVER_HTTP_UPDATE_EVENT_STREAM_H_

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "server/http/streamed_body.h"
#include "server/metrics.h"
#include "server/sources/update_fanout.h"
#include "server/sources/update_queue.h"

namespace vidclf::http {

class UpdateEventStream final : public sources::UpdateSubscriber,
                                public std::enable_shared_from_this<UpdateEventStream> {
 public:
  // Subscribes to `names` (empty: every source) and returns the body to answer with; the
  // subscription ends when the body is over. `fanout` and `metrics` must outlive the body.
  static std::shared_ptr<StreamedBody> Start(sources::UpdateFanout* fanout, ServerMetrics* metrics,
                                             std::set<std::string> names);

  UpdateEventStream(sources::UpdateFanout* fanout, ServerMetrics* metrics)
      : fanout_(fanout), metrics_(metrics) {}

  // sources::UpdateSubscriber.
  void Offer(const vidclf::v1::SourceUpdate& update, bool droppable) override;

 private:
  // StreamedBody::Pull: the next event, "" when none waits, nullopt after the last.
  std::optional<std::string> Next();

  sources::UpdateFanout* const fanout_;
  ServerMetrics* const metrics_;
  std::weak_ptr<StreamedBody> body_;

  std::mutex mutex_;
  sources::UpdateQueue waiting_;
  bool too_far_behind_ = false;
  bool ended_ = false;
};

}  // namespace vidclf::http

#endif  // VIDCLF_SERVER_HTTP_UPDATE_EVENT_STREAM_H_
