#include "server/http/update_event_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_json.h"

namespace vidclf::http {

std::shared_ptr<StreamedBody> UpdateEventStream::Start(sources::UpdateFanout* fanout,
                                                       ServerMetrics* metrics,
                                                       std::set<std::string> names) {
  auto stream = std::make_shared<UpdateEventStream>(fanout, metrics);
  // A comment first, so that the client sees the stream open at once.
  auto body = std::make_shared<StreamedBody>(
      [stream, opened = false]() mutable -> std::optional<std::string> {
        if (!std::exchange(opened, true)) return std::string(": subscribed\n\n");
        return stream->Next();
      },
      ": keep-alive\n\n");
  stream->body_ = body;
  body->OnClosed([stream] { stream->fanout_->Remove(stream.get()); });
  fanout->Add(stream.get(), std::move(names));
  return body;
}

void UpdateEventStream::Offer(const vidclf::v1::SourceUpdate& update, bool droppable) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (too_far_behind_) return;
    const sources::UpdateQueue::Offered offered = waiting_.Offer(update, droppable);
    too_far_behind_ = offered == sources::UpdateQueue::Offered::kTooFarBehind;
    if (offered == sources::UpdateQueue::Offered::kReplacedAPrediction) {
      metrics_->RecordDroppedPredictions(1);
    }
  }
  if (const auto body = body_.lock()) body->Wake();
}

std::optional<std::string> UpdateEventStream::Next() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return std::nullopt;
  vidclf::v1::SourceUpdate update;
  if (waiting_.Next(&update))
    return absl::StrCat("event: update\ndata: ", ProtoJson(update), "\n\n");
  if (!too_far_behind_) return std::string();
  ended_ = true;
  return std::string(
      "event: error\ndata: {\"error\": \"the subscriber fell too far behind: read faster, or "
      "subscribe to fewer sources\"}\n\n");
}

}  // namespace vidclf::http
