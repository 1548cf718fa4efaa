// A bidirectional call that feeds an engine stream session: its first message says what to
// open, the later ones bring the input (container chunks, pictures), and the session's answers
// are written back (stream_call.h). StreamClassify and ClassifySegmentsUpload are two of them.
//
// Reading follows the engine: the next message is read only while the session has room, so a
// client that sends faster than the server decodes is slowed down by gRPC's flow control rather
// than buffered without bound.
#ifndef VIDCLF_SERVER_SERVICE_FEED_REACTOR_H_
#define VIDCLF_SERVER_SERVICE_FEED_REACTOR_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/engine/classify_engine.h"
#include "server/internal_errors.h"
#include "server/metrics.h"
#include "server/service/raw_message.h"
#include "server/service/stream_call.h"

namespace vidclf::service {

template <typename Request, typename Response>
class FeedReactor
    : public StreamCall<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>, Response> {
  using Call = StreamCall<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>, Response>;

 public:
  void OnDone() override {
    if (reservation_ != nullptr) reservation_->Close();  // its on_idle refers to this
    Call::OnDone();
  }

  // What escapes the handling of a message ends this call with INTERNAL, not the server
  // (server/internal_errors.h); ending it twice is harmless (FinishLocked, the session's Cancel).
  void OnReadDone(bool ok) override {
    try {
      ReadDone(ok);
    } catch (...) {
      ReportInternalError("grpc", this->method_, CurrentExceptionText());
      const absl::Status internal = absl::InternalError(kInternalErrorMessage);
      std::shared_ptr<engine::StreamSession> session;
      {
        std::lock_guard<std::mutex> lock(this->mutex_);
        session = this->session_;
      }
      if (session != nullptr) {
        session->Cancel(internal);
      } else {
        this->FinishEarly(internal);
      }
    }
  }

 private:
  void ReadDone(bool ok) {
    std::shared_ptr<engine::StreamSession> session;
    {
      std::lock_guard<std::mutex> lock(this->mutex_);
      session = this->session_;
    }
    if (!ok) {  // the client ended its input, or the call broke (then OnCancel says so)
      if (session != nullptr) {
        session->FinishInput();
      } else {
        this->FinishEarly(this->context_->IsCancelled()
                              ? absl::CancelledError("the call was cancelled")
                              : absl::InvalidArgumentError(
                                    absl::StrCat("the call ended before its ", first_message_)));
      }
      return;
    }
    if (absl::Status parsed = ParseMessage(&buffer_, &request_); !parsed.ok()) {
      if (session != nullptr) {
        session->Cancel(parsed);  // its end finishes the call
      } else {
        this->FinishEarly(parsed);
      }
      return;
    }
    if (session == nullptr) {
      absl::StatusOr<engine::StreamOptions> options = OptionsFromFirst(request_);
      if (this->Adopt(options.ok() ? engine_->OpenStream(*std::move(options), this, reservation_)
                                   : options.status())) {
        ReadNext();
      }
      return;
    }
    bool room = true;
    if (absl::Status status = Push(*session, request_, &room); !status.ok()) {
      session->Cancel(status);  // its end finishes the call
      return;
    }
    if (room) {
      ReadNext();
    } else {
      session->CallWhenRoom([this] { ReadNext(); });
    }
  }

 protected:
  // `first_message` names what the first message must carry, for errors.
  FeedReactor(const char* method, std::string first_message, engine::ClassifyEngine* engine,
              ServerMetrics* metrics, grpc::CallbackServerContext* context)
      : Call(method, metrics, context), engine_(engine), first_message_(std::move(first_message)) {
    // The call counts against --max-streams from here, before its first message arrives.
    absl::StatusOr<std::shared_ptr<engine::Reservation>> reservation =
        engine->ReserveStream([this](const absl::Status& status) { this->FinishEarly(status); });
    if (!reservation.ok()) {
      this->FinishEarly(reservation.status());
      return;
    }
    reservation_ = *std::move(reservation);
    this->StartRead(&buffer_);
  }

  // What the first message asks the session to be; INVALID_ARGUMENT when it cannot.
  virtual absl::StatusOr<engine::StreamOptions> OptionsFromFirst(const Request& first) = 0;
  // Hands a later message's input to `session`, saying whether there is room for more at once.
  virtual absl::Status Push(engine::StreamSession& session, Request& request, bool* room) = 0;

 private:
  void ReadNext() {
    std::lock_guard<std::mutex> lock(this->mutex_);
    if (!this->finished_) this->StartRead(&buffer_);
  }

  engine::ClassifyEngine* const engine_;
  const std::string first_message_;
  std::shared_ptr<engine::Reservation> reservation_;  // the call's place until it opens
  grpc::ByteBuffer buffer_;                           // the message being read
  Request request_;                                   // and parsed
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_FEED_REACTOR_H_
