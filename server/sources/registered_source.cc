#include "server/sources/registered_source.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "media/uri_redaction.h"
#include "model/heads/head_state_codec.h"
#include "server/engine/uri_source.h"
#include "server/service/stream_messages.h"
#include "server/sources/source_checkpoint.h"
#include "server/sources/source_fields.h"

namespace vidclf::sources {
namespace {

using vidclf::v1::SourceStatus;

google::protobuf::Timestamp ToTimestamp(absl::Time time) {
  return google::protobuf::util::TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(time));
}

}  // namespace

engine::StreamOptions StreamOptionsOf(const vidclf::v1::Source& source) {
  engine::StreamOptions options = service::HeadOptionsFromConfig(source.config());
  options.input = engine::StreamOptions::Input::kUri;
  options.uri = source.uri();
  options.input_options.insert(source.input_options().begin(), source.input_options().end());
  options.own_reconnect_policy = true;
  options.max_reconnects =
      source.max_reconnects() == 0 ? -1 : service::CappedToInt(source.max_reconnects());
  options.realtime = source.realtime();
  options.checkpoint_interval = CheckpointIntervalOf(source);
  return options;
}

absl::Duration CheckpointIntervalOf(const vidclf::v1::Source& source) {
  return source.checkpoint_interval_seconds() > 0
             ? absl::Seconds(source.checkpoint_interval_seconds())
             : kDefaultCheckpointInterval;
}

absl::Duration MaxResumeGapOf(const vidclf::v1::Source& source) {
  return source.max_resume_gap_seconds() > 0 ? absl::Seconds(source.max_resume_gap_seconds())
                                             : kDefaultMaxResumeGap;
}

RegisteredSource::RegisteredSource(vidclf::v1::Source spec, engine::ClassifyEngine* engine,
                                   UpdateFanout* fanout)
    : spec_(std::move(spec)),
      stall_timeout_(StallTimeoutOf(spec_)),
      engine_(engine),
      fanout_(fanout) {}

void RegisteredSource::Start() {
  if (spec_.paused()) {
    absl::MutexLock lock(&mutex_);
    SetState(SourceStatus::PAUSED, "");
    return;
  }
  OpenSession();
}

void RegisteredSource::OpenSession() {
  {
    absl::MutexLock lock(&mutex_);
    if (stopping_ || session_open_) return;
    reopen_at_ = absl::InfiniteFuture();
    session_open_ = true;  // until OpenStream says otherwise: Stop waits for it
    self_ = shared_from_this();
    if (state_ != SourceStatus::BACKING_OFF) SetState(SourceStatus::CONNECTING, last_error_);
  }
  absl::StatusOr<std::shared_ptr<engine::StreamSession>> session =
      engine_->OpenStream(SessionOptions(), this);
  if (session.ok()) {
    bool cancel = false;
    {
      absl::MutexLock lock(&mutex_);
      failed_opens_ = 0;
      // The session may have ended already (credentials refused at once, say).
      if (session_open_) session_ = *session;
      cancel = stopping_;
    }
    // Outside the lock: the session may call back.
    if (cancel) (*session)->Cancel(absl::CancelledError("the source was let go of"));
    return;
  }
  ReleaseEarlier();                        // this one cannot go on from it yet
  std::shared_ptr<RegisteredSource> keep;  // released after the lock
  absl::MutexLock lock(&mutex_);
  session_open_ = false;
  keep = std::move(self_);
  const absl::Status& status = session.status();
  const std::string error(media::RedactSecrets(status.message()));
  // No room for another stream, or a drain: the registration stays, and it is tried again.
  if (absl::IsResourceExhausted(status) || absl::IsUnavailable(status)) {
    reopen_at_ = absl::Now() + engine::ReconnectDelay(++failed_opens_);
    SetState(SourceStatus::BACKING_OFF, error);
  } else {
    SetState(SourceStatus::FAILED, error);
  }
}

engine::StreamOptions RegisteredSource::SessionOptions() {
  engine::StreamOptions options = StreamOptionsOf(spec_);
  std::optional<std::string> candidate;
  {
    absl::MutexLock lock(&mutex_);
    candidate = std::move(resume_from_);
    resume_from_.reset();
  }
  if (!candidate.has_value()) return options;
  std::string note = "started cold: the model is not served";
  std::optional<vidclf::v1::SourceUpdate> ends;
  absl::StatusOr<std::shared_ptr<const model::VideoModel>> model =
      engine_->repository()->Find(options.model);
  if (model.ok()) {
    absl::StatusOr<SavedCheckpoint> saved = DecodeCheckpoint(*candidate, (*model)->device());
    const absl::Duration age = absl::Now() - (saved.ok() ? saved->taken : absl::Now());
    if (saved.ok()) {
      absl::MutexLock lock(&mutex_);
      frames_ += saved->counters.frames;
      reconnects_ += static_cast<int>(
          std::min<int64_t>(saved->counters.reconnects, std::numeric_limits<int>::max()));
    }
    if (!saved.ok()) {
      note = absl::StrCat("started cold: ", saved.status().message());
    } else if (saved->checkpoint.fingerprint !=
               model::HeadStateFingerprint((*model)->config(), options.attention)) {
      note = absl::StrCat("started cold: the model or its attention changed since the checkpoint (",
                          (*model)->config().name, " ", (*model)->config().version, " now)");
    } else if (age > MaxResumeGapOf(spec_)) {
      note = absl::StrCat("started cold: the checkpoint is ", absl::FormatDuration(age),
                          " old, past max_resume_gap_seconds");
    } else {
      note = absl::StrCat("resumed after ", saved->checkpoint.frames_stepped,
                          " frames stepped, from a checkpoint ", absl::FormatDuration(age), " old");
      options.resume = std::move(saved->checkpoint);
    }
    if (saved.ok() && !options.resume.has_value()) ends = EndsOfAnnounced(*saved);
  }
  absl::MutexLock lock(&mutex_);
  // Published with the first frame, once the publishers (MQTT) hear the registry.
  ended_before_ = std::move(ends);
  resumed_ = options.resume.has_value();
  resume_note_ = note;
  return options;
}

std::optional<vidclf::v1::SourceUpdate> RegisteredSource::EndsOfAnnounced(
    const SavedCheckpoint& saved) const {
  vidclf::v1::SourceUpdate update;
  update.set_name(spec_.name());
  const auto& open = saved.checkpoint.open_segments;
  for (size_t i = 0; i < open.size(); ++i) {
    if (!open[i].announced) continue;
    const pipeline::SegmentEvent end{pipeline::SegmentEvent::Kind::kEnd,
                                     pipeline::SegmentTracker::EndOf(open[i])};
    *update.mutable_events()->add_events() = service::ToMessage(
        end, i < saved.open_segment_labels.size() ? saved.open_segment_labels[i] : "");
  }
  if (update.events().events_size() == 0) return std::nullopt;
  return update;
}

void RegisteredSource::ResumeFrom(std::optional<std::string> checkpoint) {
  absl::MutexLock lock(&mutex_);
  resume_from_ = std::move(checkpoint);
}

std::optional<std::string> RegisteredSource::LatestCheckpoint() const {
  absl::MutexLock lock(&mutex_);
  return latest_checkpoint_;
}

std::optional<std::string> RegisteredSource::TakeUnsavedCheckpoint() {
  absl::MutexLock lock(&mutex_);
  if (checkpoint_saved_) return std::nullopt;
  checkpoint_saved_ = true;
  return latest_checkpoint_;
}

void RegisteredSource::OnCheckpoint(engine::StreamCheckpoint checkpoint) {
  SourceCounters counters;
  {
    absl::MutexLock lock(&mutex_);
    counters = {frames_, reconnects_};
  }
  std::vector<std::string> labels;
  if (const auto model = engine_->repository()->Find(StreamOptionsOf(spec_).model); model.ok()) {
    labels = (*model)->config().labels;
  }
  std::string bytes = EncodeCheckpoint(checkpoint, counters, labels, absl::Now());
  absl::MutexLock lock(&mutex_);
  latest_checkpoint_ = std::move(bytes);
  checkpoint_saved_ = false;
}

bool RegisteredSource::Stop(const absl::Status& reason, absl::Duration timeout) {
  BeginStop(reason);
  return WaitStopped(timeout);
}

void RegisteredSource::BeginStop(const absl::Status& reason) {
  ReleaseEarlier();
  std::shared_ptr<engine::StreamSession> session;
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    session = session_;
  }
  if (session != nullptr) session->Cancel(reason);
}

bool RegisteredSource::WaitStopped(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::shared_ptr<RegisteredSource> earlier;
  {
    absl::MutexLock lock(&mutex_);
    if (!mutex_.AwaitWithDeadline(absl::Condition(
                                      +[](bool* open) { return !*open; }, &session_open_),
                                  deadline)) {
      return false;
    }
    earlier = earlier_;
  }
  return earlier == nullptr || earlier->WaitStopped(deadline - absl::Now());
}

void RegisteredSource::TakeOverFrom(std::shared_ptr<RegisteredSource> earlier) {
  absl::MutexLock lock(&mutex_);
  earlier_ = std::move(earlier);
  release_earlier_by_ = absl::Now() + stall_timeout_;
  resume_note_ =
      "started cold (another model, attention or URI): took over from the session before it at "
      "its first frame";
}

bool RegisteredSource::TakingOver() const {
  absl::MutexLock lock(&mutex_);
  return earlier_ != nullptr;
}

bool RegisteredSource::Connected() const {
  absl::MutexLock lock(&mutex_);
  return state_ == SourceStatus::LIVE || state_ == SourceStatus::STALLED;
}

void RegisteredSource::ReleaseEarlier() {
  std::shared_ptr<RegisteredSource> earlier;
  {
    absl::MutexLock lock(&mutex_);
    if (earlier_ == nullptr || earlier_released_) return;
    earlier_released_ = true;
    earlier = earlier_;
  }
  // Silenced first: from now on only this one speaks for the source.
  earlier->Silence();
  earlier->BeginStop(absl::CancelledError("the source was updated"));
}

void RegisteredSource::Silence() {
  absl::MutexLock lock(&mutex_);
  silenced_ = true;
}

void RegisteredSource::InheritCounters(const RegisteredSource& earlier) {
  absl::MutexLock theirs(&earlier.mutex_);
  absl::MutexLock lock(&mutex_);
  frames_ = earlier.frames_;
  reconnects_ = earlier.reconnects_;
  last_error_ = earlier.last_error_;
  last_frame_seconds_ = earlier.last_frame_seconds_;
  last_frame_time_ = earlier.last_frame_time_;
}

void RegisteredSource::Tick() {
  bool reopen = false;
  bool release = false;
  std::shared_ptr<RegisteredSource> released;
  {
    absl::MutexLock lock(&mutex_);
    const absl::Time now = absl::Now();
    release = earlier_ != nullptr && !earlier_released_ && now >= release_earlier_by_;
    if (earlier_released_) released = earlier_;
    if (state_ == SourceStatus::LIVE && now - last_frame_time_ >= stall_timeout_) {
      SetState(
          SourceStatus::STALLED,
          absl::StrCat("no frame for ", absl::FormatDuration(stall_timeout_), " while connected"));
    }
    reopen = !stopping_ && !session_open_ && now >= reopen_at_;
  }
  if (release) ReleaseEarlier();
  // An earlier registration whose session has ended is forgotten, once the segments it had
  // announced have ended (its last checkpoint says which).
  if (released != nullptr && released->WaitStopped(absl::ZeroDuration())) {
    if (std::optional<std::string> last = released->LatestCheckpoint(); last.has_value()) {
      absl::StatusOr<SavedCheckpoint> saved = DecodeCheckpoint(*last, torch::kCPU);
      if (saved.ok()) {
        if (auto ends = EndsOfAnnounced(*saved)) fanout_->Publish(*ends, /*droppable=*/false);
      }
    }
    absl::MutexLock lock(&mutex_);
    earlier_.reset();
  }
  if (reopen) OpenSession();
}

vidclf::v1::Source RegisteredSource::Snapshot() const {
  vidclf::v1::Source source = spec_;
  source.set_uri(media::RedactUri(spec_.uri()));
  // The settings left at 0 answer with the values in force (max_reconnects' 0 is "no limit"
  // itself); the registration keeps its 0, so that it follows a later server's defaults.
  source.set_stall_timeout_seconds(absl::ToDoubleSeconds(StallTimeoutOf(spec_)));
  source.set_checkpoint_interval_seconds(absl::ToDoubleSeconds(CheckpointIntervalOf(spec_)));
  source.set_max_resume_gap_seconds(absl::ToDoubleSeconds(MaxResumeGapOf(spec_)));
  absl::MutexLock lock(&mutex_);
  *source.mutable_status() = StatusLocked();
  return source;
}

vidclf::v1::SourceStatus RegisteredSource::StatusLocked() const {
  SourceStatus status;
  status.set_state(state_);
  *status.mutable_state_time() = ToTimestamp(state_time_);
  status.set_last_error(last_error_);
  status.set_description(description_);
  status.set_frames(static_cast<uint64_t>(frames_));
  status.set_frames_per_second(FramesPerSecondLocked(absl::Now()));
  status.set_last_frame_seconds(last_frame_seconds_);
  if (last_frame_time_ != absl::InfinitePast()) {
    *status.mutable_last_frame_time() = ToTimestamp(last_frame_time_);
  }
  status.set_reconnects(static_cast<uint32_t>(reconnects_));
  status.set_lag_seconds(lag_seconds_);
  status.set_resumed(resumed_);
  status.set_resume_note(resume_note_);
  return status;
}

double RegisteredSource::FramesPerSecondLocked(absl::Time now) const {
  const int64_t second = absl::ToUnixSeconds(now);
  int64_t frames = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    // The 10 whole seconds before this one.
    if (count_seconds_[i] < second && count_seconds_[i] >= second - 10) frames += counts_[i];
  }
  // A source younger than the window is averaged over the whole seconds it has been seen.
  const double seen = std::clamp<double>(
      static_cast<double>(second - absl::ToUnixSeconds(first_frame_time_)), 1, 10);
  return first_frame_time_ == absl::InfinitePast() ? 0 : static_cast<double>(frames) / seen;
}

void RegisteredSource::SetState(State state, std::string error) {
  if (state == state_ && error == last_error_) return;
  const bool changed = state != state_;
  last_error_ = std::move(error);
  if (!changed) return;
  state_ = state;
  state_time_ = absl::Now();
  if (silenced_) return;
  vidclf::v1::SourceUpdate update;
  update.set_name(spec_.name());
  *update.mutable_status() = StatusLocked();
  fanout_->Publish(update, /*droppable=*/false);
}

void RegisteredSource::OnPrediction(engine::StreamPrediction prediction) {
  vidclf::v1::StreamPrediction message = service::ToMessage(prediction);
  vidclf::v1::SourceUpdate update;
  update.set_name(spec_.name());
  const double lag =
      std::chrono::duration<double>(engine::StreamClock::now() - prediction.newest_arrival).count();
  message.set_latency_ms(1e3 * lag);  // as published, before any subscriber's queue
  {
    absl::MutexLock lock(&mutex_);
    if (silenced_) return;
    lag_seconds_ = lag;
  }
  if (message.events_size() > 0) {
    vidclf::v1::SourceUpdate events;
    events.set_name(spec_.name());
    events.mutable_events()->mutable_events()->Swap(message.mutable_events());
    fanout_->Publish(events, /*droppable=*/false);
  }
  if (message.top_k_size() == 0) return;  // events only
  *update.mutable_prediction() = std::move(message);
  fanout_->Publish(update, /*droppable=*/true);
}

void RegisteredSource::OnSourceEvent(const engine::SourceEvent& event) {
  // A new connection that drops cannot take over: a camera may allow one session only.
  if (event.kind == engine::SourceEvent::Kind::kDropped) ReleaseEarlier();
  absl::MutexLock lock(&mutex_);
  if (event.kind == engine::SourceEvent::Kind::kConnected) {
    description_ = event.message;
    if (event.attempt > 1) ++reconnects_;
    return;
  }
  SetState(SourceStatus::BACKING_OFF, media::RedactSecrets(event.message));
}

void RegisteredSource::OnFrameDecoded(const engine::SourceFrame& frame) {
  const absl::Time now = absl::Now();
  const int64_t second = absl::ToUnixSeconds(now);
  bool first_after_earlier = false;
  std::optional<vidclf::v1::SourceUpdate> ended_before;
  {
    absl::MutexLock lock(&mutex_);
    first_after_earlier = earlier_ != nullptr && !earlier_released_;
    ended_before.swap(ended_before_);
    ++frames_;
    const size_t slot = static_cast<size_t>(second % static_cast<int64_t>(counts_.size()));
    if (count_seconds_[slot] != second) {
      count_seconds_[slot] = second;
      counts_[slot] = 0;
    }
    ++counts_[slot];
    if (first_frame_time_ == absl::InfinitePast()) first_frame_time_ = now;
    last_frame_seconds_ = frame.seconds;
    last_frame_time_ = now;
    if (state_ != SourceStatus::LIVE) SetState(SourceStatus::LIVE, last_error_);
  }
  // This one brings frames: the earlier registration is let go of, and heard no more.
  if (first_after_earlier) ReleaseEarlier();
  if (ended_before.has_value()) fanout_->Publish(*ended_before, /*droppable=*/false);
}

void RegisteredSource::OnEnd(const absl::Status& status) {
  ReleaseEarlier();
  std::shared_ptr<RegisteredSource> keep;  // the last owner, maybe: released after the lock
  absl::MutexLock lock(&mutex_);
  session_open_ = false;
  session_.reset();
  keep = std::move(self_);
  if (stopping_) return;
  const std::string error(media::RedactSecrets(status.message()));
  if (status.ok() || absl::IsResourceExhausted(status)) {
    // A file's end, or too many frames at once: a registered source is followed until deleted.
    reopen_at_ = absl::Now() + engine::ReconnectDelay(++failed_opens_);
    SetState(SourceStatus::BACKING_OFF, status.ok() ? "the source ended" : error);
  } else {
    // Credentials refused (retrying locks camera accounts), not a video, or max_reconnects.
    SetState(SourceStatus::FAILED, error);
  }
}

}  // namespace vidclf::sources
