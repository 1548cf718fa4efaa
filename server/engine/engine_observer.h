// How the engine reports what it does, without knowing who listens: the server's metrics
// implement this interface, tests may count with it, and stages never include Prometheus.
#ifndef VIDCLF_SERVER_ENGINE_ENGINE_OBSERVER_H_
#define VIDCLF_SERVER_ENGINE_ENGINE_OBSERVER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::engine {

// The stages a call passes through. Queue: from admission until decoding starts, plus the
// longest wait of one of its frames for the backbone. Preprocess overlaps decode (frames are
// converted on a thread of their own), and embed overlaps both. On a GPU, embed ends when the
// backbone's work is queued there, and head includes waiting for it to run.
enum class Stage { kQueue, kDecode, kPreprocess, kEmbed, kHead };
absl::string_view StageName(Stage stage);

// Why a call was refused without being queued.
enum class Refusal {
  kRequests,  // the in-flight call limit
  kBytes,     // the in-flight byte limit (uploads, decoded frames)
  kDeadline,  // its deadline falls before the queue ahead of it would clear
  kDraining,  // the server is shutting down
  kStreams,   // the live stream limit
};
absl::string_view RefusalName(Refusal refusal);

// Where a live stream's frame spent its time before its head's step, in seconds, stage after
// stage: from its packet's arrival until the decoder gave it out (waiting behind the feed's
// earlier frames included); its conversion to the model's input; waiting for room among the
// stream's frames in flight (the backbone or head behind); from there to its embedding (waiting
// for a batch, and the batch; on a GPU, until it is queued there); and to its step (waiting for
// the head stepper, and the step, which on a GPU waits for the embedding to run).
struct StreamFrameTimes {
  double decode = 0;
  double convert = 0;
  double wait = 0;
  double embed = 0;
  double head = 0;
};

// Every method may be called from any engine thread, at once: implementations are thread-safe
// and quick.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // A call that succeeded spent `seconds` in `stage`; `model` is a served model's name.
  virtual void StageDone(absl::string_view model, Stage stage, double seconds) = 0;
  // The backbone ran one batch of `frames` frames, from any number of calls.
  virtual void BatchDone(int frames) = 0;
  virtual void FramesDecoded(int64_t frames) = 0;
  // A call's frames were decoded on `device` ("cpu", "cuda:0"); `gpu_fallback` says why on the
  // CPU where a GPU was asked for (media/nvdec_device.h), and is empty otherwise.
  virtual void ClipDecoded(absl::string_view device, absl::string_view gpu_fallback) = 0;
  virtual void FramesEmbedded(int64_t frames) = 0;
  virtual void Refused(Refusal refusal) = 0;
  // Frames of live streams handed to the backbone.
  virtual void StreamFrames(int64_t frames) = 0;
  // The heads of `streams` live streams stepped together, in one pass over the head's weights.
  virtual void HeadStepped(int streams) = 0;
  // A live stream's frame reached its head's step, after the times in `times`.
  virtual void StreamFrameTimed(const StreamFrameTimes& times) = 0;
  // A stream following a source the server pulls tries to reach it again after a drop.
  virtual void SourceReconnect() = 0;
  // A live stream's segment of `label` started (was announced) or ended.
  virtual void StreamSegmentEvent(absl::string_view model, absl::string_view label, bool start) = 0;
  // The backbone's intra-op threads could not all be bound one per CPU, for the reason given;
  // they run where the kernel puts them. Reported at each attempt: when the number of threads
  // the backbone takes changes.
  virtual void ThreadBindingFailed(const absl::Status& why) = 0;
};

// Listens to nothing.
class NullObserver : public EngineObserver {
 public:
  void StageDone(absl::string_view, Stage, double) override {}
  void BatchDone(int) override {}
  void FramesDecoded(int64_t) override {}
  void ClipDecoded(absl::string_view, absl::string_view) override {}
  void FramesEmbedded(int64_t) override {}
  void Refused(Refusal) override {}
  void StreamFrames(int64_t) override {}
  void HeadStepped(int) override {}
  void StreamFrameTimed(const StreamFrameTimes&) override {}
  void SourceReconnect() override {}
  void StreamSegmentEvent(absl::string_view, absl::string_view, bool) override {}
  void ThreadBindingFailed(const absl::Status&) override {}
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_ENGINE_OBSERVER_H_
