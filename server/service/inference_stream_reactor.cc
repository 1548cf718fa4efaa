#include "server/service/inference_stream_reactor.h"

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "inference/grpc_service.pb.h"
#include "server/internal_errors.h"
#include "server/service/finished_call.h"
#include "server/service/inference_tensors.h"
#include "server/service/raw_message.h"
#include "server/service/stream_call.h"

namespace vidclf::service {
namespace {

using engine::StreamClock;

constexpr char kMethod[] = "ModelStreamInfer";

class InferenceStreamReactor;

// One sequence of the call: its engine session, and the requests that fed it, to name the one
// that brought a prediction's newest frame.
class Sequence final : public engine::StreamListener,
                       public std::enable_shared_from_this<Sequence> {
 public:
  Sequence(InferenceStreamReactor* reactor, std::string key, inference::InferParameter id)
      : key(std::move(key)), sequence_id(std::move(id)), reactor_(reactor) {}

  // engine::StreamListener.
  void OnPrediction(engine::StreamPrediction prediction) override;
  void OnEnd(const absl::Status& status) override;

  // The request `id` feeds the sequence from now: the bytes pushed next arrive after this.
  void NoteRequest(std::string id) {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.emplace_back(StreamClock::now(), std::move(id));
  }

  // The request whose data arrived last at or before `arrival`. Predictions come in order, so
  // the requests before it are forgotten.
  std::string RequestAt(StreamClock::time_point arrival) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (requests_.size() > 1 && requests_[1].first <= arrival) requests_.pop_front();
    return requests_.empty() ? "" : requests_.front().second;
  }

  const std::string key;  // sequence_id as the call's sequences are keyed
  const inference::InferParameter sequence_id;
  // Set under the reactor's mutex once the session opened; read by the reading thread, or under
  // the mutex.
  std::shared_ptr<engine::StreamSession> session;
  std::string model;
  std::string end_request;  // the id of the request that ended it; under the reactor's mutex

 private:
  InferenceStreamReactor* const reactor_;
  std::mutex mutex_;
  std::deque<std::pair<StreamClock::time_point, std::string>> requests_;
};

class InferenceStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  InferenceStreamReactor(engine::ClassifyEngine* engine, ServerMetrics* metrics,
                         grpc::CallbackServerContext* context)
      : engine_(engine), metrics_(metrics), context_(context), start_(Clock::now()) {
    StartRead(&buffer_);
  }

  // What escapes the handling of a request is answered as that request's error (the stream's
  // way), counted and logged; the stream reads on.
  void OnReadDone(bool ok) override {
    if (RunGuarded("grpc", "ModelStreamInfer", [&] { ReadDone(ok); })) return;
    SendError("", nullptr, absl::InternalError(kInternalErrorMessage));
    if (ok) ReadNext();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (!ok) outgoing_.clear();  // the call broke: OnCancel ends the sequences
    WriteNextLocked();
    MaybeFinishLocked();
  }

  void OnCancel() override {
    // One still opening has no session yet: EndInput cancels it once open.
    std::vector<std::shared_ptr<engine::StreamSession>> sessions;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
      for (const std::shared_ptr<Sequence>& sequence : live_) {
        if (sequence->session != nullptr) sessions.push_back(sequence->session);
      }
    }
    const absl::Status reason = std::chrono::system_clock::now() >= context_->deadline()
                                    ? absl::DeadlineExceededError("the call's deadline passed")
                                    : absl::CancelledError("the client cancelled the stream");
    for (const std::shared_ptr<engine::StreamSession>& session : sessions) session->Cancel(reason);
  }

  void OnDone() override { delete this; }

  // From the sequences, on engine threads.
  void Predicted(const Sequence& sequence, engine::StreamPrediction prediction,
                 std::string request) {
    Outgoing message;
    message.sequence = sequence.key;
    message.sequence_id = sequence.sequence_id;
    message.request = std::move(request);
    message.newest_arrival = prediction.newest_arrival;
    message.prediction = ToMessage(prediction);
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    // Only the newest waiting prediction of a sequence is kept.
    for (Outgoing& waiting : outgoing_) {
      if (waiting.prediction.has_value() && waiting.sequence == message.sequence) {
        message.dropped_before = waiting.dropped_before + 1;
        waiting = std::move(message);
        metrics_->RecordDroppedPredictions(1);
        return;
      }
    }
    outgoing_.push_back(std::move(message));
    WriteNextLocked();
  }

  void Ended(const std::shared_ptr<Sequence>& sequence, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(sequence);
    const auto open = open_.find(sequence->key);
    if (open != open_.end() && open->second == sequence) open_.erase(open);
    Outgoing message;
    inference::ModelInferResponse* response = message.response.mutable_infer_response();
    response->set_id(sequence->end_request);
    (*response->mutable_parameters())["sequence_id"] = sequence->sequence_id;
    if (status.ok()) {
      response->set_model_name(sequence->model);
      (*response->mutable_parameters())["sequence_end"].set_bool_param(true);
    } else {
      message.response.set_error_message(ErrorMessage(*sequence, status));
    }
    if (!finished_) outgoing_.push_back(std::move(message));
    WriteNextLocked();
    MaybeFinishLocked();
  }

 private:
  void ReadDone(bool ok) {
    if (!ok) {  // the client ended its requests, or the call broke (then OnCancel says so)
      EndInput();
      return;
    }
    inference::ModelInferRequest request;
    absl::Status status = ParseMessage(&buffer_, &request);
    absl::StatusOr<StreamRequestParts> parts =
        status.ok() ? ParseStreamRequest(request) : absl::StatusOr<StreamRequestParts>(status);
    if (!parts.ok()) {
      SendError(request.id(), nullptr, parts.status());
      ReadNext();
      return;
    }
    absl::StatusOr<std::shared_ptr<Sequence>> sequence = SequenceFor(request, *parts);
    if (!sequence.ok()) {
      SendError(request.id(), &parts->sequence_id, sequence.status());
      ReadNext();
      return;
    }
    Feed(**sequence, request.id(), *parts);
  }

  using Clock = std::chrono::steady_clock;

  // A message on its way out: a prediction, built when it is written (its latency then), or any
  // other response.
  struct Outgoing {
    inference::ModelStreamInferResponse response;
    std::optional<vidclf::v1::StreamPrediction> prediction;
    std::string sequence;  // the key of the prediction's sequence
    inference::InferParameter sequence_id;
    std::string request;
    StreamClock::time_point newest_arrival;
    uint32_t dropped_before = 0;
  };

  static std::string ErrorMessage(const Sequence& sequence, const absl::Status& status) {
    return absl::StrCat("sequence ", sequence.key, ": ", absl::StatusCodeToString(status.code()),
                        ": ", status.message());
  }

  // The sequence that `request` feeds: opened now when it starts one.
  absl::StatusOr<std::shared_ptr<Sequence>> SequenceFor(const inference::ModelInferRequest& request,
                                                        const StreamRequestParts& parts) {
    std::shared_ptr<Sequence> sequence;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto open = open_.find(parts.sequence);
      if (open != open_.end()) sequence = open->second;
    }
    if (!parts.start) {
      if (sequence == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sequence ", parts.sequence,
            " is not open: its first request sets sequence_start (it may have ended, or been "
            "ended by an error or --stream-idle-timeout-s)"));
      }
      if (!request.model_name().empty() && request.model_name() != sequence->model) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", parts.sequence, " runs model ",
                                                       sequence->model,
                                                       ", not the request's model"));
      }
      return sequence;
    }
    if (sequence != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("sequence ", parts.sequence,
                       " is open already: end it (sequence_end) before starting it again"));
    }
    absl::StatusOr<engine::StreamOptions> options = StreamOptionsFromConfig(parts.config);
    if (!options.ok()) return options.status();
    sequence = std::make_shared<Sequence>(this, parts.sequence, parts.sequence_id);
    // Live before the session opens: the engine may end it at once (a drain beginning).
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.insert(sequence);
    }
    absl::StatusOr<std::shared_ptr<engine::StreamSession>> session =
        engine_->OpenStream(*std::move(options), sequence.get());
    std::lock_guard<std::mutex> lock(mutex_);
    if (!session.ok()) {  // the listener is not called then
      live_.erase(sequence);
      return session.status();
    }
    sequence->session = *std::move(session);
    sequence->model = sequence->session->model_name();
    if (model_label_ == "unknown") model_label_ = sequence->model;
    // Fed from now on, unless it has ended already (it then said so in a response).
    if (live_.count(sequence) > 0) open_[parts.sequence] = sequence;
    return sequence;
  }

  // Pushes a request's data into `sequence`, ends it when the request says so, and reads the
  // next request once the sequence has room.
  void Feed(Sequence& sequence, const std::string& request, const StreamRequestParts& parts) {
    engine::StreamSession& session = *sequence.session;
    bool room = true;
    absl::Status status;
    if (parts.data != StreamRequestParts::Data::kNone) sequence.NoteRequest(request);
    if (parts.data == StreamRequestParts::Data::kChunk) {
      status = session.PushBytes(parts.bytes, &room);
    } else if (parts.data == StreamRequestParts::Data::kPicture) {
      status = session.PushPicture(std::string(parts.bytes), parts.timestamp_seconds, &room);
    }
    if (!status.ok() || parts.end) {
      std::lock_guard<std::mutex> lock(mutex_);
      open_.erase(sequence.key);
      sequence.end_request = request;
    }
    if (!status.ok()) {
      session.Cancel(status);  // its end sends the error
    } else if (parts.end) {
      session.FinishInput();
    }
    if (room) {
      ReadNext();
    } else {
      session.CallWhenRoom([this] { ReadNext(); });
    }
  }

  // No more requests: the sequences still open end once their data is answered (or at once,
  // when the call broke), and the call once they all have.
  void EndInput() {
    std::map<std::string, std::shared_ptr<Sequence>> open;
    bool cancelled = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      input_over_ = true;
      open.swap(open_);
      cancelled = cancelled_ || context_->IsCancelled();
      MaybeFinishLocked();
    }
    for (const auto& [key, sequence] : open) {
      if (cancelled) {
        sequence->session->Cancel(absl::CancelledError("the stream was cancelled"));
      } else {
        sequence->session->FinishInput();
      }
    }
  }

  void SendError(const std::string& request, const inference::InferParameter* sequence_id,
                 const absl::Status& status) {
    Outgoing message;
    message.response.set_error_message(
        absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
    message.response.mutable_infer_response()->set_id(request);
    if (sequence_id != nullptr) {
      (*message.response.mutable_infer_response()->mutable_parameters())["sequence_id"] =
          *sequence_id;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    outgoing_.push_back(std::move(message));
    WriteNextLocked();
  }

  void ReadNext() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!finished_ && !input_over_) StartRead(&buffer_);
  }

  // Hands the next message to gRPC, unless one is being written; `mutex_` held.
  void WriteNextLocked() {
    if (writing_ || finished_ || outgoing_.empty()) return;
    Outgoing next = std::move(outgoing_.front());
    outgoing_.pop_front();
    if (next.prediction.has_value()) {
      const double latency =
          std::chrono::duration<double>(StreamClock::now() - next.newest_arrival).count();
      next.prediction->set_latency_ms(1e3 * latency);
      next.prediction->set_dropped_before(next.dropped_before);
      metrics_->RecordStreamUpdate(latency);
      *next.response.mutable_infer_response() =
          StreamResponseOf(*next.prediction, next.request, next.sequence_id);
    }
    writing_ = true;
    wire_ = SerializeMessage(next.response);
    StartWrite(&wire_);
  }

  // Finishes the call once the requests are over, every sequence has ended and every answer
  // has been written; `mutex_` held.
  void MaybeFinishLocked() {
    if (finished_ || !input_over_ || !live_.empty() || writing_ || !outgoing_.empty()) return;
    finished_ = true;
    const absl::Status status =
        cancelled_ ? absl::CancelledError("the stream was cancelled") : absl::OkStatus();
    RecordFinishedCall(*metrics_, kMethod, model_label_, status,
                       std::chrono::duration<double>(Clock::now() - start_).count(),
                       context_->peer());
    Finish(status.ok() ? grpc::Status::OK
                       : grpc::Status(grpc::StatusCode::CANCELLED, std::string(status.message())));
  }

  engine::ClassifyEngine* const engine_;
  ServerMetrics* const metrics_;
  grpc::CallbackServerContext* const context_;
  const Clock::time_point start_;
  grpc::ByteBuffer buffer_;  // the request being read

  // Guards what follows; held while starting a read, a write or the finish, so that none starts
  // after Finish.
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Sequence>> open_;  // taking input, by key
  std::set<std::shared_ptr<Sequence>> live_;               // not yet ended
  std::string model_label_ = "unknown";                    // the first sequence's model
  std::deque<Outgoing> outgoing_;
  grpc::ByteBuffer wire_;  // the response being written
  bool writing_ = false;
  bool input_over_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

void Sequence::OnPrediction(engine::StreamPrediction prediction) {
  std::string request = RequestAt(prediction.newest_arrival);
  reactor_->Predicted(*this, std::move(prediction), std::move(request));
}

void Sequence::OnEnd(const absl::Status& status) {
  // The reactor forgets the sequence here; it lives until this returns.
  const std::shared_ptr<Sequence> self = shared_from_this();
  reactor_->Ended(self, status);
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewInferenceStreamReactor(
    engine::ClassifyEngine* engine, ServerMetrics* metrics, grpc::CallbackServerContext* context) {
  return new InferenceStreamReactor(engine, metrics, context);
}

}  // namespace vidclf::service
