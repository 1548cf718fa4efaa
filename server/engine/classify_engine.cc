#include "server/engine/classify_engine.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/engine/video_pipeline.h"

namespace vidclf::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

absl::Status CheckDeadline(absl::Time deadline, absl::string_view stage) {
  if (absl::Now() < deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("deadline passed before ", stage));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClassifyEngine>> ClassifyEngine::Create(
    const EngineOptions& options, const ModelRepository* repository) {
  if (options.workers < 1 || options.max_queued_requests < 0 || options.max_sampled_frames < 1) {
    return absl::InvalidArgumentError(
        "engine needs workers >= 1, max_queued_requests >= 0 and max_sampled_frames >= 1");
  }
  return std::unique_ptr<ClassifyEngine>(new ClassifyEngine(options, repository));
}

ClassifyEngine::ClassifyEngine(const EngineOptions& options, const ModelRepository* repository)
    : options_(options), repository_(repository) {
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ClassifyEngine::~ClassifyEngine() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void ClassifyEngine::ClassifyAsync(ClassifyInput input, Callback done) {
  {
    absl::MutexLock lock(&mutex_);
    if (!stopping_ && queue_.size() < static_cast<size_t>(options_.max_queued_requests)) {
      queue_.push_back(Job{std::move(input), std::move(done), absl::Now()});
      return;
    }
  }
  done(absl::ResourceExhaustedError(absl::StrCat("server is busy: ", options_.max_queued_requests,
                                                 " requests are already waiting; retry")));
}

void ClassifyEngine::WorkerLoop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](ClassifyEngine* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, and nothing is left to do
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<ClassifyResult> result = Classify(job.input);
    if (result.ok()) result->total_seconds = absl::ToDoubleSeconds(absl::Now() - job.submitted);
    job.done(std::move(result));
  }
}

absl::StatusOr<ClassifyResult> ClassifyEngine::Classify(const ClassifyInput& input) const {
  const auto start = Clock::now();
  absl::StatusOr<const model::VideoModel*> found = repository_->Find(input.model);
  if (!found.ok()) return found.status();
  const model::VideoModel& model = **found;
  const model::ModelConfig& config = model.config();
  if (input.top_k < 0) return absl::InvalidArgumentError("top_k cannot be negative");
  if (input.sampling.num_frames > options_.max_sampled_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling.num_frames is ", input.sampling.num_frames,
                     "; this server samples at most ", options_.max_sampled_frames));
  }
  if (!input.attention.empty()) {
    // Refuse an attention the bundle does not allow before paying for decoding.
    if (auto status = model.CheckAttention(input.attention); !status.ok()) return status;
  }
  if (auto status = CheckDeadline(input.deadline, "decoding"); !status.ok()) return status;

  media::ClipOptions clip = options_.decode;
  clip.sampling = input.sampling;
  if (clip.sampling.num_frames <= 0) {
    // "fps" and "all" are capped by what one request may hold, the others take the model's count.
    const bool capped = clip.sampling.strategy == media::SamplingStrategy::kFps ||
                        clip.sampling.strategy == media::SamplingStrategy::kAll;
    clip.sampling.num_frames = capped ? options_.max_sampled_frames : config.input.num_frames;
  }
  if (input.deadline != absl::InfiniteFuture()) {
    const int64_t remaining_ms = absl::ToInt64Milliseconds(input.deadline - absl::Now());
    if (clip.decode_timeout_ms <= 0 || remaining_ms < clip.decode_timeout_ms) {
      clip.decode_timeout_ms = std::max<int64_t>(1, remaining_ms);
    }
  }
  const VideoSource source = input.stream ? VideoSource::Stream(input.stream.get())
                             : input.uri.empty()
                                 ? VideoSource::Bytes(input.video)
                                 : VideoSource::Uri(input.uri, &options_.uri_allowlist);
  absl::StatusOr<EmbeddedVideo> embedded = DecodeAndEmbed(model, source, clip, input.deadline);
  if (!embedded.ok()) return embedded.status();
  if (auto status = CheckDeadline(input.deadline, "the head"); !status.ok()) return status;

  ClassifyResult result;
  result.model = config.name;
  result.model_version = config.version;
  result.decode_seconds = embedded->decode_seconds;
  result.preprocess_seconds = embedded->preprocess_seconds;
  result.embed_seconds = embedded->embed_seconds;
  result.frame_timestamps_seconds = std::move(embedded->timestamps_seconds);
  const int64_t num_frames = embedded->embeddings.size(0);

  const auto head_start = Clock::now();
  absl::StatusOr<torch::Tensor> probabilities =
      model.Classify(embedded->embeddings.unsqueeze(0), torch::full({1}, num_frames, torch::kLong),
                     input.attention);
  if (!probabilities.ok()) return probabilities.status();
  result.head_seconds = SecondsSince(head_start);

  const int64_t num_labels = static_cast<int64_t>(config.labels.size());
  const int64_t k = std::min<int64_t>(input.top_k > 0 ? input.top_k : 5, num_labels);
  const auto [scores, indices] = probabilities->squeeze(0).topk(k);
  for (int64_t i = 0; i < k; ++i) {
    result.top_k.emplace_back(config.labels[indices[i].item<int64_t>()], scores[i].item<float>());
  }
  result.total_seconds = SecondsSince(start);
  return result;
}

}  // namespace vidclf::engine
