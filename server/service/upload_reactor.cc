#include "server/service/upload_reactor.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "media/byte_stream.h"
#include "server/internal_errors.h"
#include "server/service/finished_call.h"
#include "server/service/grpc_status.h"
#include "server/service/raw_message.h"

namespace vidclf::service {
namespace {

constexpr char kUploadMethod[] = "ClassifyUpload";

// Reads an upload's messages one at a time and appends their chunks to a ByteStream, which an
// engine worker decodes from the first message on. The engine's answer ends the call, whether or
// not the upload has ended: a sampling with a frame count can be settled before. Every error met
// while reading reaches the decoder through the stream, so once the request is submitted only the
// engine's callback finishes the call (or the idle timeout, before it is).
class UploadReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  UploadReactor(const ClassifySubmitter* submitter, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : submitter_(submitter),
        context_(context),
        response_buffer_(response),
        start_(Clock::now()),
        stream_(std::make_shared<media::ByteStream>(
            submitter->engine().options().decode.max_input_bytes,
            media::ByteStream::Bound::kTotalBytes,
            absl::ToChronoNanoseconds(submitter->engine().options().stream_idle_timeout))) {
    // The upload counts against the engine's bounds from here, before its settings arrive.
    reservation_ = submitter->Reserve(kUploadMethod, context_->peer(), start_,
                                      [this](const grpc::Status& status) { FinishOnce(status); });
    if (reservation_ != nullptr) StartRead(&buffer_);
  }

  // What escapes the handling of a chunk ends this call with INTERNAL, not the server; once in
  // the engine, through the stream, whose abort the engine's answer reports.
  void OnReadDone(bool ok) override {
    if (RunGuarded("grpc", kUploadMethod, [&] { ReadDone(ok); })) return;
    const absl::Status internal = absl::InternalError(kInternalErrorMessage);
    bool in_engine;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_engine = call_ != nullptr;
    }
    stream_->Abort(internal);
    if (!in_engine) FinishOnce(ToGrpcStatus(internal));
  }

  void OnCancel() override {
    const absl::Status reason = CancelledByClient(context_->deadline());
    stream_->Abort(reason);
    std::lock_guard<std::mutex> lock(mutex_);
    if (call_ != nullptr) call_->Cancel(reason);
  }

  void OnDone() override {
    if (reservation_ != nullptr) reservation_->Close();  // its on_idle refers to this
    delete this;
  }

 private:
  void ReadDone(bool ok) {
    if (!ok) {  // the client ended the upload, or the call broke (OnCancel has said so then)
      if (submitted_) {
        stream_->Finish();
      } else {
        FinishOnce(submitter_->Refuse(
            kUploadMethod, context_->peer(), nullptr, start_,
            context_->IsCancelled() ? absl::CancelledError("the upload was cancelled")
                                    : absl::InvalidArgumentError("the upload had no message")));
      }
      return;
    }
    if (absl::Status parsed = ParseMessage(&buffer_, &message_); !parsed.ok()) {
      if (submitted_) {
        stream_->Abort(parsed);  // the engine's answer ends the call
      } else {
        FinishOnce(submitter_->Refuse(kUploadMethod, context_->peer(), nullptr, start_, parsed));
      }
      return;
    }
    if (!submitted_) {
      if (!SubmitSettings()) return;
    } else if (message_.has_settings()) {
      stream_->Abort(absl::InvalidArgumentError(
          "ClassifyUpload takes settings in its first message only; a later one had them"));
      return;
    }
    // Not OK: past a limit, or the engine is done with the stream. Either way its answer, already
    // sent or coming, ends the call, so there is nothing more to read.
    if (!Append(message_.chunk())) return;
    StartRead(&buffer_);
  }

  // Submits the request that the first message describes; false when it is refused, which
  // finishes the call.
  bool SubmitSettings() {
    const vidclf::v1::ClassifyRequest& settings = message_.settings();
    absl::StatusOr<engine::ClassifyInput> input = InputFromSettings(settings, context_->deadline());
    if (input.ok() && settings.source_case() != vidclf::v1::ClassifyRequest::SOURCE_NOT_SET) {
      input = absl::InvalidArgumentError(
          "ClassifyUpload's settings cannot carry a video or a uri: the video comes in chunks");
    }
    if (!input.ok()) {
      FinishOnce(
          submitter_->Refuse(kUploadMethod, context_->peer(), &settings, start_, input.status()));
      return false;
    }
    input->source = media::VideoSource::Stream(stream_);
    submitted_ = true;
    std::unique_ptr<engine::CallHandle> call = submitter_->Submit(
        kUploadMethod, context_->peer(), *std::move(input), start_, &response_,
        [this](const grpc::Status& status) {
          stream_->CloseReader();  // refuse the chunks still coming
          if (status.ok()) *response_buffer_ = SerializeMessage(response_);
          FinishOnce(status);  // last use of this: OnDone may follow at once
        },
        reservation_);
    std::lock_guard<std::mutex> lock(mutex_);
    call_ = std::move(call);
    return true;
  }

  // Appends a chunk within the engine's byte bound; false when the upload is over (refused, past
  // a limit, or the engine is done with it).
  bool Append(const std::string& chunk) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (call_ == nullptr) return false;  // refused at once: already finished
      if (auto status = call_->AddBytes(static_cast<int64_t>(chunk.size())); !status.ok()) {
        stream_->Abort(status);
        return false;
      }
    }
    return stream_->Append(chunk).ok();
  }

  // Ends the call, once: the engine's answer, a refusal and the idle timeout may race.
  void FinishOnce(const grpc::Status& status) {
    if (!finished_.exchange(true)) Finish(status);
  }

  const ClassifySubmitter* const submitter_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_buffer_;
  const Clock::time_point start_;
  const std::shared_ptr<media::ByteStream> stream_;   // shared with the engine's job
  std::shared_ptr<engine::Reservation> reservation_;  // the call's place until it is submitted
  grpc::ByteBuffer buffer_;                           // the message being read
  vidclf::v1::ClassifyUploadRequest message_;         // and parsed
  vidclf::v1::ClassifyResponse response_;
  bool submitted_ = false;  // only read and written in OnReadDone
  std::atomic<bool> finished_{false};
  std::mutex mutex_;                          // guards call_ against OnCancel
  std::unique_ptr<engine::CallHandle> call_;  // null until submitted, or when refused
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* NewUploadReactor(const ClassifySubmitter* submitter,
                                                            grpc::CallbackServerContext* context,
                                                            grpc::ByteBuffer* response) {
  return new UploadReactor(submitter, context, response);
}

}  // namespace vidclf::service
