#include "server/service/classify_service.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "media/byte_stream.h"
#include "media/frame_sampler.h"
#include "server/service/finished_call.h"
#include "server/service/grpc_status.h"
#include "server/service/model_info.h"
#include "server/service/stream_reactor.h"
#include "server/service/watch_reactor.h"

namespace vidclf::service {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void FillResponse(const engine::ClassifyResult& result, vidclf::v1::ClassifyResponse* response) {
  response->set_model(result.model);
  response->set_model_version(result.model_version);
  for (const auto& [label, score] : result.top_k) {
    vidclf::v1::LabelScore* entry = response->add_top_k();
    entry->set_label(label);
    entry->set_score(score);
  }
  response->set_frames_used(static_cast<uint32_t>(result.frame_timestamps_seconds.size()));
  for (double t : result.frame_timestamps_seconds) response->add_frame_timestamps_seconds(t);
  vidclf::v1::StageTimings* timings = response->mutable_timings();
  timings->set_decode_ms(1e3 * result.decode_seconds);
  timings->set_preprocess_ms(1e3 * result.preprocess_seconds);
  timings->set_embed_ms(1e3 * result.embed_seconds);
  timings->set_head_ms(1e3 * result.head_seconds);
  timings->set_total_ms(1e3 * result.total_seconds);
  timings->set_queue_ms(1e3 * result.queue_seconds);
}

// Why the engine abandons a call that gRPC cancelled.
absl::Status CancelledByClient(const grpc::CallbackServerContext& context) {
  if (std::chrono::system_clock::now() >= context.deadline()) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the client cancelled the call");
}

// The request's sampling fields; unset ones stay at their defaults (num_frames 0: the model's).
absl::StatusOr<media::SamplingOptions> SamplingFromRequest(const vidclf::v1::SamplingOptions& in) {
  media::SamplingOptions sampling;
  if (!in.strategy().empty()) {
    absl::StatusOr<media::SamplingStrategy> strategy = media::ParseSamplingStrategy(in.strategy());
    if (!strategy.ok()) return strategy.status();
    sampling.strategy = *strategy;
  }
  sampling.num_frames = static_cast<int>(std::min<uint32_t>(in.num_frames(), 1 << 20));
  if (in.frames_per_second() != 0) sampling.frames_per_second = in.frames_per_second();
  sampling.stride_frames =
      std::max(1, static_cast<int>(std::min<uint32_t>(in.stride_frames(), 1 << 20)));
  sampling.start_seconds = in.start_seconds();
  sampling.snap_to_keyframes = in.snap_to_keyframes();
  sampling.skip_loop_filter = in.skip_loop_filter();
  if (auto status = media::ValidateSamplingOptions(sampling); !status.ok()) return status;
  return sampling;
}

// The engine's input for a request's settings; the caller sets the video's source.
absl::StatusOr<engine::ClassifyInput> InputFromSettings(
    const vidclf::v1::ClassifyRequest& request, const grpc::CallbackServerContext& context) {
  engine::ClassifyInput input;
  input.model = request.model();
  input.top_k = static_cast<int>(std::min<uint32_t>(request.top_k(), 1 << 20));
  input.attention = request.attention();
  input.deadline = absl::FromChrono(context.deadline());
  absl::StatusOr<media::SamplingOptions> sampling = SamplingFromRequest(request.sampling());
  if (!sampling.ok()) return sampling.status();
  input.sampling = *sampling;
  return input;
}

}  // namespace

// Reads an upload's messages one at a time and appends their chunks to a ByteStream, which an
// engine worker decodes from the first message on. The engine's answer ends the call, whether or
// not the upload has ended: a sampling with a frame count can be settled before. Every error met
// while reading reaches the decoder through the stream, so once the request is submitted only the
// engine's callback calls Finish.
class ClassifyService::UploadReactor final
    : public grpc::ServerReadReactor<vidclf::v1::ClassifyUploadRequest> {
 public:
  UploadReactor(ClassifyService* service, grpc::CallbackServerContext* context,
                vidclf::v1::ClassifyResponse* response)
      : service_(service),
        context_(context),
        response_(response),
        start_(Clock::now()),
        stream_(std::make_shared<media::ByteStream>(
            service->engine_->options().decode.max_input_bytes,
            media::ByteStream::Bound::kTotalBytes,
            absl::ToChronoNanoseconds(service->engine_->options().stream_idle_timeout))) {
    // The upload counts against the engine's bounds from here, before its settings arrive.
    absl::StatusOr<std::shared_ptr<engine::Reservation>> reservation =
        service->engine_->ReserveCall([this](const absl::Status& status) {
          RecordFinishedCall(*service_->metrics_, kMethod, "unknown", status, SecondsSince(start_));
          FinishOnce(ToGrpcStatus(status));
        });
    if (!reservation.ok()) {
      FinishOnce(service->Refuse(kMethod, "", start_, reservation.status()));
      return;
    }
    reservation_ = *std::move(reservation);
    StartRead(&message_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client ended the upload, or the call broke (OnCancel has said so then)
      if (submitted_) {
        stream_->Finish();
      } else {
        FinishOnce(service_->Refuse(kMethod, "", start_,
                                    context_->IsCancelled()
                                        ? absl::CancelledError("the upload was cancelled")
                                        : absl::InvalidArgumentError("the upload had no message")));
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
    StartRead(&message_);
  }

  void OnCancel() override {
    const absl::Status reason = CancelledByClient(*context_);
    stream_->Abort(reason);
    std::lock_guard<std::mutex> lock(mutex_);
    if (call_ != nullptr) call_->Cancel(reason);
  }

  void OnDone() override {
    reservation_->Close();  // its on_idle refers to this
    delete this;
  }

 private:
  static constexpr char kMethod[] = "ClassifyUpload";

  // Submits the request that the first message describes; false when it is refused, which
  // finishes the call.
  bool SubmitSettings() {
    const vidclf::v1::ClassifyRequest& settings = message_.settings();
    absl::StatusOr<engine::ClassifyInput> input = InputFromSettings(settings, *context_);
    if (input.ok() && settings.source_case() != vidclf::v1::ClassifyRequest::SOURCE_NOT_SET) {
      input = absl::InvalidArgumentError(
          "ClassifyUpload's settings cannot carry a video or a uri: the video comes in chunks");
    }
    if (!input.ok()) {
      FinishOnce(service_->Refuse(kMethod, settings.model(), start_, input.status()));
      return false;
    }
    input->stream = stream_;
    submitted_ = true;
    std::unique_ptr<engine::CallHandle> call = service_->Submit(
        kMethod, *std::move(input), start_, response_,
        [this](const grpc::Status& status) {
          stream_->CloseReader();  // refuse the chunks still coming
          FinishOnce(status);      // last use of this: OnDone may follow at once
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

  ClassifyService* const service_;
  grpc::CallbackServerContext* const context_;
  vidclf::v1::ClassifyResponse* const response_;
  const Clock::time_point start_;
  const std::shared_ptr<media::ByteStream> stream_;   // shared with the engine's job
  std::shared_ptr<engine::Reservation> reservation_;  // the call's place until it is submitted
  vidclf::v1::ClassifyUploadRequest message_;         // the message being read
  bool submitted_ = false;                            // only read and written in OnReadDone
  std::atomic<bool> finished_{false};
  std::mutex mutex_;                          // guards call_ against OnCancel
  std::unique_ptr<engine::CallHandle> call_;  // null until submitted, or when refused
};

// A unary Classify: submits the request, and cancels it in the engine when gRPC cancels the call
// (the client went away, or the deadline passed).
class ClassifyService::ClassifyReactor final : public grpc::ServerUnaryReactor {
 public:
  ClassifyReactor(ClassifyService* service, grpc::CallbackServerContext* context,
                  const vidclf::v1::ClassifyRequest* request,
                  vidclf::v1::ClassifyResponse* response)
      : context_(context) {
    const auto start = Clock::now();
    absl::StatusOr<engine::ClassifyInput> input = InputFromSettings(*request, *context);
    if (!input.ok()) {
      Finish(service->Refuse(kMethod, request->model(), start, input.status()));
      return;
    }
    input->video = request->video();  // the request lives until Finish
    input->uri = request->uri();
    std::unique_ptr<engine::CallHandle> call =
        service->Submit(kMethod, *std::move(input), start, response,
                        [this](const grpc::Status& status) { Finish(status); });
    std::lock_guard<std::mutex> lock(mutex_);
    call_ = std::move(call);
    if (call_ != nullptr && cancelled_) call_->Cancel(CancelledByClient(*context_));
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    if (call_ != nullptr) call_->Cancel(CancelledByClient(*context_));
  }

  void OnDone() override { delete this; }

 private:
  static constexpr char kMethod[] = "Classify";

  grpc::CallbackServerContext* const context_;
  std::mutex mutex_;
  bool cancelled_ = false;                    // OnCancel came, perhaps before the handle
  std::unique_ptr<engine::CallHandle> call_;  // null when refused at once
};

grpc::ServerUnaryReactor* ClassifyService::Classify(grpc::CallbackServerContext* context,
                                                    const vidclf::v1::ClassifyRequest* request,
                                                    vidclf::v1::ClassifyResponse* response) {
  return new ClassifyReactor(this, context, request, response);
}

grpc::ServerReadReactor<vidclf::v1::ClassifyUploadRequest>* ClassifyService::ClassifyUpload(
    grpc::CallbackServerContext* context, vidclf::v1::ClassifyResponse* response) {
  return new UploadReactor(this, context, response);
}

std::unique_ptr<engine::CallHandle> ClassifyService::Submit(
    absl::string_view method, engine::ClassifyInput input, Clock::time_point start,
    vidclf::v1::ClassifyResponse* response, std::function<void(const grpc::Status&)> finish,
    std::shared_ptr<engine::Reservation> reservation) {
  const std::string model_label = ModelLabel(input.model);
  return engine_->Submit(
      std::move(input),
      [this, method, start, response, model_label,
       finish = std::move(finish)](absl::StatusOr<engine::ClassifyResult> result) {
        if (result.ok()) FillResponse(*result, response);
        RecordFinishedCall(*metrics_, method, model_label, result.status(), SecondsSince(start));
        finish(ToGrpcStatus(result.status()));
      },
      std::move(reservation));
}

grpc::Status ClassifyService::Refuse(absl::string_view method, absl::string_view requested_model,
                                     Clock::time_point start, const absl::Status& status) {
  RecordFinishedCall(*metrics_, method, ModelLabel(requested_model), status, SecondsSince(start));
  return ToGrpcStatus(status);
}

std::string ClassifyService::ModelLabel(absl::string_view requested_model) const {
  auto model = engine_->repository()->Find(requested_model);
  return model.ok() ? (*model)->config().name : "unknown";
}

grpc::ServerBidiReactor<vidclf::v1::StreamClassifyRequest, vidclf::v1::StreamPrediction>*
ClassifyService::StreamClassify(grpc::CallbackServerContext* context) {
  return NewStreamReactor(engine_, metrics_, context);
}

grpc::ServerWriteReactor<vidclf::v1::WatchSourceResponse>* ClassifyService::WatchSource(
    grpc::CallbackServerContext* context, const vidclf::v1::WatchSourceRequest* request) {
  return NewWatchReactor(engine_, metrics_, context, *request);
}

grpc::ServerUnaryReactor* ClassifyService::ListModels(
    grpc::CallbackServerContext* context, const vidclf::v1::ListModelsRequest* /*request*/,
    vidclf::v1::ListModelsResponse* response) {
  const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
  for (const auto& [name, entry] : repository->entries()) {
    *response->add_models() = ModelInfoOf(entry, repository->default_model());
  }
  response->set_default_model(repository->default_model());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ClassifyService::GetModel(grpc::CallbackServerContext* context,
                                                    const vidclf::v1::GetModelRequest* request,
                                                    vidclf::v1::ModelInfo* response) {
  const std::shared_ptr<const engine::ModelRepository> repository = engine_->repository();
  absl::StatusOr<const engine::ModelRepository::Entry*> entry = repository->FindEntry(
      request->name().empty() ? repository->default_model() : request->name());
  if (entry.ok()) *response = ModelInfoOf(**entry, repository->default_model());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(entry.status()));
  return reactor;
}

}  // namespace vidclf::service
