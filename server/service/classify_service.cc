#include "server/service/classify_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "media/byte_stream.h"
#include "media/frame_sampler.h"
#include "server/service/grpc_status.h"

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
            service->engine_->options().decode.max_input_bytes)) {
    StartRead(&message_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client ended the upload, or the call broke (OnCancel has said so then)
      if (submitted_) {
        stream_->Finish();
      } else {
        Finish(service_->Refuse(kMethod, "", start_,
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
    // Not OK: past the upload limit, or the engine is done with the stream. Either way its
    // answer, already sent or coming, ends the call, so there is nothing more to read.
    if (!stream_->Append(message_.chunk()).ok()) return;
    StartRead(&message_);
  }

  void OnCancel() override { stream_->Abort(absl::CancelledError("the upload was cancelled")); }

  void OnDone() override { delete this; }

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
      Finish(service_->Refuse(kMethod, settings.model(), start_, input.status()));
      return false;
    }
    input->stream = stream_;
    submitted_ = true;
    service_->Submit(kMethod, *std::move(input), start_, response_,
                     [this](const grpc::Status& status) {
                       stream_->CloseReader();  // refuse the chunks still coming
                       Finish(status);          // last use of this: OnDone may follow at once
                     });
    return true;
  }

  ClassifyService* const service_;
  grpc::CallbackServerContext* const context_;
  vidclf::v1::ClassifyResponse* const response_;
  const Clock::time_point start_;
  const std::shared_ptr<media::ByteStream> stream_;  // shared with the engine's job
  vidclf::v1::ClassifyUploadRequest message_;        // the message being read
  bool submitted_ = false;                           // only read and written in OnReadDone
};

grpc::ServerUnaryReactor* ClassifyService::Classify(grpc::CallbackServerContext* context,
                                                    const vidclf::v1::ClassifyRequest* request,
                                                    vidclf::v1::ClassifyResponse* response) {
  const auto start = Clock::now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<engine::ClassifyInput> input = InputFromSettings(*request, *context);
  if (!input.ok()) {
    reactor->Finish(Refuse("Classify", request->model(), start, input.status()));
    return reactor;
  }
  input->video = request->video();  // the request lives until Finish
  input->uri = request->uri();
  Submit("Classify", *std::move(input), start, response,
         [reactor](const grpc::Status& status) { reactor->Finish(status); });
  return reactor;
}

grpc::ServerReadReactor<vidclf::v1::ClassifyUploadRequest>* ClassifyService::ClassifyUpload(
    grpc::CallbackServerContext* context, vidclf::v1::ClassifyResponse* response) {
  return new UploadReactor(this, context, response);
}

void ClassifyService::Submit(absl::string_view method, engine::ClassifyInput input,
                             Clock::time_point start, vidclf::v1::ClassifyResponse* response,
                             std::function<void(const grpc::Status&)> finish) {
  const std::string model_label = ModelLabel(input.model);
  engine_->ClassifyAsync(std::move(input), [this, method, start, response, model_label,
                                            finish = std::move(finish)](
                                               absl::StatusOr<engine::ClassifyResult> result) {
    if (result.ok()) {
      FillResponse(*result, response);
      metrics_->RecordStage(model_label, "decode", result->decode_seconds);
      metrics_->RecordStage(model_label, "preprocess", result->preprocess_seconds);
      metrics_->RecordStage(model_label, "embed", result->embed_seconds);
      metrics_->RecordStage(model_label, "head", result->head_seconds);
    }
    metrics_->RecordRequest(method, model_label, absl::StatusCodeToString(result.status().code()),
                            SecondsSince(start));
    finish(ToGrpcStatus(result.status()));
  });
}

grpc::Status ClassifyService::Refuse(absl::string_view method, absl::string_view requested_model,
                                     Clock::time_point start, const absl::Status& status) {
  metrics_->RecordRequest(method, ModelLabel(requested_model),
                          absl::StatusCodeToString(status.code()), SecondsSince(start));
  return ToGrpcStatus(status);
}

std::string ClassifyService::ModelLabel(absl::string_view requested_model) const {
  absl::StatusOr<const model::VideoModel*> model = repository_->Find(requested_model);
  return model.ok() ? (*model)->config().name : "unknown";
}

}  // namespace vidclf::service
