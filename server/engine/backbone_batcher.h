// The backbone stage: gathers the frames of every call of the same backbone into batches, runs the
// backbone over each batch, and hands every embedding back to the call that owns the frame. Models
// that share a backbone (model::VideoModel::backbone_key) and a frame size share batches.
//
// A batch runs once max_batch_frames frames of one backbone wait, once the oldest has waited
// max_queue_delay, or at once when no call is decoding (no more frames are on their way). Frames
// of a call still decoding wait for the rest of it (FrameOwner::StillDecoding) unless they fill a
// batch.
// Frames whose call no longer wants them (cancelled, failed, past its deadline) leave the queue
// unembedded. One batch at a time runs, on the intra-op threads that decoding leaves free; while
// live feeds are open, up to BatcherOptions::batches_with_feeds run side by side, sharing them.
#ifndef VIDCLF_SERVER_ENGINE_BACKBONE_BATCHER_H_
#define VIDCLF_SERVER_ENGINE_BACKBONE_BATCHER_H_

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "model/video_model.h"
#include "server/engine/engine_observer.h"

namespace vidclf::engine {

// What the batcher learnt about a frame's batch.
struct BatchReport {
  uint64_t batch_id = 0;      // batches are numbered from 1 in the order they finish
  double waited_seconds = 0;  // in the queue, before its batch started
  // When the backbone started and finished the whole batch; on a GPU, finished once the batch is
  // queued there (the heads, which read its embeddings, wait for the rest). Batches side by side
  // overlap.
  absl::Time started;
  absl::Time finished;
  int batch_frames = 0;
};

// The call a frame belongs to. Its methods are called on the batcher's threads (several at once
// when batches run side by side), sometimes with the batcher's lock held: they must not call the
// batcher back.
class FrameOwner {
 public:
  virtual ~FrameOwner() = default;
  // The model whose backbone embeds the frame; frames are batched with those of the same backbone.
  virtual const model::VideoModel& model() const = 0;
  // Whether a frame queued during decoding pass `pass` is still wanted.
  virtual bool Wants(int pass) const = 0;
  // Whether the owner's decoder is still producing frames. Its frames then wait for the rest (up
  // to a full batch): embedding them now would take cores from that very decoder, and one batch
  // of them all runs faster than several small ones.
  virtual bool StillDecoding() const { return false; }
  // Exactly once for every frame queued: its embedding, [512] on the CPU, or why it has none
  // (CANCELLED when it was no longer wanted, or the backbone's error).
  virtual void Embedded(int pass, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                        const BatchReport& report) = 0;
};

struct BatcherOptions {
  // Most frames in one batch; EngineOptions may leave it 0 for the engine to choose.
  int max_batch_frames = 16;
  // Longest a frame waits for others to join its batch while calls are still decoding.
  absl::Duration max_queue_delay = absl::Microseconds(2000);
  // Intra-op threads the backbone may use (the machine's cores); it takes those that decoding
  // leaves free, at least one.
  int max_threads = 1;
  // CPUs to bind the backbone's intra-op threads to, the i-th thread to the i-th CPU, at least
  // max_threads of them (model/thread_affinity.h); empty leaves them to the kernel.
  std::vector<int> cpus;
  // Embed a call's frames as they come, beside its decoder, instead of once it has handed over
  // the last one (or they fill a batch). Waiting answered one call at a time sooner on two cores,
  // where a decoder alone keeps them busy; overlapping may suit machines with cores to spare.
  bool embed_while_decoding = false;
  // Batches embedded at once while live feeds are open, each by its own thread with an equal
  // share of the intra-op threads. Feeds decode on the same cores without counting as decoding
  // calls; a batch side by side with another waits at no barrier between layers for a thread
  // whose core a feed took (docs/streaming-benchmark.md). Without feeds one batch on every thread
  // answers a lone call soonest. 0 lets the engine choose (EngineOptions); the batcher alone
  // takes it as 1.
  int batches_with_feeds = 0;
};

// What else runs on the cores the backbone uses, asked before each batch.
struct CoreUse {
  int decoding_calls = 0;  // calls decoding now, each keeping about a core busy
  int live_feeds = 0;      // live streams open
};

// Thread-safe.
class BackboneBatcher {
 public:
  // `core_use` says what else runs on the cores now; `observer` must outlive the batcher.
  BackboneBatcher(const BatcherOptions& options, std::function<CoreUse()> core_use,
                  EngineObserver* observer);
  // Frames still queued are answered CANCELLED.
  ~BackboneBatcher();
  BackboneBatcher(const BackboneBatcher&) = delete;
  BackboneBatcher& operator=(const BackboneBatcher&) = delete;

  // Queues one preprocessed frame in the model's layout (pipeline::FrameTensor's). Never blocks.
  void Enqueue(std::shared_ptr<FrameOwner> owner, int pass, int64_t slot, torch::Tensor pixels);
  // An owner's decoding ended: its frames may be batched now.
  void DecodingEnded();

  int64_t queued_frames() const;

 private:
  struct Frame {
    std::shared_ptr<FrameOwner> owner;
    int pass = 0;
    int64_t slot = 0;
    torch::Tensor pixels;
    absl::Time enqueued;
  };
  using Queue = std::deque<Frame>;
  // Frames with the same key are embedded alike: the same backbone (which fixes the layout), frames
  // of the same size, on the same device.
  struct QueueKey {
    const void* backbone;
    int64_t crop_size;
    torch::DeviceType device_type;
    int device_index;
    bool operator<(const QueueKey& other) const {
      return std::tie(backbone, crop_size, device_type, device_index) <
             std::tie(other.backbone, other.crop_size, other.device_type, other.device_index);
    }
  };

  // Runner `runner`'s thread: takes the next batch, embeds it, and so on until the batcher stops.
  // Runners past the first take batches only while live feeds are open.
  void Loop(int runner);
  // The queue to batch from next: among those holding a full batch or frames whose owner is no
  // longer decoding, the one whose oldest such frame has waited longest. End when none.
  std::map<QueueKey, Queue>::iterator NextQueue(absl::Time* oldest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `frame` waits for the rest of its call's frames.
  bool Held(const Frame& frame) const {
    return !options_.embed_while_decoding && frame.owner->StillDecoding();
  }
  // Waits until a frame arrives, a decode ends, the batcher stops, or `deadline` passes.
  void AwaitChange(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Removes the frames their owners no longer want from every queue.
  std::vector<Frame> TakeUnwanted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Embeds `batch` (frames of one queue) on runner `runner`'s thread, the cores shared as
  // `core_use` says, and answers their owners.
  void Run(int runner, const CoreUse& core_use, std::vector<Frame> batch);

  const BatcherOptions options_;
  const std::function<CoreUse()> core_use_;
  EngineObserver* const observer_;
  mutable absl::Mutex mutex_;
  // One queue per backbone and frame shape. A queue's frames keep their models, and so its
  // backbone, alive.
  std::map<QueueKey, Queue> queues_ ABSL_GUARDED_BY(mutex_);
  int64_t queued_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t arrivals_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t decode_ends_ ABSL_GUARDED_BY(mutex_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::atomic<uint64_t> batches_run_{0};
  // Each runner's intra-op threads now (its own thread's setting).
  std::vector<int> threads_in_use_;
  std::vector<std::thread> runners_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_BACKBONE_BATCHER_H_
