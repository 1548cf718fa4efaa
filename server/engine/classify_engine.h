// Classifies whole videos in stages, with no thread held for a call's whole life, and follows
// live streams through the same backbone batcher and head stage (stream_session.h):
//
//   admission ──► decode stage ──► backbone batcher ──► head stage ──► answer
//   (count and     (a pool of       (frames of every     (a pool)
//    bytes bound)   decoding slots)  call, batched)
//
// Calls whose input arrives as they decode (uploads, URIs) decode on arrival slots of their own,
// so that a client that stalls never holds up calls whose bytes are in hand; while their decoder
// waits for bytes, its cores go to the others. Frames go to the batcher as they are decoded, and a
// call's frames are embedded once its decoder has handed over the last one (or they fill a batch;
// BatcherOptions::embed_while_decoding embeds them at once). Decoding and the backbone share one
// budget of cores: a call decoding alone uses them all, and the backbone takes the cores that
// decoding leaves free. Every call carries a cancellation token, checked between packets, before
// batching and before the head.
#ifndef VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_
#define VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "media/clip_options.h"
#include "media/uri_allowlist.h"
#include "media/video_source.h"
#include "server/engine/admission.h"
#include "server/engine/backbone_batcher.h"
#include "server/engine/engine_observer.h"
#include "server/engine/head_stepper.h"
#include "server/engine/model_repository.h"
#include "server/engine/reservation.h"
#include "server/engine/stream_session.h"
#include "server/engine/worker_pool.h"

namespace vidclf::engine {

struct EngineOptions {
  // The cores that decoding and the backbone share; 0: the machine's.
  int cores = 0;
  // Calls decoded at once; 0: as many as there are cores.
  int decode_slots = 0;
  // Calls decoded at once whose input arrives while they decode (uploads in chunks, URIs),
  // apart from the decode slots: a client that stalls holds one of these, never a slot that
  // calls with their bytes in hand wait for. 0: four times decode_slots.
  int arrival_slots = 0;
  // Threads that run heads.
  int head_threads = 1;
  // LibTorch intra-op threads of each head thread; 0: as many as `cores`. On two
  // cores, one stepped a lone stream's 6-layer causal-linear head in 2.5-3.0 ms against
  // 4.6-4.9 with two, and neither kept up with more real-time feeds of the demo model
  // (docs/streaming-benchmark.md).
  int head_intra_op_threads = 0;
  // Bind the backbone's intra-op threads one per CPU where the models run on the CPU and this
  // process may run on exactly `cores` CPUs (model::DedicatedCpus; model/thread_affinity.h says
  // why); elsewhere they are left to the kernel either way.
  bool bind_backbone_threads = true;
  // Most frames one call may ask to be sampled.
  int max_sampled_frames = 256;
  // Calls and bytes held at once; past them, calls are refused at once.
  AdmissionOptions admission;
  // How frames of different calls are batched for the backbone (max_threads is set from cores).
  BatcherOptions batching;
  // Decoding limits and budget; each call and its model set the sampling and preprocessing, the
  // engine the decoder threads. The decode budget shrinks to the call's deadline when that comes
  // sooner.
  media::ClipOptions decode = [] {
    media::ClipOptions clip;
    clip.max_input_bytes = 64LL << 20;
    clip.decode_timeout_ms = 30000;
    return clip;
  }();
  // A GPU was asked to decode (decode.nvdec, or none could be opened): calls decoded on the CPU
  // count as fallbacks (EngineObserver::ClipDecoded).
  bool decode_on_gpu = false;
  // With decode.nvdec: a call that decodes alone decodes on the CPU where its cores are faster
  // than one NVDEC decoder (media::ClipOptions::cpu_when_faster); --decode-device auto.
  bool cpu_when_faster_alone = false;
  // URIs that calls may ask the server to pull video from; empty: none.
  media::UriAllowlist uri_allowlist;
  // Live streams followed at once, counted from their first byte (ReserveStream); past it, a new
  // one is refused with RESOURCE_EXHAUSTED.
  int max_streams = 16;
  // A stream or an upload that sends no new bytes or frames for this long (before its config or
  // settings, too) is ended with DEADLINE_EXCEEDED.
  absl::Duration stream_idle_timeout = absl::Seconds(30);
  // What each stream may hold (its batcher, head stepper and observer are the engine's).
  StreamResources stream_resources;
};

struct ClassifyInput {
  // The encoded video: bytes that stay valid until `done` has been called, a URI to pull
  // (EngineOptions::uri_allowlist rules), or a stream that a producer appends chunks to while the
  // engine decodes them (an upload in progress). The producer closes a stream's reader once `done`
  // has been called, so that a call refused before decoding does not leave it accepting chunks.
  media::VideoSource source;
  // Empty selects the default model.
  std::string model;
  // Ranked labels to return; 0 means 5. Capped at the model's number of labels.
  int top_k = 0;
  // Frames to sample and how; num_frames 0 takes the model's default.
  media::SamplingOptions sampling = [] {
    media::SamplingOptions sampling;
    sampling.num_frames = 0;
    return sampling;
  }();
  // Attention substitution the model's bundle allows; empty runs the model's own.
  std::string attention;
  // The call is refused at once when the queue ahead would outlast it, and abandoned with
  // DEADLINE_EXCEEDED once it passes.
  absl::Time deadline = absl::InfiniteFuture();
};

struct ClassifyResult {
  std::string model;
  std::string model_version;
  std::vector<std::pair<std::string, float>> top_k;  // highest score first
  std::vector<double> frame_timestamps_seconds;
  std::string decoded_on;  // "cpu", or the GPU whose NVDEC decoded the frames ("cuda:0")
  double queue_seconds = 0;
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  // The time some batch holding the call's frames ran (batches side by side count once).
  double embed_seconds = 0;
  double head_seconds = 0;
  double total_seconds = 0;  // from admission to the answer
};

class ClassifyCall;

// What the caller keeps of a call it submitted. Thread-safe.
class CallHandle {
 public:
  explicit CallHandle(std::shared_ptr<ClassifyCall> call) : call_(std::move(call)) {}
  // Abandons the call: decoding stops at the next packet, its frames leave the backbone's queue
  // unembedded, and `done` gets `reason` once no stage holds the call any more.
  void Cancel(const absl::Status& reason);
  // Holds `bytes` more for the call (an upload's next chunk), within the engine's byte bound:
  // RESOURCE_EXHAUSTED past it, with nothing taken.
  absl::Status AddBytes(int64_t bytes);

 private:
  std::shared_ptr<ClassifyCall> call_;
};

// The engine's load, for gauges.
struct EngineLoad {
  int inflight_calls = 0;
  int64_t inflight_bytes = 0;
  int calls_waiting_to_decode = 0;
  int calls_decoding = 0;
  int64_t frames_waiting_for_backbone = 0;
  // Live streams open, by model, and those whose config has not arrived yet.
  std::map<std::string, int> active_streams;
  int streams_awaiting_config = 0;
};

class ClassifyEngine {
 public:
  using Callback = std::function<void(absl::StatusOr<ClassifyResult>)>;

  // `observer` (none when null) must outlive the engine.
  static absl::StatusOr<std::unique_ptr<ClassifyEngine>> Create(
      const EngineOptions& options, std::shared_ptr<const ModelRepository> repository,
      EngineObserver* observer = nullptr);
  // Cancels the calls in flight and waits until each has been answered.
  ~ClassifyEngine();

  // Holds a call's place from its first byte, before its request has arrived (an upload's
  // settings), or refuses it at once as Submit does when the count of calls is at its bound or
  // the engine is draining. Unless Submit takes it over, it expires after stream_idle_timeout
  // with nothing arriving (Reservation::NoteProgress), telling `on_idle` (DEADLINE_EXCEEDED).
  // Thread-safe.
  absl::StatusOr<std::shared_ptr<Reservation>> ReserveCall(
      std::function<void(const absl::Status&)> on_idle);

  // Admits a call and queues it for decoding, or refuses it at once: a bad request
  // (INVALID_ARGUMENT, NOT_FOUND), a bound passed (RESOURCE_EXHAUSTED), a deadline the queue
  // would outlast (DEADLINE_EXCEEDED), or draining (UNAVAILABLE). With a `reservation` from
  // ReserveCall, the call takes its place (DEADLINE_EXCEEDED when it has expired). `done` is
  // called exactly once: on an engine thread, or on this one when the call is refused, and then
  // the handle is null. Thread-safe.
  std::unique_ptr<CallHandle> Submit(ClassifyInput input, Callback done,
                                     std::shared_ptr<Reservation> reservation = nullptr);

  // The models served now. A call keeps the model it started with.
  std::shared_ptr<const ModelRepository> repository() const;
  // Serves `repository` from now on; calls in flight finish on their models.
  void ReplaceRepository(std::shared_ptr<const ModelRepository> repository);

  // Holds a stream's place from its first byte, before its config has arrived: it counts
  // against max_streams, as ReserveCall's calls do against the admission bounds.
  absl::StatusOr<std::shared_ptr<Reservation>> ReserveStream(
      std::function<void(const absl::Status&)> on_idle);

  // Opens a live stream that `listener` hears (see StreamSession): predictions as the feed goes,
  // then OnEnd exactly once. Refused at once with INVALID_ARGUMENT (bad options), NOT_FOUND (no
  // such model), RESOURCE_EXHAUSTED (max_streams open), PERMISSION_DENIED (a URI not allowed),
  // UNAVAILABLE (draining) or, when the `reservation` from ReserveStream that it takes over has
  // expired, DEADLINE_EXCEEDED; `listener` is not called then. `options` is taken whole: a
  // window call's video is moved into the session, not copied. Thread-safe.
  absl::StatusOr<std::shared_ptr<StreamSession>> OpenStream(
      StreamOptions options, StreamListener* listener,
      std::shared_ptr<Reservation> reservation = nullptr);

  // Refuses every new call and stream with UNAVAILABLE from now on, and ends the streams open,
  // and those reserved still waiting for their StreamConfig, with UNAVAILABLE at once: a live
  // feed never ends by itself, so its client should reconnect to another replica rather than
  // wait for the drain.
  void StartDraining();
  // Whether StartDraining was called: the server is no longer ready. Thread-safe.
  bool draining() const;
  // Waits until no call is in flight (reserved calls whose request is still arriving included)
  // and no stream is open, or `deadline`; true when none is.
  bool WaitUntilIdle(absl::Time deadline);
  // Cancels every call in flight with `reason`, and ends the reserved ones with it.
  void CancelAll(const absl::Status& reason);

  EngineLoad load() const;
  const EngineOptions& options() const { return options_; }

 private:
  friend class ClassifyCall;

  ClassifyEngine(const EngineOptions& options, std::shared_ptr<const ModelRepository> repository,
                 EngineObserver* observer);
  // Estimated wait for a decode slot, from the calls ahead and recent decoding times.
  absl::Duration EstimatedDecodeWait() const;
  // Called by a call as it is answered.
  void Forget(ClassifyCall* call);
  // The stream watchdog: ends idle streams and reservations, and joins the threads of the
  // streams that ended.
  void WatchStreams();
  // Joins and forgets the streams that have ended, and ends idle ones and idle reservations.
  void SweepStreams();
  // OK when one more stream may open: not draining (UNAVAILABLE), and, unless `place_held` (a
  // reservation's), fewer than max_streams open or reserved (RESOURCE_EXHAUSTED).
  absl::Status RoomForAStream(bool place_held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The reservations of `kind` still held.
  std::vector<std::shared_ptr<Reservation>> Reservations(Reservation::Kind kind);
  // Watches `reservation` from now on.
  std::shared_ptr<Reservation> Watch(std::shared_ptr<Reservation> reservation);

  const EngineOptions options_;
  EngineObserver* const observer_;
  NullObserver null_observer_;
  // Shared with the calls, which hand their bytes back when they are destroyed.
  const std::shared_ptr<Admission> admission_;
  std::atomic<int> calls_decoding_{0};
  // Live streams open (streams_'s size, read by the batcher without the lock).
  std::atomic<int> live_feeds_{0};
  // Seconds per decode, smoothed; for the deadline estimate.
  std::atomic<double> recent_decode_seconds_{0};

  mutable absl::Mutex mutex_;
  std::shared_ptr<const ModelRepository> repository_ ABSL_GUARDED_BY(mutex_);
  // Every call admitted and not yet answered, for CancelAll and WaitUntilIdle.
  std::map<const ClassifyCall*, std::weak_ptr<ClassifyCall>> unanswered_ ABSL_GUARDED_BY(mutex_);
  // Every stream opened and not yet joined.
  std::vector<std::shared_ptr<StreamSession>> streams_ ABSL_GUARDED_BY(mutex_);
  // Every reservation made, for the watchdog; and the streams' ones not yet over.
  std::vector<std::weak_ptr<Reservation>> reservations_ ABSL_GUARDED_BY(mutex_);
  int reserved_streams_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;

  // Stages; destroyed in reverse order: the decode slots first, the head threads last. The head
  // stepper's rounds run on the head threads, so it goes after them.
  HeadStepper head_stepper_;
  WorkerPool head_stage_;
  BackboneBatcher batcher_;
  WorkerPool decode_stage_;
  WorkerPool arrival_stage_;
  std::thread stream_watchdog_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_
