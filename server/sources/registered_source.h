// One registered source's life, independent of any call: it drives an engine stream session over
// the source's URI and keeps its state machine and counters.
//
//   CONNECTING ──first frame──► LIVE ──no frame for stall_timeout──► STALLED
//        ▲                       │ ▲                                   │
//        │                     drop└──────────── frame ────────────────┘
//        │                       ▼
//        └── open refused ── BACKING_OFF ──(credentials refused, not a video,
//            (room, drain)                  max_reconnects)──► FAILED
//   PAUSED while Source.paused.
//
// The session follows the source again after each drop by itself (engine::UriSource); this class
// reopens the session only when the engine refused to open it (no room for another stream) or
// the source ended (a file), and never after credentials were refused.
//
// A registration that replaces one whose head cannot go on (another model or attention, another
// URI) may take over from it: the earlier one goes on predicting while this one connects, and is
// let go of, and heard no more, at this one's first frame, so that the change leaves no gap.
#ifndef VIDCLF_SERVER_SOURCES_REGISTERED_SOURCE_H_
#define VIDCLF_SERVER_SOURCES_REGISTERED_SOURCE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/engine/classify_engine.h"
#include "server/sources/source_checkpoint.h"
#include "server/sources/update_fanout.h"
#include "vidclf/v1/sources.pb.h"

namespace vidclf::sources {

inline constexpr absl::Duration kDefaultCheckpointInterval = absl::Seconds(10);
inline constexpr absl::Duration kDefaultMaxResumeGap = absl::Seconds(120);

// What a registered source's session is opened with (without a checkpoint to resume from).
engine::StreamOptions StreamOptionsOf(const vidclf::v1::Source& source);
// How often its head's state is checkpointed.
absl::Duration CheckpointIntervalOf(const vidclf::v1::Source& source);
// How old a checkpoint it may resume from.
absl::Duration MaxResumeGapOf(const vidclf::v1::Source& source);

class RegisteredSource final : public engine::StreamListener,
                               public std::enable_shared_from_this<RegisteredSource> {
 public:
  // `spec` is the registration (name set, status ignored). `engine` and `fanout` must outlive
  // every session this source opens (Stop waits for it).
  RegisteredSource(vidclf::v1::Source spec, engine::ClassifyEngine* engine, UpdateFanout* fanout);

  // Starts following the source, or says PAUSED. Once.
  void Start();
  // Lets go of the source with `reason` (an RTSP camera is sent its TEARDOWN) and waits up to
  // `timeout` for its session to end; true when it has. Nothing is opened again. Thread-safe.
  bool Stop(const absl::Status& reason, absl::Duration timeout);
  // Starts the stop without waiting; WaitStopped waits. For letting go of many at once.
  void BeginStop(const absl::Status& reason);
  bool WaitStopped(absl::Duration timeout);
  // Takes the counters of the source this one replaces (an update).
  void InheritCounters(const RegisteredSource& earlier);
  // Lets `earlier`, which follows the same source, go on until this one's first frame (or its
  // first failure, or its stall timeout), then lets go of it. Before Start.
  void TakeOverFrom(std::shared_ptr<RegisteredSource> earlier);
  // Whether it still holds an earlier registration it takes over from.
  bool TakingOver() const;
  // Whether a session brings its frames (LIVE or STALLED).
  bool Connected() const;
  // The first session goes on from this checkpoint (source_checkpoint.h) when it fits the model
  // and is recent enough; the status says whether it did. Before Start.
  void ResumeFrom(std::optional<std::string> checkpoint);
  // The latest checkpoint, if any; and, once each, the one not yet saved.
  std::optional<std::string> LatestCheckpoint() const;
  std::optional<std::string> TakeUnsavedCheckpoint();
  // The registry's clock: notices a stall, and reopens a session when its back-off is over.
  void Tick();

  // The registration, as given.
  const vidclf::v1::Source& spec() const { return spec_; }
  // The registration with its status now, its URI redacted.
  vidclf::v1::Source Snapshot() const;

  // engine::StreamListener.
  void OnPrediction(engine::StreamPrediction prediction) override;
  void OnSourceEvent(const engine::SourceEvent& event) override;
  void OnFrameDecoded(const engine::SourceFrame& frame) override;
  void OnEnd(const absl::Status& status) override;
  void OnCheckpoint(engine::StreamCheckpoint checkpoint) override;

 private:
  using State = vidclf::v1::SourceStatus::State;
  // Opens the engine's session, or says why not and when to try again.
  void OpenSession();
  // The stream's options, resuming from resume_from_ (once) when it fits; when it does not, the
  // segments it had announced end where they last held (ended_before_).
  engine::StreamOptions SessionOptions();
  // The SEGMENT_ENDs of the segments `saved` had announced, if any.
  std::optional<vidclf::v1::SourceUpdate> EndsOfAnnounced(const SavedCheckpoint& saved) const;
  // Lets go of the registration this one takes over from, once, and silences it.
  void ReleaseEarlier();
  // Publishes nothing more: a replacement speaks for the source.
  void Silence();
  // Records a new state, and publishes the status when it changed.
  void SetState(State state, std::string error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  vidclf::v1::SourceStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  double FramesPerSecondLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const vidclf::v1::Source spec_;
  const absl::Duration stall_timeout_;
  engine::ClassifyEngine* const engine_;
  UpdateFanout* const fanout_;

  mutable absl::Mutex mutex_;
  State state_ ABSL_GUARDED_BY(mutex_) = vidclf::v1::SourceStatus::CONNECTING;
  absl::Time state_time_ ABSL_GUARDED_BY(mutex_) = absl::Now();
  std::string last_error_ ABSL_GUARDED_BY(mutex_);
  std::string description_ ABSL_GUARDED_BY(mutex_);
  int64_t frames_ ABSL_GUARDED_BY(mutex_) = 0;
  // Frames per wall-clock second over the 10 whole seconds before this one: counts_[s % 11]
  // holds second s's (one slot more than the window, for the second under way).
  std::array<int64_t, 11> counts_ ABSL_GUARDED_BY(mutex_) = {};
  std::array<int64_t, 11> count_seconds_ ABSL_GUARDED_BY(mutex_) = {};
  absl::Time first_frame_time_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  double last_frame_seconds_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Time last_frame_time_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  int reconnects_ ABSL_GUARDED_BY(mutex_) = 0;
  double lag_seconds_ ABSL_GUARDED_BY(mutex_) = 0;
  // The session now (null between sessions), and this object kept alive while it may call.
  std::shared_ptr<engine::StreamSession> session_ ABSL_GUARDED_BY(mutex_);
  std::shared_ptr<RegisteredSource> self_ ABSL_GUARDED_BY(mutex_);
  bool session_open_ ABSL_GUARDED_BY(mutex_) = false;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // When to open a session again after the engine refused one; failed opens in a row.
  absl::Time reopen_at_ ABSL_GUARDED_BY(mutex_) = absl::InfiniteFuture();
  int failed_opens_ ABSL_GUARDED_BY(mutex_) = 0;
  // The checkpoint to resume from, and whether the source did (or why not).
  std::optional<std::string> resume_from_ ABSL_GUARDED_BY(mutex_);
  bool resumed_ ABSL_GUARDED_BY(mutex_) = false;
  std::string resume_note_ ABSL_GUARDED_BY(mutex_) = "no checkpoint";
  std::optional<std::string> latest_checkpoint_ ABSL_GUARDED_BY(mutex_);
  // The ends of the segments a checkpoint it could not go on from had announced, to publish.
  std::optional<vidclf::v1::SourceUpdate> ended_before_ ABSL_GUARDED_BY(mutex_);
  bool checkpoint_saved_ ABSL_GUARDED_BY(mutex_) = true;
  // The registration this one takes over from (TakeOverFrom), kept until its session has ended;
  // whether it was let go of, and when it is at the latest.
  std::shared_ptr<RegisteredSource> earlier_ ABSL_GUARDED_BY(mutex_);
  bool earlier_released_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Time release_earlier_by_ ABSL_GUARDED_BY(mutex_) = absl::InfiniteFuture();
  bool silenced_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace vidclf::sources

#endif  // VIDCLF_SERVER_SOURCES_REGISTERED_SOURCE_H_
