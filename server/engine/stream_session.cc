#include "server/engine/stream_session.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "media/image_decoder.h"
#include "media/live_decoder.h"
#include "pipeline/video_pipeline.h"

namespace vidclf::engine {
namespace {

// Pictures that carry no timestamp are spaced as a 25 fps camera's.
constexpr double kDefaultPictureRate = 25;

// Back-off between attempts to follow a dropped source again: the first after half a second,
// each next one twice as late, up to 8 s, each spread by up to 20% either way so that the
// watchers of one camera that restarts do not all knock at once (gRPC's connection back-off).
absl::Duration ReconnectDelay(int attempt) {
  const double base = std::min(0.5 * std::pow(2.0, attempt - 1), 8.0);
  thread_local std::mt19937 random(std::random_device{}());
  return absl::Seconds(base * std::uniform_real_distribution<double>(0.8, 1.2)(random));
}

}  // namespace

absl::Status ValidateStreamOptions(const StreamOptions& options) {
  if (options.top_k < 0) return absl::InvalidArgumentError("top_k cannot be negative");
  if (options.emit_every_frames < 1) {
    return absl::InvalidArgumentError("emit_every_frames must be at least 1");
  }
  if (!(options.emit_every_seconds >= 0) || std::isinf(options.emit_every_seconds)) {
    return absl::InvalidArgumentError("emit_every_seconds must be a finite number >= 0");
  }
  if (options.embed_stride < 1) return absl::InvalidArgumentError("embed_stride must be >= 1");
  if (options.input == StreamOptions::Input::kRawRgb24 &&
      (options.width < 1 || options.height < 1)) {
    return absl::InvalidArgumentError("raw RGB24 input needs the pictures' width and height");
  }
  if (options.input == StreamOptions::Input::kUri && options.uri.empty()) {
    return absl::InvalidArgumentError("a watched source needs its URI");
  }
  return absl::OkStatus();
}

StreamSession::StreamSession(StreamOptions options, std::shared_ptr<const model::VideoModel> model,
                             bool recurrent, const StreamResources& resources,
                             StreamListener* listener)
    : options_(std::move(options)),
      model_(std::move(model)),
      recurrent_(recurrent),
      resources_(resources),
      listener_(listener),
      bytes_(options_.input == StreamOptions::Input::kContainer
                 ? std::make_shared<media::ByteStream>(resources.max_buffered_bytes,
                                                       media::ByteStream::Bound::kHeldBytes)
                 : nullptr),
      last_input_(StreamClock::now()) {
  if (options_.emit_every_seconds > 0) next_emit_seconds_ = options_.emit_every_seconds;
}

StreamSession::~StreamSession() { Join(); }

void StreamSession::Start() {
  feeder_ = std::thread([this] { Feed(); });
}

void StreamSession::Join() {
  if (feeder_.joinable()) feeder_.join();
}

absl::Status StreamSession::PushBytes(absl::string_view chunk, bool* room) {
  if (bytes_ == nullptr) {
    return absl::InvalidArgumentError("this stream takes frames, not container chunks");
  }
  {
    absl::MutexLock lock(&mutex_);
    if (input_over_ || !failure_.ok()) {
      return absl::FailedPreconditionError("the stream is over");
    }
    if (!chunk.empty()) last_input_ = StreamClock::now();  // empty chunks keep nothing alive
  }
  if (auto status = bytes_->Append(chunk); !status.ok()) return status;
  // Half the bound is left for the next chunk, however large gRPC lets it be.
  *room = bytes_->held_bytes() < resources_.max_buffered_bytes / 2;
  return absl::OkStatus();
}

absl::Status StreamSession::PushPicture(std::string data, double timestamp_seconds, bool* room) {
  if (bytes_ != nullptr) {
    return absl::InvalidArgumentError("this stream takes container chunks, not frames");
  }
  absl::MutexLock lock(&mutex_);
  if (input_over_ || !failure_.ok()) return absl::FailedPreconditionError("the stream is over");
  last_input_ = StreamClock::now();
  pictures_.push_back(Picture{std::move(data), timestamp_seconds, last_input_});
  *room = static_cast<int>(pictures_.size()) < resources_.max_buffered_pictures;
  return absl::OkStatus();
}

void StreamSession::CallWhenRoom(std::function<void()> callback) {
  if (bytes_ != nullptr) {
    bytes_->CallWhenHeldBelow(resources_.max_buffered_bytes / 2, std::move(callback));
    return;
  }
  {
    absl::MutexLock lock(&mutex_);
    const bool room = static_cast<int>(pictures_.size()) < resources_.max_buffered_pictures;
    if (!room && !input_over_ && failure_.ok()) {
      room_callback_ = std::move(callback);
      return;
    }
  }
  callback();
}

std::function<void()> StreamSession::TakeRoomCallback() {
  std::function<void()> callback;
  std::swap(callback, room_callback_);
  return callback;
}

void StreamSession::FinishInput() {
  if (bytes_ != nullptr) bytes_->Finish();
  absl::MutexLock lock(&mutex_);
  input_over_ = true;
}

void StreamSession::Cancel(const absl::Status& reason) { Fail(reason); }

void StreamSession::Fail(const absl::Status& status) {
  std::function<void()> room;
  {
    absl::MutexLock lock(&mutex_);
    if (!failure_.ok() || ended_) return;
    failure_ = status;
    room = TakeRoomCallback();
    ScheduleHead();  // it ends the stream once the batcher has let go of its frames
  }
  cancellation_.Cancel(status);
  if (bytes_ != nullptr) bytes_->Abort(status);  // wakes a decoder waiting for bytes
  if (room) room();
}

bool StreamSession::IdleSince(StreamClock::time_point cutoff) const {
  // A pulled source has a stall timeout of its own, and nobody pushes to it.
  if (options_.input == StreamOptions::Input::kUri) return false;
  absl::MutexLock lock(&mutex_);
  return !input_over_ && failure_.ok() && !ended_ && last_input_ < cutoff;
}

bool StreamSession::ended() const {
  absl::MutexLock lock(&mutex_);
  return ended_;
}

void StreamSession::Feed() {
  absl::Status status;
  switch (options_.input) {
    case StreamOptions::Input::kContainer:
      status = FeedContainer();
      break;
    case StreamOptions::Input::kUri:
      status = FeedSource();
      break;
    default:
      status = FeedPictures();
  }
  if (!status.ok()) Fail(status);
  absl::MutexLock lock(&mutex_);
  feed_over_ = true;
  ScheduleHead();
}

absl::Status StreamSession::FeedContainer() {
  media::LiveDecodeOptions decode;
  decode.preprocess = pipeline::WithModelPreprocessing(*model_, media::ClipOptions{}).preprocess;
  decode.embed_stride = options_.embed_stride;
  decode.decoder_threads = 1;  // many feeds share the cores; one thread each is enough
  decode.max_frame_side = resources_.max_frame_side;
  decode.max_fragment_samples = resources_.max_fragment_samples;
  decode.cancellation = &cancellation_;
  decode.nvdec = resources_.nvdec;
  return media::DecodeLive(*bytes_, decode, [this](const media::LiveFrame& frame) {
    {
      absl::MutexLock lock(&mutex_);
      frames_seen_ = frame.index + 1;
    }
    if (frame.pixels == nullptr) return absl::OkStatus();  // off the embed stride
    return Submit(FrameInfo{frame.index, frame.timestamp_seconds, frame.arrived}, frame.pixels);
  });
}

absl::Status StreamSession::FeedSource() {
  media::LiveDecodeOptions decode;
  decode.preprocess = pipeline::WithModelPreprocessing(*model_, media::ClipOptions{}).preprocess;
  decode.embed_stride = options_.embed_stride;
  decode.decoder_threads = 1;
  decode.max_frame_side = resources_.max_frame_side;
  decode.max_fragment_samples = resources_.max_fragment_samples;
  decode.cancellation = &cancellation_;
  decode.nvdec = resources_.nvdec;
  media::LiveSourceOptions source;
  source.stall_timeout = absl::ToChronoNanoseconds(resources_.source_stall_timeout);
  int connections = 0;
  int failed_attempts = 0;
  // Frame indices and times go on from one connection to the next: each connection's frames
  // are placed after the last one's, one frame period later.
  int64_t first_index = 0;
  double first_seconds = 0;
  double last_seconds = 0;
  double period = 1 / kDefaultPictureRate;
  source.on_connected = [&](absl::string_view description) {
    SourceEvent event;
    event.kind = SourceEvent::Kind::kConnected;
    event.attempt = ++connections;
    event.message = std::string(description);
    event.frames_seen = first_index;
    listener_->OnSourceEvent(event);
  };
  while (true) {
    int64_t frames = 0;
    const absl::Status status = media::DecodeLiveUri(
        options_.uri, *resources_.uri_allowlist, source, decode,
        [&](const media::LiveFrame& frame) {
          frames = frame.index + 1;
          const double seconds = first_seconds + frame.timestamp_seconds;
          if (frame.index > 0) period = seconds - last_seconds;
          last_seconds = seconds;
          {
            absl::MutexLock lock(&mutex_);
            frames_seen_ = first_index + frames;
          }
          if (frame.pixels == nullptr) return absl::OkStatus();
          return Submit(FrameInfo{first_index + frame.index, seconds, frame.arrived}, frame.pixels);
        });
    if (!absl::IsUnavailable(status) || cancellation_.cancelled()) return status;
    if (frames > 0) {
      failed_attempts = 0;
      first_index += frames;
      first_seconds = last_seconds + period;
    }
    if (options_.max_reconnects == 0) return status;
    if (failed_attempts >= options_.max_reconnects) {
      return absl::UnavailableError(
          absl::StrCat("gave up on the source after ", failed_attempts,
                       " attempts in a row to follow it again failed: ", status.message()));
    }
    SourceEvent event;
    event.kind = SourceEvent::Kind::kDropped;
    event.attempt = ++failed_attempts;
    event.message = std::string(status.message());
    const absl::Duration delay = ReconnectDelay(failed_attempts);
    event.retry_in_seconds = absl::ToDoubleSeconds(delay);
    event.frames_seen = first_index;
    listener_->OnSourceEvent(event);
    if (!WaitUnlessFailed(delay)) return absl::OkStatus();  // Feed reports the failure
    resources_.observer->SourceReconnect();
  }
}

bool StreamSession::WaitUnlessFailed(absl::Duration delay) {
  absl::MutexLock lock(&mutex_);
  mutex_.AwaitWithTimeout(absl::Condition(
                              +[](StreamSession* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
                                return !self->failure_.ok();
                              },
                              this),
                          delay);
  return failure_.ok();
}

absl::Status StreamSession::FeedPictures() {
  const media::PreprocessOptions preprocess =
      pipeline::WithModelPreprocessing(*model_, media::ClipOptions{}).preprocess;
  media::ImageFrameDecoder decoder(preprocess, resources_.max_frame_side);
  std::vector<float> pixels(decoder.output_floats());
  for (int64_t index = 0;; ++index) {
    Picture picture;
    std::function<void()> room;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](StreamSession* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return !self->pictures_.empty() || self->input_over_ || !self->failure_.ok();
          },
          this));
      if (!failure_.ok()) return failure_;
      if (pictures_.empty()) return absl::OkStatus();  // the feed ended
      picture = std::move(pictures_.front());
      pictures_.pop_front();
      frames_seen_ = index + 1;
      room = TakeRoomCallback();
    }
    if (room) room();
    if (index % options_.embed_stride != 0) continue;  // not embedded: not even decoded
    const absl::Status converted =
        options_.input == StreamOptions::Input::kEncodedImages
            ? decoder.DecodeEncoded(picture.data, pixels.data())
            : decoder.ConvertRgb24(picture.data, options_.width, options_.height, pixels.data());
    if (!converted.ok()) {
      return absl::Status(converted.code(),
                          absl::StrCat("frame ", index, " of the stream: ", converted.message()));
    }
    const double seconds = picture.timestamp_seconds != 0 || index == 0
                               ? picture.timestamp_seconds
                               : static_cast<double>(index) / kDefaultPictureRate;
    if (auto status = Submit(FrameInfo{index, seconds, picture.arrived}, pixels.data());
        !status.ok()) {
      return status;
    }
  }
}

absl::Status StreamSession::Submit(const FrameInfo& info, const float* pixels) {
  int64_t slot = 0;
  {
    absl::MutexLock lock(&mutex_);
    // Decoding waits while the backbone and head are behind: the feed's bytes then pile up to
    // their bound and the producer is no longer read.
    mutex_.Await(absl::Condition(
        +[](StreamSession* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
          return !self->failure_.ok() ||
                 static_cast<int>(self->in_flight_.size() + self->ready_.size()) <
                     self->resources_.max_frames_in_flight;
        },
        this));
    if (!failure_.ok()) return failure_;
    slot = next_slot_++;
    in_flight_[slot] = info;
  }
  resources_.observer->StreamFrames(1);
  resources_.batcher->Enqueue(shared_from_this(), /*pass=*/0, slot, pixels);
  return absl::OkStatus();
}

bool StreamSession::Wants(int /*pass*/) const {
  absl::MutexLock lock(&mutex_);
  return failure_.ok();
}

void StreamSession::Embedded(int /*pass*/, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                             const BatchReport& /*report*/) {
  bool failed = false;
  {
    absl::MutexLock lock(&mutex_);
    const auto frame = in_flight_.find(slot);
    if (frame == in_flight_.end()) return;  // cannot happen: the batcher answers once per frame
    const FrameInfo info = frame->second;
    in_flight_.erase(frame);
    if (embedding.ok()) {
      ready_[slot] = ReadyFrame{*std::move(embedding), info};
    } else {
      failed = failure_.ok();
    }
    ScheduleHead();
  }
  if (failed) Fail(embedding.status());
}

void StreamSession::ScheduleHead() {
  if (head_scheduled_ || ended_) return;
  head_scheduled_ = true;
  resources_.head_stepper->Schedule(shared_from_this());
}

bool StreamSession::NextStep(HeadStepper::Step* step) {
  absl::Status failure;
  {
    absl::MutexLock lock(&mutex_);
    failure = failure_;
    step_closes_emit_ = false;
    if (failure.ok()) {
      // The embedded frames next in order, up to the first that closes an emit period.
      for (auto next = ready_.begin();
           next != ready_.end() && next->first == next_to_step_ && !step_closes_emit_;
           next = ready_.erase(next), ++next_to_step_) {
        step_closes_emit_ = ClosesEmitPeriod(next->second.info, static_cast<int64_t>(step_.size()));
        step_.push_back(std::move(next->second));
      }
    } else {
      ready_.clear();  // frees the frames' memory at once
    }
    if (step_.empty() && !(feed_over_ && in_flight_.empty())) {
      head_scheduled_ = false;
      return false;
    }
  }
  if (!step_.empty()) {
    std::vector<torch::Tensor> embeddings;
    embeddings.reserve(step_.size());
    for (const ReadyFrame& frame : step_) embeddings.push_back(frame.embedding);
    *step = {model_.get(), options_.attention, torch::stack(embeddings), head_state_};
    return true;
  }
  // The feed is over and every frame it handed out is accounted for.
  if (failure.ok() && stepped_since_emit_) Emit();
  std::function<void()> room;
  {
    absl::MutexLock lock(&mutex_);
    ended_ = true;
    head_scheduled_ = false;
    room = TakeRoomCallback();
  }
  if (room) room();
  listener_->OnEnd(failure);
  return false;
}

bool StreamSession::ClosesEmitPeriod(const FrameInfo& frame, int64_t earlier_in_step) const {
  if (options_.emit_every_seconds > 0) return frame.seconds >= next_emit_seconds_;
  return (frames_stepped_ + earlier_in_step + 1) % options_.emit_every_frames == 0;
}

void StreamSession::Stepped(HeadStepper::StepResult result) {
  const std::vector<ReadyFrame> frames = std::move(step_);
  step_.clear();
  if (!result.ok()) {
    Fail(result.status());
    return;
  }
  probabilities_ = std::move(result->first);
  head_state_ = std::move(result->second);

  const int64_t stepped_before = frames_stepped_;
  frames_stepped_ += static_cast<int64_t>(frames.size());
  if (stepped_before == 0) first_stepped_ = frames.front().info;
  newest_stepped_ = frames.back().info;
  stepped_since_emit_ = true;
  if (recurrent_) {
    covered_first_ = first_stepped_;
    covered_last_ = newest_stepped_;
  } else {
    // A sliding window is evaluated when the frames stepped pass a multiple of its stride (and
    // on the first step); in between, its latest evaluation stands (heads/head_stream.h).
    const model::SlidingWindowOptions& window = model_->config().streaming;
    for (const ReadyFrame& frame : frames) recent_.push_back(frame.info);
    while (static_cast<int64_t>(recent_.size()) > window.window_frames) recent_.pop_front();
    if (stepped_before == 0 ||
        frames_stepped_ / window.stride_frames > stepped_before / window.stride_frames) {
      covered_first_ = recent_.front();
      covered_last_ = recent_.back();
    }
  }
  if (!step_closes_emit_) return;  // frames after the last emit are stepped too, not held
  Emit();
  if (options_.emit_every_seconds > 0) {
    const double period = options_.emit_every_seconds;
    next_emit_seconds_ = (std::floor(newest_stepped_.seconds / period) + 1) * period;
  }
}

void StreamSession::Emit() {
  const model::ModelConfig& config = model_->config();
  StreamPrediction prediction;
  prediction.model = config.name;
  prediction.model_version = config.version;
  const int64_t labels = static_cast<int64_t>(config.labels.size());
  const int64_t k = std::min<int64_t>(options_.top_k > 0 ? options_.top_k : 5, labels);
  const auto [scores, indices] = probabilities_.squeeze(0).topk(k);
  for (int64_t i = 0; i < k; ++i) {
    prediction.top_k.emplace_back(config.labels[indices[i].item<int64_t>()],
                                  scores[i].item<float>());
  }
  prediction.first_frame = covered_first_.index;
  prediction.last_frame = covered_last_.index;
  prediction.first_seconds = covered_first_.seconds;
  prediction.last_seconds = covered_last_.seconds;
  {
    absl::MutexLock lock(&mutex_);
    prediction.frames_seen = frames_seen_;
  }
  prediction.frames_embedded = frames_stepped_;
  prediction.newest_arrival = newest_stepped_.arrived;
  stepped_since_emit_ = false;
  listener_->OnPrediction(std::move(prediction));
}

}  // namespace vidclf::engine
