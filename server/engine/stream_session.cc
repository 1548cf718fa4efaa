#include "server/engine/stream_session.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/thread_name.h"
#include "model/heads/head_state_codec.h"
#include "pipeline/frame_tensor.h"
#include "pipeline/video_pipeline.h"
#include "server/engine/container_source.h"
#include "server/engine/memory_source.h"

namespace vidclf::engine {

absl::Status ValidateStreamOptions(const StreamOptions& options) {
  if (options.top_k < 0) return absl::InvalidArgumentError("top_k cannot be negative");
  if (options.emit_every_frames < 1) {
    return absl::InvalidArgumentError("emit_every_frames must be at least 1");
  }
  if (!(options.emit_every_seconds >= 0) || std::isinf(options.emit_every_seconds)) {
    return absl::InvalidArgumentError("emit_every_seconds must be a finite number >= 0");
  }
  if (options.embed_stride < 1) return absl::InvalidArgumentError("embed_stride must be >= 1");
  if (!(options.sample_fps >= 0) || options.sample_fps > kMaxSampleFps) {
    return absl::InvalidArgumentError(absl::StrCat("frames_per_second must be in (0, ",
                                                   kMaxSampleFps, "], not ", options.sample_fps));
  }
  if (options.input == StreamOptions::Input::kBytes && options.video.empty()) {
    return absl::InvalidArgumentError("empty input: no video bytes were sent");
  }
  if (options.windows.has_value()) {
    const WindowOptions& windows = *options.windows;
    if (windows.window_frames < 0 || windows.window_frames > kMaxWindowFrames) {
      return absl::InvalidArgumentError(absl::StrCat(
          "window_frames must be in [1, ", kMaxWindowFrames, "], not ", windows.window_frames));
    }
    if (windows.hop_frames < 0) return absl::InvalidArgumentError("hop_frames must be >= 1");
    if (windows.window_frames > 0 && windows.hop_frames > 0) {
      if (windows.window_frames % windows.hop_frames != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("hop_frames (", windows.hop_frames, ") must divide window_frames (",
                         windows.window_frames, "), so that every frame lies in as many windows"));
      }
      if (windows.window_frames / windows.hop_frames > kMaxWindowsPerFrame) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a frame may lie in at most ", kMaxWindowsPerFrame, " windows; window_frames ",
            windows.window_frames, " / hop_frames ", windows.hop_frames, " is more"));
      }
    }
  }
  if (options.input == StreamOptions::Input::kRawRgb24 &&
      (options.width < 1 || options.height < 1)) {
    return absl::InvalidArgumentError("raw RGB24 input needs the pictures' width and height");
  }
  if (options.input == StreamOptions::Input::kUri && options.uri.empty()) {
    return absl::InvalidArgumentError("a watched source needs its URI");
  }
  if (auto status = media::ValidateInputOptions(options.input_options, options.uri); !status.ok()) {
    return status;
  }
  if (options.segments.has_value()) {
    if (absl::Status status = pipeline::CheckSegmentOptions(*options.segments); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("segment_events: ", status.message()));
    }
  } else if (options.events_only) {
    return absl::InvalidArgumentError("events_only needs segment_events");
  }
  return absl::OkStatus();
}

absl::Status FitToSegmentationModel(const model::ModelConfig& config, bool recurrent,
                                    StreamOptions& options) {
  if (!config.segmentation.has_value()) return absl::OkStatus();
  const double rate = config.segmentation->frames_per_second;
  if (options.default_sampling) {
    options.sample_fps = rate;
    options.embed_stride = 1;
  } else if (options.embed_stride != 1 || options.sample_fps != rate) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", config.name, "\" is a segmentation model trained on ", rate,
        " frames per second of media time; leave the sampling unset (frames_per_second, "
        "every_nth_frame, embed_stride) or ask for ",
        rate, " frames per second"));
  }
  if (options.windows.has_value()) {
    if (options.windows->window_frames != 0 || options.windows->hop_frames != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", config.name,
          "\" is a segmentation model: it answers every sampled frame, in no windows; leave "
          "window_frames and hop_frames unset"));
    }
    options.windows = WindowOptions{1, 1};
  } else if (!recurrent) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model \"", config.name,
        "\" is an offline segmentation model (its head sees whole videos, with this attention): "
        "ask it with ClassifySegments; a live feed needs an online one, such as a GRU"));
  }
  return absl::OkStatus();
}

StreamSession::StreamSession(StreamOptions options, std::shared_ptr<const model::VideoModel> model,
                             bool recurrent, const StreamResources& resources,
                             StreamListener* listener)
    : options_(std::move(options)),
      model_(std::move(model)),
      recurrent_(recurrent),
      per_frame_(model_->config().segmentation.has_value()),
      resources_(resources),
      listener_(listener),
      bytes_(options_.input == StreamOptions::Input::kContainer
                 ? std::make_shared<media::ByteStream>(resources.max_buffered_bytes,
                                                       media::ByteStream::Bound::kHeldBytes)
                 : nullptr),
      last_input_(StreamClock::now()) {
  if (options_.emit_every_seconds > 0) next_emit_seconds_ = options_.emit_every_seconds;
  if (options_.resume.has_value()) {
    head_state_ = options_.resume->head_state;
    frames_stepped_ = options_.resume->frames_stepped;
    newest_stepped_.index = options_.resume->next_frame_index - 1;
    newest_stepped_.seconds = options_.resume->next_frame_seconds;
    if (options_.emit_every_seconds > 0) {
      const double period = options_.emit_every_seconds;
      next_emit_seconds_ = (std::floor(options_.resume->next_frame_seconds / period) + 1) * period;
    }
  }
  if (options_.segments.has_value() && !options_.windows.has_value() &&
      options_.resume.has_value()) {
    segments_.emplace(static_cast<int>(model_->config().labels.size()), *options_.segments);
    // A checkpoint of this model's fingerprint names its labels; a damaged one that does not
    // leaves the tracker empty, as a cold start would.
    segments_->Restore(options_.resume->open_segments).IgnoreError();
  }
  next_checkpoint_ = StreamClock::now() + absl::ToChronoNanoseconds(options_.checkpoint_interval);
  if (options_.checkpoint_interval > absl::ZeroDuration()) {
    fingerprint_ = model::HeadStateFingerprint(model_->config(), options_.attention);
  }
  if (options_.windows.has_value() && !recurrent_ && !per_frame_) {
    sliding_ =
        model::SlidingWindowOptions{options_.windows->window_frames, options_.windows->hop_frames};
  }
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
  // A pulled source has a stall timeout of its own, and nobody pushes to it or to a whole video.
  if (options_.input == StreamOptions::Input::kUri ||
      options_.input == StreamOptions::Input::kBytes) {
    return false;
  }
  absl::MutexLock lock(&mutex_);
  return !input_over_ && failure_.ok() && !ended_ && last_input_ < cutoff;
}

bool StreamSession::ended() const {
  absl::MutexLock lock(&mutex_);
  return ended_;
}

void StreamSession::Feed() {
  NameThisThread("vidclf-feed");
  const absl::Status status =
      MakeSource()->Run([this](const SourceFrame& frame) { return Take(frame); });
  if (!status.ok()) Fail(status);
  absl::MutexLock lock(&mutex_);
  feed_over_ = true;
  ScheduleHead();
}

std::unique_ptr<FrameSource> StreamSession::MakeSource() {
  switch (options_.input) {
    case StreamOptions::Input::kContainer:
      return std::make_unique<ContainerSource>(*bytes_, LiveDecoding());
    case StreamOptions::Input::kBytes:
      return std::make_unique<MemorySource>(options_.video, LiveDecoding());
    case StreamOptions::Input::kUri: {
      UriSource::Options source;
      source.uri = options_.uri;
      source.allowlist = resources_.uri_allowlist;
      source.decode = LiveDecoding();
      source.stall_timeout = resources_.source_stall_timeout;
      source.max_reconnects = options_.max_reconnects;
      source.input_options = options_.input_options;
      source.realtime = options_.realtime;
      if (options_.resume.has_value()) {
        source.first_index = options_.resume->next_frame_index;
        source.first_seconds = options_.resume->next_frame_seconds;
      }
      UriSource::Callbacks callbacks;
      callbacks.on_event = [this](const SourceEvent& event) { listener_->OnSourceEvent(event); };
      callbacks.wait = [this](absl::Duration delay) { return WaitUnlessFailed(delay); };
      callbacks.on_reconnect = [this] { resources_.observer->SourceReconnect(); };
      return std::make_unique<UriSource>(std::move(source), std::move(callbacks));
    }
    default: {
      PictureSource::Options pictures;
      pictures.preprocess = pipeline::ModelPreprocessing(*model_);
      pictures.max_frame_side = resources_.max_frame_side;
      pictures.raw_rgb24 = options_.input == StreamOptions::Input::kRawRgb24;
      pictures.width = options_.width;
      pictures.height = options_.height;
      pictures.embed_stride = options_.embed_stride;
      pictures.sample_fps = options_.sample_fps;
      return std::make_unique<PictureSource>(pictures,
                                             [this](int64_t index) { return NextPicture(index); });
    }
  }
}

media::LiveDecodeOptions StreamSession::LiveDecoding() const {
  media::LiveDecodeOptions decode;
  decode.preprocess = pipeline::ModelPreprocessing(*model_);
  decode.embed_stride = options_.embed_stride;
  decode.sample_fps = options_.sample_fps;
  // Many feeds share the cores, one decoder thread each. A window call's video is not real-time,
  // and decoding is what bounds it: on two cores, a 10-minute 720p call took 1.77x the decode
  // limit with one thread and 1.06x with two (docs/segments-benchmark.md).
  decode.decoder_threads = options_.windows.has_value() ? 2 : 1;
  decode.max_frame_side = resources_.max_frame_side;
  decode.max_fragment_samples = resources_.max_fragment_samples;
  decode.cancellation = &cancellation_;
  decode.nvdec = resources_.nvdec;
  decode.hand_over_gpu_pictures = resources_.hand_over_gpu_pictures;
  return decode;
}

absl::StatusOr<std::optional<Picture>> StreamSession::NextPicture(int64_t index) {
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
    if (pictures_.empty()) return std::nullopt;  // the feed ended
    picture = std::move(pictures_.front());
    pictures_.pop_front();
    frames_seen_ = index + 1;
    room = TakeRoomCallback();
  }
  if (room) room();
  return picture;
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

absl::Status StreamSession::Take(const SourceFrame& frame) {
  {
    absl::MutexLock lock(&mutex_);
    frames_seen_ = std::max(frames_seen_, frame.index + 1);
    if (frame.seconds > last_seen_seconds_) {
      seen_end_seconds_ = frame.seconds + (frame.seconds - last_seen_seconds_);
      last_seen_seconds_ = frame.seconds;
    }
  }
  listener_->OnFrameDecoded(frame);
  if (frame.pixels == nullptr) return absl::OkStatus();  // off the embed stride
  FrameInfo info;
  info.index = frame.index;
  info.seconds = frame.seconds;
  info.arrived = frame.arrived;
  info.decoded = StreamClock::now();
  return Submit(info, *frame.pixels);
}

absl::Status StreamSession::Submit(const FrameInfo& info, const media::FrameBuffer& frame) {
  absl::StatusOr<torch::Tensor> pixels = pipeline::FrameTensor(frame, model());
  if (!pixels.ok()) return pixels.status();
  const StreamClock::time_point converted = StreamClock::now();
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
    FrameInfo& submitted = in_flight_[slot] = info;
    submitted.converted = converted;
    submitted.submitted = StreamClock::now();
  }
  resources_.observer->StreamFrames(1);
  resources_.batcher->Enqueue(shared_from_this(), /*pass=*/0, slot, *std::move(pixels));
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
    FrameInfo info = frame->second;
    info.embedded = StreamClock::now();
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
  bool answer_chunk = false;
  {
    absl::MutexLock lock(&mutex_);
    failure = failure_;
    step_closes_emit_ = false;
    if (failure.ok() && per_frame_ && !recurrent_) {
      // An offline head sees the frames together once a chunk or the video is whole.
      for (auto next = ready_.begin(); next != ready_.end() && next->first == next_to_step_;
           next = ready_.erase(next), ++next_to_step_) {
        kept_.push_back(std::move(next->second));
      }
    } else if (failure.ok()) {
      // The embedded frames next in order, up to the first that closes an emit period; a
      // segmentation model's one at a time, so that each frame has its scores.
      for (auto next = ready_.begin(); next != ready_.end() && next->first == next_to_step_ &&
                                       !step_closes_emit_ && !(per_frame_ && !step_.empty());
           next = ready_.erase(next), ++next_to_step_) {
        step_closes_emit_ = ClosesEmitPeriod(next->second.info, static_cast<int64_t>(step_.size()));
        step_.push_back(std::move(next->second));
      }
    } else {
      ready_.clear();  // frees the frames' memory at once
    }
    if (step_.empty() && !(feed_over_ && in_flight_.empty())) {
      answer_chunk = failure.ok() && static_cast<int64_t>(kept_.size()) >= kOfflineChunkFrames;
      if (!answer_chunk) {
        head_scheduled_ = false;
        return false;
      }
    }
  }
  if (answer_chunk) {
    if (absl::Status status = AnswerKeptFrames(/*all=*/false); !status.ok()) Fail(status);
    absl::MutexLock lock(&mutex_);
    head_scheduled_ = false;
    // What came meanwhile found the stream scheduled.
    if (!ready_.empty() || !failure_.ok() || (feed_over_ && in_flight_.empty())) ScheduleHead();
    return false;
  }
  if (!step_.empty()) {
    std::vector<torch::Tensor> embeddings;
    embeddings.reserve(step_.size());
    for (const ReadyFrame& frame : step_) embeddings.push_back(frame.embedding);
    *step = {model_.get(), options_.attention, torch::stack(embeddings), StatesToStep(), sliding_};
    return true;
  }
  // The feed is over and every frame it handed out is accounted for: open segments end.
  if (failure.ok() && per_frame_) {
    failure = FinishFrames();
  } else if (failure.ok() && options_.windows.has_value()) {
    failure = FinishWindows();
  } else if (failure.ok() && segments_.has_value()) {
    Settle(segments_->Finish());
  }
  if (frames_stepped_ > 0) MaybeCheckpoint(/*now=*/true);
  // A window call always ends with a message: the last events, and the final frame counts.
  if (failure.ok() && (options_.windows.has_value() || !pending_events_.empty() ||
                       (stepped_since_emit_ && !options_.events_only))) {
    Emit(/*labels=*/!options_.windows.has_value());
  }
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

void StreamSession::MaybeCheckpoint(bool now) {
  if (options_.checkpoint_interval <= absl::ZeroDuration() || options_.windows.has_value()) return;
  const StreamClock::time_point clock = StreamClock::now();
  if (!now && clock < next_checkpoint_) return;
  next_checkpoint_ = clock + absl::ToChronoNanoseconds(options_.checkpoint_interval);
  StreamCheckpoint checkpoint;
  // A copy: the next step may build on these tensors.
  checkpoint.head_state.frames_seen = head_state_.frames_seen;
  for (const torch::Tensor& tensor : head_state_.tensors) {
    checkpoint.head_state.tensors.push_back(tensor.defined() ? tensor.clone() : tensor);
  }
  checkpoint.frames_stepped = frames_stepped_;
  checkpoint.next_frame_index = newest_stepped_.index + 1;
  {
    absl::MutexLock lock(&mutex_);
    // One frame period after the newest stepped, as the feed spaces them.
    const double period = seen_end_seconds_ - last_seen_seconds_;
    checkpoint.next_frame_seconds =
        newest_stepped_.seconds + (period > 0 ? period : 1 / kDefaultPictureRate);
  }
  checkpoint.fingerprint = fingerprint_;
  if (segments_.has_value()) checkpoint.open_segments = segments_->Open();
  listener_->OnCheckpoint(std::move(checkpoint));
}

bool StreamSession::ClosesEmitPeriod(const FrameInfo& frame, int64_t earlier_in_step) const {
  if (options_.windows.has_value()) {
    return (frames_stepped_ + earlier_in_step + 1) % options_.windows->hop_frames == 0;
  }
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
  const StreamClock::time_point now = StreamClock::now();
  const auto seconds = [](StreamClock::duration duration) {
    return std::max(0.0, std::chrono::duration<double>(duration).count());
  };
  for (const ReadyFrame& frame : frames) {
    const FrameInfo& info = frame.info;
    resources_.observer->StreamFrameTimed(
        {seconds(info.decoded - info.arrived), seconds(info.converted - info.decoded),
         seconds(info.submitted - info.converted), seconds(info.embedded - info.submitted),
         seconds(now - info.embedded)});
  }

  const int64_t stepped_before = frames_stepped_;
  const double stepped_from_seconds =
      stepped_before == 0 ? frames.front().info.seconds : newest_stepped_.seconds;
  frames_stepped_ += static_cast<int64_t>(frames.size());
  if (stepped_before == 0) first_stepped_ = frames.front().info;
  newest_stepped_ = frames.back().info;
  if (options_.windows.has_value() && !per_frame_) {
    for (const ReadyFrame& frame : frames) recent_.push_back(frame.info);
    while (static_cast<int64_t>(recent_.size()) > options_.windows->window_frames) {
      recent_.pop_front();
    }
    SteppedWindows(result->first, std::move(result->second));
    return;
  }
  head_state_ = std::move(result->second.front());
  if (per_frame_) {
    MaybeCheckpoint(/*now=*/false);
    AnswerFrame(newest_stepped_, std::move(result->first));
    if (options_.windows.has_value()) {
      EmitWindow();
      return;
    }
  } else {
    probabilities_ = std::move(result->first);
    MaybeCheckpoint(/*now=*/false);
    TrackScores(stepped_from_seconds, newest_stepped_.seconds);
  }
  stepped_since_emit_ = true;
  // A segmentation model's answer covers its newest frame (AnswerFrame).
  if (recurrent_ && !per_frame_) {
    covered_first_ = first_stepped_;
    covered_last_ = newest_stepped_;
  } else if (!recurrent_) {
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
  // Frames after the last emit are stepped too, not held; settled segment events go out at
  // once.
  const bool events = !pending_events_.empty();
  if (!(step_closes_emit_ && !options_.events_only) && !events) return;
  Emit();
  if (step_closes_emit_ && options_.emit_every_seconds > 0) {
    const double period = options_.emit_every_seconds;
    next_emit_seconds_ = (std::floor(newest_stepped_.seconds / period) + 1) * period;
  }
}

std::vector<model::HeadState> StreamSession::StatesToStep() {
  if (!options_.windows.has_value() || !recurrent_ || per_frame_) return {head_state_};
  // Steps end at hops, so a hop's first frame starts a step: a window opens there.
  if (frames_stepped_ % options_.windows->hop_frames == 0) window_states_.emplace_back();
  return {window_states_.begin(), window_states_.end()};
}

void StreamSession::SteppedWindows(const torch::Tensor& probabilities,
                                   std::vector<model::HeadState> states) {
  const int64_t window = options_.windows->window_frames;
  const int64_t hop = options_.windows->hop_frames;
  // Steps end at hops, and windows end at hops too (the hop divides the window).
  const bool closes = frames_stepped_ >= window && (frames_stepped_ - window) % hop == 0;
  torch::Tensor answer;
  if (recurrent_) {
    window_states_.assign(std::make_move_iterator(states.begin()),
                          std::make_move_iterator(states.end()));
    if (closes) {  // the oldest window has taken its last frame
      answer = probabilities.narrow(/*dim=*/0, 0, 1);
      window_states_.pop_front();
    }
  } else {
    head_state_ = std::move(states.front());
    if (closes) answer = probabilities;
  }
  if (!closes) return;
  const double previous_last = covered_last_.seconds;
  probabilities_ = std::move(answer);
  covered_first_ = recent_.front();
  covered_last_ = recent_.back();
  ++windows_answered_;
  if (window > 1) {
    frame_spacing_ =
        (covered_last_.seconds - covered_first_.seconds) / static_cast<double>(window - 1);
  } else if (windows_answered_ > 1) {
    frame_spacing_ = covered_last_.seconds - previous_last;
  }
  TrackWindow();
  EmitWindow();
}

void StreamSession::EmitWindow() {
  if (!options_.events_only) {
    Emit();
  } else if (!pending_events_.empty()) {
    Emit(/*labels=*/false);
  }
}

void StreamSession::AnswerFrame(const FrameInfo& frame, torch::Tensor probabilities) {
  if (probabilities_.defined() && frame.seconds > covered_last_.seconds) {
    TrackScores(covered_last_.seconds, frame.seconds);
  }
  probabilities_ = std::move(probabilities);
  covered_first_ = covered_last_ = frame;
}

absl::Status StreamSession::AnswerKeptFrames(bool all) {
  size_t answered = 0;
  while (kept_.size() - answered >= static_cast<size_t>(kOfflineChunkFrames) ||
         (all && answered < kept_.size())) {
    const size_t count =
        std::min(kept_.size() - answered, static_cast<size_t>(kOfflineChunkFrames));
    std::vector<torch::Tensor> embeddings;
    embeddings.reserve(count);
    for (size_t k = answered; k < answered + count; ++k) embeddings.push_back(kept_[k].embedding);
    absl::StatusOr<torch::Tensor> probabilities =
        model_->ClassifyFrames(torch::stack(embeddings), options_.attention);
    if (!probabilities.ok()) return probabilities.status();
    for (size_t k = 0; k < count; ++k) {
      const FrameInfo& frame = kept_[answered + k].info;
      if (frames_stepped_++ == 0) first_stepped_ = frame;
      newest_stepped_ = frame;
      AnswerFrame(frame, probabilities->narrow(/*dim=*/0, static_cast<int64_t>(k), 1));
      EmitWindow();
    }
    answered += count;
  }
  kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(answered));
  return absl::OkStatus();
}

double StreamSession::VideoEnd(double last_stepped_seconds, double spacing) const {
  // The video ends one frame period after its last decoded frame.
  absl::MutexLock lock(&mutex_);
  return seen_end_seconds_ > last_stepped_seconds ? seen_end_seconds_
                                                  : last_stepped_seconds + spacing;
}

absl::Status StreamSession::FinishFrames() {
  if (!recurrent_) {
    if (absl::Status status = AnswerKeptFrames(/*all=*/true); !status.ok()) return status;
  }
  if (!probabilities_.defined()) {
    if (!options_.windows.has_value()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "the video has no sampled frame: it has no frames, or none the sampling took");
  }
  const double end =
      VideoEnd(covered_last_.seconds, 1 / model_->config().segmentation->frames_per_second);
  TrackScores(covered_last_.seconds, end);
  if (segments_.has_value()) Settle(segments_->Finish());
  return absl::OkStatus();
}

void StreamSession::TrackWindow() {
  // A window's scores speak for its middle hop: the first window's from the video's start, and
  // (FinishWindows) the last one's to its end.
  const int64_t window = static_cast<int64_t>(recent_.size());
  const int64_t middle_end = (window + options_.windows->hop_frames) / 2;
  const double to =
      middle_end < window ? recent_[middle_end].seconds : recent_.back().seconds + frame_spacing_;
  const double from = windows_answered_ == 1 ? first_stepped_.seconds : tracked_until_;
  if (to <= from) return;
  TrackScores(from, to);
  tracked_until_ = to;
}

absl::Status StreamSession::FinishWindows() {
  if (windows_answered_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the window (", options_.windows->window_frames,
        " sampled frames) is longer than the video (", frames_stepped_,
        " sampled frames); ask for a shorter window_frames, a higher frames_per_second or a "
        "smaller every_nth_frame"));
  }
  const double end = VideoEnd(newest_stepped_.seconds, frame_spacing_);
  if (end > tracked_until_) TrackScores(tracked_until_, end);
  if (segments_.has_value()) Settle(segments_->Finish());
  return absl::OkStatus();
}

void StreamSession::TrackScores(double from_seconds, double to_seconds) {
  if (!options_.segments.has_value()) return;
  if (!segments_.has_value()) {
    segments_.emplace(static_cast<int>(model_->config().labels.size()), *options_.segments);
  }
  const torch::Tensor scores =
      probabilities_.squeeze(0).to(torch::kCPU, torch::kFloat).contiguous();
  Settle(segments_->Add(
      from_seconds, to_seconds,
      absl::MakeConstSpan(scores.data_ptr<float>(), static_cast<size_t>(scores.numel()))));
}

void StreamSession::Settle(const std::vector<pipeline::SegmentEvent>& events) {
  const model::ModelConfig& config = model_->config();
  for (const pipeline::SegmentEvent& event : events) {
    resources_.observer->StreamSegmentEvent(config.name, config.labels[event.segment.label],
                                            event.kind == pipeline::SegmentEvent::Kind::kStart);
    pending_events_.push_back(event);
  }
}

void StreamSession::Emit(bool labels) {
  const model::ModelConfig& config = model_->config();
  StreamPrediction prediction;
  prediction.model = config.name;
  prediction.model_version = config.version;
  if (labels) {
    const int64_t k = std::min<int64_t>(options_.top_k > 0 ? options_.top_k : 5,
                                        static_cast<int64_t>(config.labels.size()));
    const auto [scores, indices] = probabilities_.squeeze(0).topk(k);
    for (int64_t i = 0; i < k; ++i) {
      prediction.top_k.emplace_back(config.labels[indices[i].item<int64_t>()],
                                    scores[i].item<float>());
    }
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
  for (pipeline::SegmentEvent& event : pending_events_) {
    prediction.events.emplace_back(event, config.labels[event.segment.label]);
  }
  pending_events_.clear();
  stepped_since_emit_ = false;
  listener_->OnPrediction(std::move(prediction));
}

}  // namespace vidclf::engine
