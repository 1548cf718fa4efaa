// One live feed that the engine follows: its frames go through the same backbone batcher as the
// frames of whole-video calls, and its head steps once per embedded frame, carrying O(1) state
// when the head has a recurrent step (the GRU; causal-linear attention) or re-running the model's
// sliding window otherwise.
//
//   feed ──► feeder thread ──► backbone batcher ──► head stage ──► listener
//   (bytes,     (decodes,        (batched with       (steps in frame order,
//    pictures    converts)        every other call)    emits per the policy)
//    or a URI)
//
// Memory per stream is bounded: the bytes waiting to be decoded, the pictures waiting to be
// converted and the frames between decoder and head. Past those, the feed is not read (the
// producer is told when there is room again), so a fast sender is slowed down and never refused.
#ifndef VIDCLF_SERVER_ENGINE_STREAM_SESSION_H_
#define VIDCLF_SERVER_ENGINE_STREAM_SESSION_H_

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancellation.h"
#include "media/byte_stream.h"
#include "media/live_decoder.h"
#include "media/nvdec_device.h"
#include "media/uri_allowlist.h"
#include "model/video_model.h"
#include "pipeline/segment_tracker.h"
#include "server/engine/backbone_batcher.h"
#include "server/engine/engine_observer.h"
#include "server/engine/frame_source.h"
#include "server/engine/head_stepper.h"
#include "server/engine/picture_source.h"
#include "server/engine/uri_source.h"

namespace vidclf::engine {

using StreamClock = std::chrono::steady_clock;

// A ClassifySegments call: the head answers windows of the sampled frames rather than following
// them. Every hop_frames-th frame starts a window of window_frames frames; a recurrent head steps
// a state per open window (window_frames / hop_frames of them), the others run over each
// window's embeddings.
struct WindowOptions {
  // 0: the model's num_frames.
  int window_frames = 0;
  // Must divide window_frames; 0: half the window when it is even, else the whole window.
  int hop_frames = 0;
};
// The most frames a window may hold, and windows a frame may lie in.
inline constexpr int kMaxWindowFrames = 1024;
inline constexpr int kMaxWindowsPerFrame = 32;
// The fastest sampling a call may ask for, in frames per second of media time.
inline constexpr double kMaxSampleFps = 1000;

// Where a stream's head had got to, so that a later stream can go on from there (a registered
// source across a restart): the head's state after the frames stepped, and where the next frame
// falls in the feed.
struct StreamCheckpoint {
  model::HeadState head_state;
  // Frames stepped, and the index and media time the next frame of the feed takes.
  int64_t frames_stepped = 0;
  int64_t next_frame_index = 0;
  double next_frame_seconds = 0;
  // model::HeadStateFingerprint of the model and attention that made it.
  std::string fingerprint;
  // The segment tracker's open segments (StreamOptions::segments), to go on from.
  std::vector<pipeline::SegmentTracker::OpenSegment> open_segments;
};

// What a stream reads, and when it answers.
struct StreamOptions {
  // Empty selects the default model.
  std::string model;
  // Attention substitution the model's bundle allows; empty runs the model's own.
  std::string attention;
  // Ranked labels per prediction; 0 means 5. Capped at the model's number of labels.
  int top_k = 0;
  // A prediction every this many embedded frames, unless emit_every_seconds > 0: then one each
  // time the media time passes another multiple of it.
  int emit_every_frames = 1;
  double emit_every_seconds = 0;
  // Embed every embed_stride-th frame of the feed, or, when sample_fps > 0, the first frame at or
  // after each multiple of 1 / sample_fps seconds of media time.
  int embed_stride = 1;
  double sample_fps = 0;
  // kUri: the feeder pulls the source itself, and follows it again when it drops. kBytes: the
  // whole video is in `video`.
  enum class Input { kContainer, kEncodedImages, kRawRgb24, kUri, kBytes };
  Input input = Input::kContainer;
  std::string video;
  // The call asked for no sampling (neither embed_stride nor sample_fps): a segmentation model
  // then samples at the rate it was trained at (FitToSegmentationModel).
  bool default_sampling = false;
  // kRawRgb24 only: every picture's size.
  int width = 0;
  int height = 0;
  // kUri only: the source (the engine's allowlist must allow it), and the failed attempts in a
  // row to follow it again before giving up; negative: the engine's most.
  std::string uri;
  int max_reconnects = -1;
  // kUri only: max_reconnects is a registered source's own (server/sources/), not capped by the
  // engine's, and negative means no limit.
  bool own_reconnect_policy = false;
  // kUri only: FFmpeg input options (media::ValidateInputOptions), rtsp_transport say.
  media::InputOptions input_options;
  // kUri only: frames are handed on no faster than their media times pass (a recorded file
  // played as a camera would send it).
  bool realtime = false;
  // kUri only: the head starts from this checkpoint's state and frame counts; a source with an
  // end (a file) skips the frames before its next_frame_index, a live one numbers its frames on
  // from there. Its fingerprint must be the model's (the caller checks).
  std::optional<StreamCheckpoint> resume;
  // When positive (kUri, no windows), the listener hears a checkpoint at most this often, and
  // once more when the stream ends.
  absl::Duration checkpoint_interval = absl::ZeroDuration();
  // When set, segment events (pipeline/segment_tracker.h) over the head's scores after each
  // step; with events_only, only predictions that carry events are emitted.
  std::optional<pipeline::SegmentOptions> segments;
  bool events_only = false;
  // When set, a prediction per window instead of the emit policy, and the segments tracked over
  // the windows' scores.
  std::optional<WindowOptions> windows;
};

// Checks the options' own ranges (not the model); INVALID_ARGUMENT naming the field.
absl::Status ValidateStreamOptions(const StreamOptions& options);

// A segmentation model (ModelConfig::segmentation) answers every frame it samples, at the rate it
// was trained at: the call's sampling becomes that rate (another is INVALID_ARGUMENT), and a
// window call's windows become single frames (windows asked for are INVALID_ARGUMENT). A head
// without a recurrent step sees whole videos: it answers window calls only.
absl::Status FitToSegmentationModel(const model::ModelConfig& config, bool recurrent,
                                    StreamOptions& options);

// An offline segmentation head (no recurrent step) answers a video's frames in chunks of this
// many, each seen whole: 10 minutes at 4 frames per second. It bounds the memory of a call, which
// for softmax attention grows with the square of the frames.
inline constexpr int64_t kOfflineChunkFrames = 2400;

struct StreamPrediction {
  std::string model;
  std::string model_version;
  // Highest score first; empty when a window call's prediction carries only events.
  std::vector<std::pair<std::string, float>> top_k;
  // The frames it covers, by index in the feed and by media time: from the first frame for a
  // recurrent head, the latest window for the others.
  int64_t first_frame = 0;
  int64_t last_frame = 0;
  double first_seconds = 0;
  double last_seconds = 0;
  int64_t frames_seen = 0;
  int64_t frames_embedded = 0;
  // When the bytes of the newest frame it covers arrived.
  StreamClock::time_point newest_arrival;
  // Segment events settled since the previous prediction, in time order, with their labels.
  std::vector<std::pair<pipeline::SegmentEvent, std::string>> events;
};

// Hears one stream. Predictions come from engine threads, one at a time, in order; source events
// from the feeder thread, as they happen, so predictions of frames decoded before a drop may
// follow it. Nothing comes after OnEnd.
class StreamListener {
 public:
  virtual ~StreamListener() = default;
  virtual void OnPrediction(StreamPrediction prediction) = 0;
  virtual void OnSourceEvent(const SourceEvent& /*event*/) {}
  // Each frame of the feed as it is decoded, from the feeder thread; must not block.
  virtual void OnFrameDecoded(const SourceFrame& /*frame*/) {}
  // StreamOptions::checkpoint_interval's checkpoints, from an engine thread, the last just
  // before OnEnd.
  virtual void OnCheckpoint(StreamCheckpoint /*checkpoint*/) {}
  // Exactly once, last: OK when the feed ended and every frame was answered for; otherwise why
  // the stream stopped.
  virtual void OnEnd(const absl::Status& status) = 0;
};

// Bounds and shared parts a session works with; all must outlive it.
struct StreamResources {
  BackboneBatcher* batcher = nullptr;
  HeadStepper* head_stepper = nullptr;
  EngineObserver* observer = nullptr;
  // Bytes of container input held before the feed stops being read, and pictures waiting.
  int64_t max_buffered_bytes = 8 << 20;
  int max_buffered_pictures = 8;
  // Frames between the decoder and the head before decoding waits.
  int max_frames_in_flight = 32;
  int max_frame_side = 8192;
  int64_t max_fragment_samples = 1 << 20;
  // Input::kUri: the URIs allowed (must outlive the session), the silence after which a source
  // has dropped, and the most failed attempts in a row to follow it again.
  const media::UriAllowlist* uri_allowlist = nullptr;
  // Decodes feeds on this GPU where it can; null: on the CPU.
  const media::NvdecDevice* nvdec = nullptr;
  // Its frames go to the backbone as NVDEC wrote them (media::LiveDecodeOptions).
  bool hand_over_gpu_pictures = false;
  absl::Duration source_stall_timeout = absl::Seconds(10);
  int max_source_reconnects = 5;
};

class StreamSession : public FrameOwner,
                      public HeadStepper::Stream,
                      public std::enable_shared_from_this<StreamSession> {
 public:
  // `listener` must outlive the session's OnEnd. Start() starts it.
  StreamSession(StreamOptions options, std::shared_ptr<const model::VideoModel> model,
                bool recurrent, const StreamResources& resources, StreamListener* listener);
  ~StreamSession() override;

  // Starts the thread that decodes the feed.
  void Start();

  // Producer side (the RPC), one thread at a time. Each returns OK with `*room` saying whether
  // more may be pushed at once; when it is false, call CallWhenRoom before pushing again.
  // INVALID_ARGUMENT for input of the wrong kind, FAILED_PRECONDITION once the stream is over.
  absl::Status PushBytes(absl::string_view chunk, bool* room);
  absl::Status PushPicture(std::string data, double timestamp_seconds, bool* room);
  // Calls `callback` once there is room for more input, or once the stream is over (at once
  // when either holds already), never after the listener's OnEnd has returned.
  void CallWhenRoom(std::function<void()> callback);
  // The feed ended: what is queued is answered, then OnEnd(OK).
  void FinishInput();
  // Stops the stream: OnEnd(reason) follows once no stage holds its frames.
  void Cancel(const absl::Status& reason);

  // Whether the stream still expects input and none has arrived since `cutoff`.
  bool IdleSince(StreamClock::time_point cutoff) const;
  // Whether OnEnd has been delivered; the engine then joins the thread and forgets the session.
  bool ended() const;
  // Waits for the feeder thread; call once ended() or after Cancel.
  void Join();
  const std::string& model_name() const { return model_->config().name; }

  // FrameOwner.
  const model::VideoModel& model() const override { return *model_; }
  bool Wants(int pass) const override;
  void Embedded(int pass, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                const BatchReport& report) override;

  // HeadStepper::Stream: the embedded frames next in order, up to where an emit period closes;
  // once the feed is over and every frame is accounted for, ends the stream instead.
  bool NextStep(HeadStepper::Step* step) override;
  // Takes the step's state and probabilities, and emits when the step closed an emit period.
  void Stepped(HeadStepper::StepResult result) override;

 private:
  struct FrameInfo {
    int64_t index = 0;
    double seconds = 0;
    StreamClock::time_point arrived;
    // When the decoder gave it out, it was converted, handed to the backbone, and embedded
    // (EngineObserver::StreamFrameTimed).
    StreamClock::time_point decoded;
    StreamClock::time_point converted;
    StreamClock::time_point submitted;
    StreamClock::time_point embedded;
  };
  struct ReadyFrame {
    torch::Tensor embedding;
    FrameInfo info;
  };
  // The feeder thread's body: runs the source the input asks for.
  void Feed();
  std::unique_ptr<FrameSource> MakeSource();
  // How container and URI feeds are decoded.
  media::LiveDecodeOptions LiveDecoding() const;
  // PictureSource::NextPicture: waits for picture `index` and makes room for the next.
  absl::StatusOr<std::optional<Picture>> NextPicture(int64_t index);
  // Waits `delay`, or less when the stream fails meanwhile; false then.
  bool WaitUnlessFailed(absl::Duration delay);
  // Counts a frame of the feed and hands it to the batcher when it was converted.
  absl::Status Take(const SourceFrame& frame);
  // Hands one converted frame to the batcher, once there is room between decoder and head.
  absl::Status Submit(const FrameInfo& info, const media::FrameBuffer& frame);
  // Makes sure the head stepper has this session scheduled. `mutex_` held.
  void ScheduleHead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `frame`, stepped after `earlier_in_step` frames of the same step, closes an emit
  // period (a hop, for windows).
  bool ClosesEmitPeriod(const FrameInfo& frame, int64_t earlier_in_step) const;
  // The states the next step takes its frames into: the stream's, or each open window's.
  std::vector<model::HeadState> StatesToStep();
  // Takes a window call's step: answers the window it closed, if any.
  void SteppedWindows(const torch::Tensor& probabilities, std::vector<model::HeadState> states);
  // Feeds the tracker the window just answered (probabilities_, recent_), over its middle hop.
  void TrackWindow();
  // A window call's end: the last window's scores run to the video's end, and open segments
  // end; INVALID_ARGUMENT when no window was whole.
  absl::Status FinishWindows();
  // Tells the listener where the head has got to, when a checkpoint is due (or `now`).
  void MaybeCheckpoint(bool now);
  // Feeds the tracker (when segments are asked for) probabilities_ over [from, to).
  void TrackScores(double from_seconds, double to_seconds);
  // A segmentation model's answer for `frame`: the previous frame's scores run up to it in the
  // tracker, and these stand from it on.
  void AnswerFrame(const FrameInfo& frame, torch::Tensor probabilities);
  // An offline head's answers for the frames kept, in chunks of kOfflineChunkFrames: whole chunks
  // only, or (`all`) the rest too.
  absl::Status AnswerKeptFrames(bool all);
  // A segmentation model's end: the last frame's scores run to the video's end, and open
  // segments end; a window call with no frame is INVALID_ARGUMENT.
  absl::Status FinishFrames();
  // Where the video ends: one frame period after its last decoded frame, or, when none was
  // decoded after the last frame stepped (at `last_stepped_seconds`), `spacing` after that.
  double VideoEnd(double last_stepped_seconds, double spacing) const;
  // A window call's answer: the window (or frame), unless only events are asked for.
  void EmitWindow();
  // Counts `events` and keeps them for the next prediction.
  void Settle(const std::vector<pipeline::SegmentEvent>& events);
  // With `labels` false, only the settled events (a window call between windows).
  void Emit(bool labels = true);
  // Records the first failure; the stream then winds down.
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mutex_);
  // Takes the pending room callback, to run outside the lock.
  std::function<void()> TakeRoomCallback() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const StreamOptions options_;
  const std::shared_ptr<const model::VideoModel> model_;
  const bool recurrent_;
  // A segmentation model: every sampled frame is answered, stepped one at a time (recurrent_) or
  // kept for the head to see whole.
  const bool per_frame_;
  const StreamResources resources_;
  StreamListener* const listener_;
  CancellationToken cancellation_;
  // Container input; null for pictures.
  const std::shared_ptr<media::ByteStream> bytes_;

  mutable absl::Mutex mutex_;
  absl::Status failure_ ABSL_GUARDED_BY(mutex_);
  bool input_over_ ABSL_GUARDED_BY(mutex_) = false;  // no more input will come
  bool feed_over_ ABSL_GUARDED_BY(mutex_) = false;   // the feeder has handed out every frame
  bool ended_ ABSL_GUARDED_BY(mutex_) = false;
  StreamClock::time_point last_input_ ABSL_GUARDED_BY(mutex_);
  std::deque<Picture> pictures_ ABSL_GUARDED_BY(mutex_);
  std::function<void()> room_callback_ ABSL_GUARDED_BY(mutex_);
  // Frames the batcher holds, and those embedded but not yet stepped, by slot (the order in
  // which they were submitted, from 0).
  std::map<int64_t, FrameInfo> in_flight_ ABSL_GUARDED_BY(mutex_);
  std::map<int64_t, ReadyFrame> ready_ ABSL_GUARDED_BY(mutex_);
  int64_t next_slot_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t next_to_step_ ABSL_GUARDED_BY(mutex_) = 0;
  bool head_scheduled_ ABSL_GUARDED_BY(mutex_) = false;
  int64_t frames_seen_ ABSL_GUARDED_BY(mutex_) = 0;
  // The latest decoded frame's time, and one frame period after it.
  double last_seen_seconds_ ABSL_GUARDED_BY(mutex_) = 0;
  double seen_end_seconds_ ABSL_GUARDED_BY(mutex_) = 0;

  // The head stepper's own (one round at a time steps a session).
  std::vector<ReadyFrame> step_;  // the frames NextStep handed out
  bool step_closes_emit_ = false;
  model::HeadState head_state_;
  torch::Tensor probabilities_;  // [1, C], after the latest step
  int64_t frames_stepped_ = 0;
  bool stepped_since_emit_ = false;
  double next_emit_seconds_ = 0;
  StreamClock::time_point next_checkpoint_;
  std::string fingerprint_;       // of the checkpoints, when they are taken
  std::deque<FrameInfo> recent_;  // the latest frames stepped, up to a window's worth
  // Window calls: the states of the open windows, oldest first (recurrent heads), the sliding
  // window of the others, the windows answered, and where the tracker's timeline has got to.
  std::deque<model::HeadState> window_states_;
  std::optional<model::SlidingWindowOptions> sliding_;
  int64_t windows_answered_ = 0;
  double tracked_until_ = 0;
  double frame_spacing_ = 0;
  FrameInfo first_stepped_, covered_first_, covered_last_, newest_stepped_;
  // An offline segmentation head's frames, embedded, not yet answered.
  std::vector<ReadyFrame> kept_;
  // Segment events (options_.segments): the tracker, and its events not yet emitted.
  std::optional<pipeline::SegmentTracker> segments_;
  std::vector<pipeline::SegmentEvent> pending_events_;

  std::thread feeder_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_STREAM_SESSION_H_
