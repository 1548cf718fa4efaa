#include "server/service/classify_service.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "media/frame_sampler.h"
#include "server/service/grpc_status.h"

namespace vidclf::service {
namespace {

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

}  // namespace

grpc::ServerUnaryReactor* ClassifyService::Classify(grpc::CallbackServerContext* context,
                                                    const vidclf::v1::ClassifyRequest* request,
                                                    vidclf::v1::ClassifyResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();

  engine::ClassifyInput input;
  input.video = request->video();  // the request lives until Finish
  input.uri = request->uri();
  input.model = request->model();
  input.top_k = static_cast<int>(std::min<uint32_t>(request->top_k(), 1 << 20));
  input.attention = request->attention();
  input.deadline = absl::FromChrono(context->deadline());

  // Label with the served model's name, never the raw request text (bounded label values).
  absl::StatusOr<const model::VideoModel*> model = repository_->Find(request->model());
  const std::string model_label = model.ok() ? (*model)->config().name : "unknown";

  absl::StatusOr<media::SamplingOptions> sampling = SamplingFromRequest(request->sampling());
  if (!sampling.ok()) {
    metrics_->RecordRequest(
        "Classify", model_label, absl::StatusCodeToString(sampling.status().code()),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    reactor->Finish(ToGrpcStatus(sampling.status()));
    return reactor;
  }
  input.sampling = *sampling;

  engine_->ClassifyAsync(std::move(input), [this, reactor, response, start, model_label](
                                               absl::StatusOr<engine::ClassifyResult> result) {
    if (result.ok()) {
      FillResponse(*result, response);
      metrics_->RecordStage(model_label, "decode", result->decode_seconds);
      metrics_->RecordStage(model_label, "preprocess", result->preprocess_seconds);
      metrics_->RecordStage(model_label, "embed", result->embed_seconds);
      metrics_->RecordStage(model_label, "head", result->head_seconds);
    }
    const grpc::Status status = ToGrpcStatus(result.status());
    metrics_->RecordRequest(
        "Classify", model_label, absl::StatusCodeToString(result.status().code()),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    reactor->Finish(status);
  });
  return reactor;
}

}  // namespace vidclf::service
