#include "server/engine/classify_call.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/time_spans.h"
#include "pipeline/frame_tensor.h"
#include "pipeline/video_pipeline.h"

namespace vidclf::engine {

ClassifyCall::ClassifyCall(ClassifyEngine* engine, ClassifyInput input,
                           std::shared_ptr<const model::VideoModel> model, int num_frames,
                           std::shared_ptr<Admission> admission, int64_t bytes_held,
                           ClassifyEngine::Callback done)
    : engine_(engine),
      input_(std::move(input)),
      model_(std::move(model)),
      num_frames_(num_frames),
      admission_(std::move(admission)),
      admitted_(absl::Now()),
      bytes_held_(bytes_held),
      done_(std::move(done)) {
  if (input_.source.stream() != nullptr) {
    // A decoder waiting for an upload's next bytes does not poll the token: wake it.
    cancellation_.OnCancel([source = input_.source, token = &cancellation_] {
      source.stream()->Abort(token->reason());
    });
  }
}

ClassifyCall::~ClassifyCall() {
  absl::MutexLock lock(&mutex_);
  admission_->Release(bytes_held_, /*call_ended=*/true);
}

absl::Status ClassifyCall::AddBytes(int64_t bytes) {
  if (auto status = admission_->AddBytes(bytes); !status.ok()) return status;
  absl::MutexLock lock(&mutex_);
  bytes_held_ += bytes;
  return absl::OkStatus();
}

void ClassifyCall::Cancel(const absl::Status& reason) {
  cancellation_.Cancel(reason);
  bool move_on = false;
  {
    absl::MutexLock lock(&mutex_);
    if (failure_.ok()) failure_ = reason;
    // Still waiting for a decode slot: it never touched the input, so it can go at once.
    if (!decode_started_) decode_over_ = true;
    move_on = ReadyToMoveOn();
  }
  if (move_on) MoveOn();
}

media::ClipOptions ClassifyCall::ClipOptionsFor(int decoder_threads) const {
  const EngineOptions& options = engine_->options();
  media::ClipOptions clip = pipeline::WithModelPreprocessing(*model_, options.decode);
  clip.sampling = input_.sampling;
  clip.sampling.num_frames = num_frames_;
  clip.decoder_threads = decoder_threads;
  if (input_.deadline != absl::InfiniteFuture()) {
    const int64_t remaining_ms = absl::ToInt64Milliseconds(input_.deadline - absl::Now());
    if (clip.decode_timeout_ms <= 0 || remaining_ms < clip.decode_timeout_ms) {
      clip.decode_timeout_ms = std::max<int64_t>(1, remaining_ms);
    }
  }
  clip.cancellation = &cancellation_;
  clip.frame_sink = const_cast<ClassifyCall*>(this);
  clip.uri_allowlist = &engine_->options().uri_allowlist;
  return clip;
}

void ClassifyCall::Decode() {
  absl::Time started;
  {
    absl::MutexLock lock(&mutex_);
    if (decode_over_) return;  // cancelled while it waited for the slot
    decode_started_ = true;
    started = absl::Now();
    timings_.queue_seconds = absl::ToDoubleSeconds(started - admitted_);
  }
  // Calls decoding side by side share the cores. A call decoding alone runs two frame threads per
  // core: a frame thread often waits for rows of the frame before it, and the extra threads fill
  // those gaps (`vidclf-media-bench --threads 2,4` on 2 cores: every frame of 640x360 H.264 and
  // VP9 decoded 6-8% faster with 4 threads than with 2). Where keyframes allow, the decoder splits
  // those threads between two decoders side by side (media::ClipOptions::split_at_keyframes).
  still_decoding_ = true;
  holds_decoding_cores_ = true;
  if (input_.source.stream() != nullptr) {
    input_.source.stream()->SetWaitListener([this](bool waiting) { WaitingForInput(waiting); });
  }
  const int decoding = ++engine_->calls_decoding_;
  const int cores = engine_->options().cores;
  const int threads = decoding == 1 ? 2 * cores : cores / decoding;
  media::ClipOptions clip = ClipOptionsFor(std::clamp(threads, 1, 16));
  clip.cpu_when_faster = engine_->options().cpu_when_faster_alone && decoding == 1;
  absl::StatusOr<media::DecodedClip> decoded = media::DecodeClip(input_.source, clip);
  if (input_.source.stream() != nullptr) {
    input_.source.stream()->SetWaitListener(nullptr);  // nobody reads any more
  }
  ReleaseDecodingCores();
  ReleaseFrames();
  const double decode_seconds = absl::ToDoubleSeconds(absl::Now() - started);
  const double recent = engine_->recent_decode_seconds_.load();
  engine_->recent_decode_seconds_ =
      recent == 0 ? decode_seconds : 0.8 * recent + 0.2 * decode_seconds;
  if (decoded.ok()) {
    engine_->observer_->FramesDecoded(decoded->frames_decoded);
    const bool no_gpu = engine_->options().decode_on_gpu && clip.nvdec == nullptr;
    engine_->observer_->ClipDecoded(decoded->decoded_on,
                                    no_gpu ? media::kNoGpuFallback : decoded->gpu_fallback);
  }

  bool move_on = false;
  {
    absl::MutexLock lock(&mutex_);
    decode_over_ = true;
    if (!decoded.ok()) {
      // A cancelled decode reports the cancellation's reason, which failure_ already holds.
      if (failure_.ok()) failure_ = decoded.status();
    } else {
      timings_.decode_seconds = decoded->decode_seconds;
      timings_.preprocess_seconds = decoded->preprocess_seconds;
      clip_ = *std::move(decoded);
    }
    move_on = ReadyToMoveOn();
  }
  if (move_on) MoveOn();
}

void ClassifyCall::ReleaseDecodingCores() {
  if (holds_decoding_cores_.exchange(false)) --engine_->calls_decoding_;
}

void ClassifyCall::WaitingForInput(bool waiting) {
  if (waiting) {
    lent_decoding_cores_ = holds_decoding_cores_.exchange(false);
    if (lent_decoding_cores_) --engine_->calls_decoding_;
  } else if (lent_decoding_cores_) {
    lent_decoding_cores_ = false;
    holds_decoding_cores_ = true;
    ++engine_->calls_decoding_;
  }
}

void ClassifyCall::ReleaseFrames() {
  if (still_decoding_.exchange(false)) engine_->batcher_.DecodingEnded();
}

void ClassifyCall::StartPass(int64_t frames) {
  absl::MutexLock lock(&mutex_);
  ++pass_;
  frames_announced_ = frames;
  frames_in_pass_ = 0;
  embeddings_.clear();
}

absl::Status ClassifyCall::Frame(int64_t slot, const media::FrameBuffer& frame,
                                 double /*timestamp_seconds*/) {
  absl::StatusOr<torch::Tensor> pixels = pipeline::FrameTensor(frame, model());
  if (!pixels.ok()) return pixels.status();
  int pass = 0;
  bool last = false;
  {
    absl::MutexLock lock(&mutex_);
    if (!failure_.ok()) return failure_;
    ++frames_out_;
    pass = pass_;
    last = ++frames_in_pass_ == frames_announced_;
  }
  // With the last frame, the cores go back to the backbone before the frame reaches it, so that
  // the batch it completes runs on all of them; the frames are let go only once the last is
  // queued, so that the batcher never takes a part of them.
  if (last) ReleaseDecodingCores();
  engine_->batcher_.Enqueue(shared_from_this(), pass, slot, *std::move(pixels));
  if (last) ReleaseFrames();
  return absl::OkStatus();
}

bool ClassifyCall::Wants(int pass) const {
  absl::MutexLock lock(&mutex_);
  return failure_.ok() && pass == pass_ && absl::Now() < input_.deadline;
}

void ClassifyCall::Embedded(int pass, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                            const BatchReport& report) {
  bool move_on = false;
  {
    absl::MutexLock lock(&mutex_);
    --frames_out_;
    if (embedding.ok() && pass == pass_) {
      if (slot >= static_cast<int64_t>(embeddings_.size())) embeddings_.resize(slot + 1);
      embeddings_[slot] = *std::move(embedding);
      timings_.queue_seconds = std::max(timings_.queue_seconds, report.waited_seconds);
      batch_spans_.try_emplace(report.batch_id, TimeSpan{report.started, report.finished});
    } else if (!embedding.ok() && failure_.ok() && pass == pass_) {
      // Unwanted only because the deadline passed, or the backbone failed.
      failure_ = absl::Now() >= input_.deadline
                     ? absl::DeadlineExceededError("the deadline passed before embedding")
                     : embedding.status();
    }
    move_on = ReadyToMoveOn();
  }
  if (move_on) MoveOn();
}

bool ClassifyCall::ReadyToMoveOn() {
  if (!decode_over_ || frames_out_ > 0 || moved_on_) return false;
  moved_on_ = true;
  return true;
}

void ClassifyCall::MoveOn() {
  absl::Status failure;
  {
    absl::MutexLock lock(&mutex_);
    failure = failure_;
  }
  if (!failure.ok()) {
    Answer(failure);
    return;
  }
  engine_->head_stage_.Run([self = shared_from_this()] { self->RunHead(); });
}

void ClassifyCall::RunHead() {
  if (cancellation_.cancelled()) return Answer(cancellation_.reason());
  if (absl::Now() >= input_.deadline) {
    return Answer(absl::DeadlineExceededError("the deadline passed before the head"));
  }
  ClassifyResult result;
  torch::Tensor embeddings;
  {
    absl::MutexLock lock(&mutex_);
    result = timings_;
    std::vector<TimeSpan> spans;
    for (const auto& [id, span] : batch_spans_) spans.push_back(span);
    result.embed_seconds = absl::ToDoubleSeconds(CoveredTime(std::move(spans)));
    result.frame_timestamps_seconds = clip_.timestamps_seconds;
    result.decoded_on = clip_.decoded_on;
    const int64_t frames = clip_.num_frames;
    const bool complete = frames > 0 && static_cast<int64_t>(embeddings_.size()) >= frames &&
                          std::all_of(embeddings_.begin(), embeddings_.begin() + frames,
                                      [](const torch::Tensor& e) { return e.defined(); });
    if (complete) {
      embeddings = torch::stack(
          std::vector<torch::Tensor>(embeddings_.begin(), embeddings_.begin() + frames));
    }
  }
  if (!embeddings.defined())
    return Answer(absl::InternalError("a decoded frame was never embedded"));
  const model::ModelConfig& config = model_->config();
  const absl::Time head_start = absl::Now();
  const int64_t num_frames = embeddings.size(0);
  absl::StatusOr<torch::Tensor> probabilities = model_->Classify(
      embeddings.unsqueeze(0), torch::full({1}, num_frames, torch::kLong), input_.attention);
  if (!probabilities.ok()) return Answer(probabilities.status());
  result.head_seconds = absl::ToDoubleSeconds(absl::Now() - head_start);

  result.model = config.name;
  result.model_version = config.version;
  const int64_t num_labels = static_cast<int64_t>(config.labels.size());
  const int64_t k = std::min<int64_t>(input_.top_k > 0 ? input_.top_k : 5, num_labels);
  const auto [scores, indices] = probabilities->squeeze(0).topk(k);
  for (int64_t i = 0; i < k; ++i) {
    result.top_k.emplace_back(config.labels[indices[i].item<int64_t>()], scores[i].item<float>());
  }
  Answer(std::move(result));
}

void ClassifyCall::Answer(absl::StatusOr<ClassifyResult> result) {
  ClassifyEngine::Callback done;
  {
    absl::MutexLock lock(&mutex_);
    done = std::move(done_);
    done_ = nullptr;
    embeddings_.clear();  // nothing the answer needs
  }
  if (!done) return;
  if (result.ok()) {
    result->total_seconds = absl::ToDoubleSeconds(absl::Now() - admitted_);
    EngineObserver& observer = *engine_->observer_;
    const std::string& name = model_->config().name;
    observer.StageDone(name, Stage::kQueue, result->queue_seconds);
    observer.StageDone(name, Stage::kDecode, result->decode_seconds);
    observer.StageDone(name, Stage::kPreprocess, result->preprocess_seconds);
    observer.StageDone(name, Stage::kEmbed, result->embed_seconds);
    observer.StageDone(name, Stage::kHead, result->head_seconds);
  }
  done(std::move(result));
  engine_->Forget(this);
}

}  // namespace vidclf::engine
