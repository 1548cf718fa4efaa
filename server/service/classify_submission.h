// What the two whole-video RPCs, Classify and ClassifyUpload, share: a request's settings as the
// engine's input, the engine's result as a response, and a submission to the engine that records
// the call's metrics once it is answered.
#ifndef VIDCLF_SERVER_SERVICE_CLASSIFY_SUBMISSION_H_
#define VIDCLF_SERVER_SERVICE_CLASSIFY_SUBMISSION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/classify_engine.h"
#include "server/metrics.h"
#include "vidclf/v1/video_classifier.pb.h"

namespace vidclf::service {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start);

// The engine's input for a request's settings and the call's deadline; the caller sets the
// video's source. INVALID_ARGUMENT for bad sampling fields.
absl::StatusOr<engine::ClassifyInput> InputFromSettings(
    const vidclf::v1::ClassifyRequest& request, std::chrono::system_clock::time_point deadline);

// Why the engine abandons a call that gRPC cancelled: its deadline passed, or its client left.
absl::Status CancelledByClient(std::chrono::system_clock::time_point deadline);

// A submitted call's handle as a unary call's reactor holds it: gRPC's OnCancel (the client went
// away, or the deadline passed) may come before Submit has returned the handle, and is passed on
// to the engine as soon as it has. Thread-safe.
class CancellableCall {
 public:
  explicit CancellableCall(std::chrono::system_clock::time_point deadline) : deadline_(deadline) {}

  // Holds `call` (null when the engine refused it); cancels it at once when Cancel came first.
  void Adopt(std::unique_ptr<engine::CallHandle> call);
  // Cancels the call in the engine, now or once adopted.
  void Cancel();

 private:
  const std::chrono::system_clock::time_point deadline_;
  std::mutex mutex_;
  bool cancelled_ = false;
  std::unique_ptr<engine::CallHandle> call_;
};

// Thread-safe; the engine and metrics must outlive it.
class ClassifySubmitter {
 public:
  ClassifySubmitter(engine::ClassifyEngine* engine, ServerMetrics* metrics)
      : engine_(engine), metrics_(metrics) {}

  engine::ClassifyEngine& engine() const { return *engine_; }

  // Holds a place in the engine for a call whose request has not arrived yet. Null when the
  // engine refuses it: `finish` has then ended the call with the refusal, and it does so later
  // if the reservation expires (the idle timeout).
  std::shared_ptr<engine::Reservation> Reserve(
      absl::string_view method, absl::string_view peer, Clock::time_point start,
      std::function<void(const grpc::Status&)> finish) const;

  // Submits `input` to the engine, in the place of `reservation` when there is one. Once it is
  // answered, fills `response`, records the metrics and calls `finish` with the status to end
  // the RPC with (on an engine thread, or on this one when the engine refuses the call at once,
  // and then the handle is null).
  std::unique_ptr<engine::CallHandle> Submit(
      absl::string_view method, absl::string_view peer, engine::ClassifyInput input,
      Clock::time_point start, vidclf::v1::ClassifyResponse* response,
      std::function<void(const grpc::Status&)> finish,
      std::shared_ptr<engine::Reservation> reservation = nullptr) const;

  // Records a call that ended before reaching the engine; returns the status to end it with.
  // `settings` null: the request has not arrived, so neither has the model's name ("unknown" in
  // the metrics).
  grpc::Status Refuse(absl::string_view method, absl::string_view peer,
                      const vidclf::v1::ClassifyRequest* settings, Clock::time_point start,
                      const absl::Status& status) const;

 private:
  // The metrics label for a requested model: the served model's name, never the raw request
  // text (bounded label values).
  std::string ModelLabel(absl::string_view requested_model) const;

  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
};

}  // namespace vidclf::service

#endif  // VIDCLF_SERVER_SERVICE_CLASSIFY_SUBMISSION_H_
