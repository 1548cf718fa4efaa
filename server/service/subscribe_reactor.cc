#include "server/service/subscribe_reactor.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "server/service/finished_call.h"
#include "server/service/grpc_status.h"
#include "server/service/raw_message.h"
#include "server/sources/update_queue.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::service {
namespace {

using Clock = std::chrono::steady_clock;

class SubscribeReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer>,
                               public sources::UpdateSubscriber {
 public:
  SubscribeReactor(sources::SourceRegistry* registry, ServerMetrics* metrics, std::string peer,
                   const grpc::ByteBuffer& request)
      : registry_(registry), metrics_(metrics), peer_(std::move(peer)), start_(Clock::now()) {
    vidclf::v1::SubscribeRequest parsed;
    absl::Status status = ParseRequest(request, &parsed);
    if (status.ok()) {
      status = registry_->CheckRegistered({parsed.names().begin(), parsed.names().end()});
    }
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      FinishLocked(status);
      return;
    }
    registry_->fanout().Add(this, {parsed.names().begin(), parsed.names().end()});
    subscribed_ = true;
  }

  void Offer(const vidclf::v1::SourceUpdate& update, bool droppable) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    const sources::UpdateQueue::Offered offered = waiting_.Offer(update, droppable);
    if (offered == sources::UpdateQueue::Offered::kTooFarBehind) {
      FinishLocked(absl::ResourceExhaustedError(
          "the subscriber fell too far behind: read faster, or subscribe to fewer sources"));
      return;
    }
    if (offered == sources::UpdateQueue::Offered::kReplacedAPrediction) {
      metrics_->RecordDroppedPredictions(1);
    }
    if (!writing_) WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (!ok) {
      FinishLocked(absl::CancelledError("the subscriber went away"));
      return;
    }
    if (end_status_.has_value()) {
      FinishLocked(*end_status_);
    } else {
      WriteNextLocked();
    }
  }

  void OnCancel() override {
    Unsubscribe();
    std::lock_guard<std::mutex> lock(mutex_);
    FinishLocked(absl::CancelledError("the subscriber cancelled"));
  }

  void OnDone() override {
    Unsubscribe();  // after it, nothing is offered: safe to delete
    delete this;
  }

 private:
  void Unsubscribe() {
    if (subscribed_) registry_->fanout().Remove(this);
    subscribed_ = false;
  }

  // Writes what waits, if anything. `mutex_` held.
  void WriteNextLocked() {
    if (!waiting_.Next(&response_)) return;
    writing_ = true;
    wire_ = SerializeMessage(response_);
    StartWrite(&wire_);
  }

  // Ends the call once, when no write is in flight. `mutex_` held.
  void FinishLocked(const absl::Status& status) {
    if (finished_) return;
    if (writing_) {
      end_status_ = status;
      return;
    }
    finished_ = true;
    RecordFinishedCall(*metrics_, "Subscribe", "unknown", status,
                       std::chrono::duration<double>(Clock::now() - start_).count(), peer_);
    Finish(ToGrpcStatus(status));
  }

  sources::SourceRegistry* const registry_;
  ServerMetrics* const metrics_;
  const std::string peer_;
  const Clock::time_point start_;
  // Set in the constructor, read by the gRPC thread that runs OnCancel or OnDone.
  bool subscribed_ = false;

  std::mutex mutex_;
  bool finished_ = false;
  bool writing_ = false;
  std::optional<absl::Status> end_status_;
  sources::UpdateQueue waiting_;
  vidclf::v1::SourceUpdate response_;
  grpc::ByteBuffer wire_;
};

}  // namespace

grpc::ServerWriteReactor<grpc::ByteBuffer>* NewSubscribeReactor(sources::SourceRegistry* registry,
                                                                ServerMetrics* metrics,
                                                                std::string peer,
                                                                const grpc::ByteBuffer& request) {
  return new SubscribeReactor(registry, metrics, std::move(peer), request);
}

}  // namespace vidclf::service
