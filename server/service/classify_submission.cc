#include "server/service/classify_submission.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"
#include "media/frame_sampler.h"
#include "server/service/finished_call.h"
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
  timings->set_queue_ms(1e3 * result.queue_seconds);
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

}  // namespace

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::StatusOr<engine::ClassifyInput> InputFromSettings(
    const vidclf::v1::ClassifyRequest& request, std::chrono::system_clock::time_point deadline) {
  engine::ClassifyInput input;
  input.model = request.model();
  input.top_k = static_cast<int>(std::min<uint32_t>(request.top_k(), 1 << 20));
  input.attention = request.attention();
  input.deadline = absl::FromChrono(deadline);
  absl::StatusOr<media::SamplingOptions> sampling = SamplingFromRequest(request.sampling());
  if (!sampling.ok()) return sampling.status();
  input.sampling = *sampling;
  return input;
}

absl::Status CancelledByClient(std::chrono::system_clock::time_point deadline) {
  if (std::chrono::system_clock::now() >= deadline) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the client cancelled the call");
}

void CancellableCall::Adopt(std::unique_ptr<engine::CallHandle> call) {
  std::lock_guard<std::mutex> lock(mutex_);
  call_ = std::move(call);
  if (call_ != nullptr && cancelled_) call_->Cancel(CancelledByClient(deadline_));
}

void CancellableCall::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
  if (call_ != nullptr) call_->Cancel(CancelledByClient(deadline_));
}

std::shared_ptr<engine::Reservation> ClassifySubmitter::Reserve(
    absl::string_view method, absl::string_view peer, Clock::time_point start,
    std::function<void(const grpc::Status&)> finish) const {
  absl::StatusOr<std::shared_ptr<engine::Reservation>> reservation = engine_->ReserveCall(
      [this, method, peer = std::string(peer), start, finish](const absl::Status& status) {
        finish(Refuse(method, peer, nullptr, start, status));
      });
  if (reservation.ok()) return *std::move(reservation);
  finish(Refuse(method, peer, nullptr, start, reservation.status()));
  return nullptr;
}

std::unique_ptr<engine::CallHandle> ClassifySubmitter::Submit(
    absl::string_view method, absl::string_view peer, engine::ClassifyInput input,
    Clock::time_point start, vidclf::v1::ClassifyResponse* response,
    std::function<void(const grpc::Status&)> finish,
    std::shared_ptr<engine::Reservation> reservation) const {
  const std::string model_label = ModelLabel(input.model);
  return engine_->Submit(
      std::move(input),
      [this, method, peer = std::string(peer), start, response, model_label,
       finish = std::move(finish)](absl::StatusOr<engine::ClassifyResult> result) {
        if (result.ok()) FillResponse(*result, response);
        const double seconds = SecondsSince(start);
        metrics_->RecordInference(model_label, seconds, result.ok() ? &*result : nullptr);
        RecordFinishedCall(*metrics_, method, model_label, result.status(), seconds, peer);
        finish(ToGrpcStatus(result.status()));
      },
      std::move(reservation));
}

grpc::Status ClassifySubmitter::Refuse(absl::string_view method, absl::string_view peer,
                                       const vidclf::v1::ClassifyRequest* settings,
                                       Clock::time_point start, const absl::Status& status) const {
  const std::string model = settings != nullptr ? ModelLabel(settings->model()) : "unknown";
  const double seconds = SecondsSince(start);
  metrics_->RecordInference(model, seconds, nullptr);
  RecordFinishedCall(*metrics_, method, model, status, seconds, peer);
  return ToGrpcStatus(status);
}

std::string ClassifySubmitter::ModelLabel(absl::string_view requested_model) const {
  auto model = engine_->repository()->Find(requested_model);
  return model.ok() ? (*model)->config().name : "unknown";
}

}  // namespace vidclf::service
