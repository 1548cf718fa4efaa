#include "server/service/classify_reactor.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/internal_errors.h"
#include "server/service/grpc_status.h"
#include "server/service/guarded_reactor.h"
#include "server/service/raw_message.h"
#include "vidclf/v1/video_classifier.grpc.pb.h"

namespace vidclf::service {
namespace {

constexpr char kClassifyMethod[] = "Classify";

// A unary Classify: takes a place in the engine on its headers, reads its one request, submits
// it, and cancels it in the engine when gRPC cancels the call (the client went away, or the
// deadline passed).
class ClassifyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  ClassifyReactor(const ClassifySubmitter* submitter, grpc::GenericCallbackServerContext* context)
      : submitter_(submitter), context_(context), start_(Clock::now()), call_(context->deadline()) {
    // The body's arrival is the call's progress: one that has not arrived within the idle
    // timeout ends the call (ClassifyUpload, whose every chunk is progress, suits slow links).
    reservation_ = submitter->Reserve(kClassifyMethod, context_->peer(), start_,
                                      [this](const grpc::Status& status) { FinishOnce(status); });
    if (reservation_ != nullptr) StartRead(&buffer_);
  }

  // What escapes the handling of the request ends this call with INTERNAL, not the server; once
  // submitted, the engine's answer ends it.
  void OnReadDone(bool ok) override {
    if (!RunGuarded("grpc", kClassifyMethod, [&] { ReadDone(ok); }) && !submitted_) {
      FinishOnce(grpc::Status(grpc::StatusCode::INTERNAL, std::string(kInternalErrorMessage)));
    }
  }

  void OnCancel() override { call_.Cancel(); }

  void OnDone() override {
    if (reservation_ != nullptr) reservation_->Close();  // its on_idle refers to this
    delete this;
  }

 private:
  void ReadDone(bool ok) {
    if (!ok) {
      FinishOnce(submitter_->Refuse(
          kClassifyMethod, context_->peer(), nullptr, start_,
          context_->IsCancelled() ? CancelledByClient(context_->deadline())
                                  : absl::InvalidArgumentError("Classify got no request message")));
      return;
    }
    if (absl::Status parsed = ParseMessage(&buffer_, &request_); !parsed.ok()) {
      FinishOnce(submitter_->Refuse(kClassifyMethod, context_->peer(), nullptr, start_, parsed));
      return;
    }
    absl::StatusOr<engine::ClassifyInput> input = InputFromSettings(request_, context_->deadline());
    if (!input.ok()) {
      FinishOnce(
          submitter_->Refuse(kClassifyMethod, context_->peer(), &request_, start_, input.status()));
      return;
    }
    // request_ lives until the call is done.
    input->source = request_.uri().empty() ? media::VideoSource::Bytes(request_.video())
                                           : media::VideoSource::Uri(request_.uri());
    submitted_ = true;
    call_.Adopt(submitter_->Submit(
        kClassifyMethod, context_->peer(), *std::move(input), start_, &response_,
        [this](const grpc::Status& status) { Answer(status); }, reservation_));
  }

  // The engine's answer: the response and the status in one operation.
  void Answer(const grpc::Status& status) {
    if (!status.ok()) {
      FinishOnce(status);
      return;
    }
    if (finished_.exchange(true)) return;
    buffer_ = SerializeMessage(response_);
    StartWriteAndFinish(&buffer_, grpc::WriteOptions(), status);
  }

  // Ends the call, once: the engine's answer, a refusal and the idle timeout may race.
  void FinishOnce(const grpc::Status& status) {
    if (!finished_.exchange(true)) Finish(status);
  }

  const ClassifySubmitter* const submitter_;
  grpc::GenericCallbackServerContext* const context_;
  const Clock::time_point start_;
  std::shared_ptr<engine::Reservation> reservation_;  // the call's place until it is submitted
  grpc::ByteBuffer buffer_;  // the request as it arrives, then the response as it leaves
  vidclf::v1::ClassifyRequest request_;
  vidclf::v1::ClassifyResponse response_;
  std::atomic<bool> finished_{false};
  bool submitted_ = false;  // read and written on gRPC's read callback only
  CancellableCall call_;
};

}  // namespace

grpc::ServerGenericBidiReactor* GenericMethods::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  if (context->method() ==
      absl::StrCat("/", vidclf::v1::VideoClassifier::service_full_name(), "/", kClassifyMethod)) {
    return NewGuardedReactor<grpc::ServerGenericBidiReactor>(
        kClassifyMethod, [&] { return new ClassifyReactor(submitter_, context); });
  }
  // A method no service has: what gRPC answers itself when no generic service is registered.
  return new FinishedReactor<grpc::ServerGenericBidiReactor>(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                   absl::StrCat("this server has no method ", context->method())));
}

}  // namespace vidclf::service
