#include "server/service/stream_reactor.h"

#include <memory>
#include <mutex>
#include <utility>

#include "server/service/raw_message.h"
#include "server/service/stream_call.h"

namespace vidclf::service {
namespace {

using vidclf::v1::StreamClassifyRequest;
using vidclf::v1::StreamPrediction;

constexpr char kStreamMethod[] = "StreamClassify";

class StreamReactor final
    : public StreamCall<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                        StreamPrediction> {
 public:
  StreamReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
                grpc::CallbackServerContext* context)
      : StreamCall(kStreamMethod, metrics, context), engine_(engine) {
    // The stream counts against --max-streams from here, before its config arrives.
    absl::StatusOr<std::shared_ptr<engine::Reservation>> reservation =
        engine->ReserveStream([this](const absl::Status& status) { FinishEarly(status); });
    if (!reservation.ok()) {
      FinishEarly(reservation.status());
      return;
    }
    reservation_ = *std::move(reservation);
    StartRead(&buffer_);
  }

  void OnDone() override {
    if (reservation_ != nullptr) reservation_->Close();  // its on_idle refers to this
    StreamCall::OnDone();
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<engine::StreamSession> session;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session = session_;
    }
    if (!ok) {  // the client ended its feed, or the call broke (then OnCancel says so)
      if (session != nullptr) {
        session->FinishInput();
      } else {
        FinishEarly(context_->IsCancelled()
                        ? absl::CancelledError("the stream was cancelled")
                        : absl::InvalidArgumentError("the stream ended before its StreamConfig"));
      }
      return;
    }
    if (absl::Status parsed = ParseMessage(&buffer_, &request_); !parsed.ok()) {
      if (session != nullptr) {
        session->Cancel(parsed);  // its end finishes the call
      } else {
        FinishEarly(parsed);
      }
      return;
    }
    if (session == nullptr) {
      Open();
      return;
    }
    bool room = true;
    absl::Status status;
    switch (request_.message_case()) {
      case StreamClassifyRequest::kChunk:
        status = session->PushBytes(request_.chunk(), &room);
        break;
      case StreamClassifyRequest::kFrame:
        status = session->PushPicture(std::move(*request_.mutable_frame()->mutable_data()),
                                      request_.frame().timestamp_seconds(), &room);
        break;
      case StreamClassifyRequest::kConfig:
        status = absl::InvalidArgumentError(
            "StreamClassify takes a StreamConfig in its first message only; a later one had one");
        break;
      default:
        break;  // an empty message: nothing to feed
    }
    if (!status.ok()) {
      session->Cancel(status);  // its end finishes the call
      return;
    }
    if (room) {
      ReadNext();
    } else {
      session->CallWhenRoom([this] { ReadNext(); });
    }
  }

 private:
  void Open() {
    absl::StatusOr<engine::StreamOptions> options =
        request_.has_config()
            ? StreamOptionsFromConfig(request_.config())
            : absl::InvalidArgumentError("StreamClassify's first message must be a StreamConfig");
    if (!Adopt(options.ok() ? engine_->OpenStream(*options, this, reservation_)
                            : options.status())) {
      return;
    }
    ReadNext();
  }

  void ReadNext() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!finished_) StartRead(&buffer_);
  }

  engine::ClassifyEngine* const engine_;
  std::shared_ptr<engine::Reservation> reservation_;  // the stream's place until it opens
  grpc::ByteBuffer buffer_;                           // the message being read
  StreamClassifyRequest request_;                     // and parsed
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context) {
  return new StreamReactor(engine, metrics, context);
}

}  // namespace vidclf::service
