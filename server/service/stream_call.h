// What the live-stream and segments RPCs share: a gRPC call that an engine stream session
// answers.
//
// Writing follows the client: one message is in flight. Of the predictions waiting behind it,
// only the newest is kept, and the next one sent says how many were dropped, so that a slow
// reader gets the latest prediction rather than a growing backlog; the segment events of a
// dropped prediction come with the next one. A segments call drops nothing: the windows and
// events waiting go out together in the next message. Source events are few and each says
// something the client must hear: they wait in order and are never dropped.
#ifndef VIDCLF_SERVER_SERVICE_STREAM_CALL_H_
#define VIDCLF_SERVER_SERVICE_STREAM_CALL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "server/engine/stream_session.h"
#include "server/metrics.h"
#include "server/service/finished_call.h"
#include "server/service/grpc_status.h"
#include "server/service/raw_message.h"
#include "server/service/stream_messages.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::service {

// How each RPC's response carries a prediction and an event.
inline vidclf::v1::StreamPrediction* PredictionOf(vidclf::v1::StreamPrediction* response) {
  return response;
}
inline vidclf::v1::StreamPrediction* PredictionOf(vidclf::v1::WatchSourceResponse* response) {
  return response->has_prediction() ? response->mutable_prediction() : nullptr;
}
inline vidclf::v1::StreamPrediction* PredictionOf(
    vidclf::v1::ClassifySegmentsResponse* /*response*/) {
  return nullptr;
}
void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::StreamPrediction* response);
void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::WatchSourceResponse* response);
void Wrap(vidclf::v1::SourceEvent event, vidclf::v1::WatchSourceResponse* response);
// A prediction with labels is a window; its events go with it.
void Wrap(vidclf::v1::StreamPrediction prediction, vidclf::v1::ClassifySegmentsResponse* response);

// A message waiting to be written is replaced by a newer one: folds what of `older` must not be
// lost into `newer`, and says whether a prediction was dropped.
bool Coalesce(vidclf::v1::StreamPrediction* older, vidclf::v1::StreamPrediction* newer);
bool Coalesce(vidclf::v1::WatchSourceResponse* older, vidclf::v1::WatchSourceResponse* newer);
bool Coalesce(vidclf::v1::ClassifySegmentsResponse* older,
              vidclf::v1::ClassifySegmentsResponse* newer);

// `Reactor` is grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> or
// grpc::ServerWriteReactor<grpc::ByteBuffer>: messages of type `Response` go out serialized
// (raw_message.h). The reactor deletes itself when the call is done; the derived class opens the
// session and sets session_ (under mutex_).
template <typename Reactor, typename Response>
class StreamCall : public Reactor, public engine::StreamListener {
 public:
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    // The call broke: OnCancel ends the session, and nothing more can be sent; the call must
    // still be finished once the session has ended.
    if (!ok) {
      waiting_events_.clear();
      waiting_prediction_.reset();
    }
    if (!waiting_events_.empty()) {
      Outgoing next = std::move(waiting_events_.front());
      waiting_events_.pop_front();
      Write(std::move(next));
    } else if (waiting_prediction_.has_value()) {
      Outgoing next = *std::move(waiting_prediction_);
      waiting_prediction_.reset();
      Write(std::move(next));
    } else if (end_status_.has_value()) {
      FinishLocked(*end_status_);
    }
  }

  void OnCancel() override {
    std::shared_ptr<engine::StreamSession> session;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session = session_;
    }
    if (session == nullptr) return;
    if (std::chrono::system_clock::now() >= context_->deadline()) {
      session->Cancel(absl::DeadlineExceededError("the call's deadline passed"));
    } else {
      session->Cancel(absl::CancelledError("the client cancelled the stream"));
    }
  }

  void OnDone() override { delete this; }

  // engine::StreamListener.
  void OnPrediction(engine::StreamPrediction prediction) override {
    Outgoing message;
    Wrap(ToMessage(prediction), &message.response);
    message.newest_arrival = prediction.newest_arrival;
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    if (!writing_) {
      Write(std::move(message));
      return;
    }
    if (waiting_prediction_.has_value() &&
        Coalesce(&waiting_prediction_->response, &message.response)) {
      ++dropped_;
      metrics_->RecordDroppedPredictions(1);
    }
    waiting_prediction_ = std::move(message);
  }

  void OnSourceEvent(const engine::SourceEvent& event) override {
    if constexpr (std::is_same_v<Response, vidclf::v1::WatchSourceResponse>) {
      Outgoing message;
      Wrap(ToMessage(event), &message.response);
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      if (writing_) {
        waiting_events_.push_back(std::move(message));
      } else {
        Write(std::move(message));
      }
    }
  }

  void OnEnd(const absl::Status& status) override {
    std::lock_guard<std::mutex> lock(mutex_);
    end_status_ = status;
    if (!writing_) FinishLocked(status);
  }

 protected:
  using Clock = std::chrono::steady_clock;

  StreamCall(const char* method, ServerMetrics* metrics, grpc::CallbackServerContext* context)
      : method_(method), metrics_(metrics), context_(context), start_(Clock::now()) {}

  // Takes the session the engine opened for this call; false, with the call finished with the
  // engine's refusal, when it opened none.
  bool Adopt(absl::StatusOr<std::shared_ptr<engine::StreamSession>> session) {
    if (!session.ok()) {
      FinishEarly(session.status());
      return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    session_ = *std::move(session);
    model_label_ = session_->model_name();
    return true;
  }

  void FinishEarly(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    FinishLocked(status);
  }

  // Ends the call once; `mutex_` held.
  void FinishLocked(const absl::Status& status) {
    if (finished_) return;
    finished_ = true;
    RecordFinishedCall(*metrics_, method_, model_label_, status,
                       std::chrono::duration<double>(Clock::now() - start_).count(),
                       context_->peer());
    this->Finish(ToGrpcStatus(status));
  }

  const char* const method_;
  ServerMetrics* const metrics_;
  grpc::CallbackServerContext* const context_;
  const Clock::time_point start_;

  // Guards what follows; held while starting a read, a write or the finish, as gRPC's callback
  // examples do, so that none starts after Finish.
  std::mutex mutex_;
  std::shared_ptr<engine::StreamSession> session_;
  std::string model_label_ = "unknown";
  bool finished_ = false;

 private:
  // A message on its way out, and for a prediction when its newest frame arrived.
  struct Outgoing {
    Response response;
    Clock::time_point newest_arrival;
  };

  // Hands `outgoing` to gRPC, stamping a prediction's latency and the predictions dropped
  // before it. `mutex_` held.
  void Write(Outgoing outgoing) {
    response_ = std::move(outgoing.response);
    if (vidclf::v1::StreamPrediction* prediction = PredictionOf(&response_)) {
      const double latency =
          std::chrono::duration<double>(Clock::now() - outgoing.newest_arrival).count();
      prediction->set_latency_ms(1e3 * latency);
      prediction->set_dropped_before(dropped_);
      dropped_ = 0;
      metrics_->RecordStreamUpdate(latency);
    }
    writing_ = true;
    wire_ = SerializeMessage(response_);
    this->StartWrite(&wire_);
  }

  Response response_;      // the message being written
  grpc::ByteBuffer wire_;  // and its bytes
  bool writing_ = false;
  std::deque<Outgoing> waiting_events_;
  std::optional<Outgoing> waiting_prediction_;
  uint32_t dropped_ = 0;
  std::optional<absl::Status> end_status_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_STREAM_CALL_H_
