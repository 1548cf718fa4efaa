// Steps the heads of live streams in rounds on the head stage. A round asks each stream scheduled
// for the frames it steps next; streams that share a model, an attention and a number of new
// frames step together, in one VideoModel::StreamStepEach. A large head's step costs mostly the
// reading of its weights, which the streams then share: a 6-layer causal-linear head took 2.1 ms
// for one stream and 10-11 ms for 16 together, with one intra-op thread and AVX-512
// (docs/streaming-benchmark.md).
#ifndef VIDCLF_SERVER_ENGINE_HEAD_STEPPER_H_
#define VIDCLF_SERVER_ENGINE_HEAD_STEPPER_H_

#include <torch/torch.h>

#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "model/video_model.h"
#include "server/engine/engine_observer.h"
#include "server/engine/worker_pool.h"

namespace vidclf::engine {

class HeadStepper {
 public:
  // The frames a stream steps next, and what it steps them with: one state, or several that
  // each take the same frames (the windows of a ClassifySegments call that a recurrent head
  // follows at once).
  struct Step {
    const model::VideoModel* model = nullptr;
    absl::string_view attention;  // the stream's, which outlives its step
    torch::Tensor embeddings;     // [T, 512]
    std::vector<model::HeadState> states;
    // The sliding window of a head without a recurrent step; unset: the model's.
    std::optional<model::SlidingWindowOptions> window;
  };
  // The outcome of one stream's step: its probabilities [states, C] on the host and its next
  // states (on the model's device), or why it failed.
  using StepResult = absl::StatusOr<std::pair<torch::Tensor, std::vector<model::HeadState>>>;

  // A stream whose head the stepper steps. One round at a time calls it.
  class Stream {
   public:
    virtual ~Stream() = default;
    // Fills `step` with the frames to step next. False when there are none: the stream is then no
    // longer scheduled, and schedules itself again when it has more.
    virtual bool NextStep(Step* step) = 0;
    // The outcome of the step NextStep gave.
    virtual void Stepped(StepResult result) = 0;
  };

  // Rounds run on `head_stage`, at most `max_rounds` at once, each stepping at most
  // `max_streams` streams. All must outlive the stepper's last round.
  HeadStepper(WorkerPool* head_stage, int max_rounds, int max_streams, EngineObserver* observer);
  HeadStepper(const HeadStepper&) = delete;
  HeadStepper& operator=(const HeadStepper&) = delete;

  // Steps `stream` in the coming rounds until its NextStep returns false. Call when the stream has
  // frames to step, or has ended its feed, and is not scheduled.
  void Schedule(std::shared_ptr<Stream> stream);

 private:
  struct Pending {
    std::shared_ptr<Stream> stream;
    Step step;
  };

  // Starts rounds while streams wait and fewer than max_rounds_ run. A round takes every stream
  // waiting, up to max_streams_.
  void StartRounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void Round();
  // Steps `group`, which shares a model, an attention, a window and a number of frames, in one
  // pass; when
  // that fails for several streams, steps each alone, so that one bad state fails only its stream.
  void StepTogether(const std::vector<Pending*>& group);

  WorkerPool* const head_stage_;
  const int max_rounds_;
  const int max_streams_;
  EngineObserver* const observer_;
  absl::Mutex mutex_;
  std::deque<std::shared_ptr<Stream>> scheduled_ ABSL_GUARDED_BY(mutex_);
  int rounds_running_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_HEAD_STEPPER_H_
