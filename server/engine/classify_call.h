// One Classify call on its way through the engine's stages. It is the decoder's frame sink (its
// frames go to the backbone batcher as they are converted) and the owner of those frames (their
// embeddings come back to it). Once decoding is over and no frame is out, it goes to the head
// stage, or is answered with the first error met.
#ifndef VIDCLF_SERVER_ENGINE_CLASSIFY_CALL_H_
#define VIDCLF_SERVER_ENGINE_CLASSIFY_CALL_H_

#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cancellation.h"
#include "common/time_spans.h"
#include "media/clip_decoder.h"
#include "server/engine/backbone_batcher.h"
#include "server/engine/classify_engine.h"

namespace vidclf::engine {

// Thread-safe. Created by ClassifyEngine::Submit once the call is admitted.
class ClassifyCall final : public FrameOwner,
                           public media::FrameSink,
                           public std::enable_shared_from_this<ClassifyCall> {
 public:
  // `bytes_held` were taken from `admission` for the call; they and the call's place are given
  // back when the call is destroyed.
  ClassifyCall(ClassifyEngine* engine, ClassifyInput input,
               std::shared_ptr<const model::VideoModel> model, int num_frames,
               std::shared_ptr<Admission> admission, int64_t bytes_held,
               ClassifyEngine::Callback done);
  ~ClassifyCall() override;

  // The decode stage: decodes on the calling thread, handing frames to the batcher.
  void Decode();
  void Cancel(const absl::Status& reason);
  absl::Status AddBytes(int64_t bytes);

  // FrameOwner.
  const model::VideoModel& model() const override { return *model_; }
  bool Wants(int pass) const override;
  bool StillDecoding() const override { return still_decoding_; }
  void Embedded(int pass, int64_t slot, absl::StatusOr<torch::Tensor> embedding,
                const BatchReport& report) override;

  // media::FrameSink, called by the decoder.
  void StartPass(int64_t frames) override;
  absl::Status Frame(int64_t slot, const media::FrameBuffer& frame,
                     double timestamp_seconds) override;

 private:
  // Whether every stage before the head is over: decoding ended and no frame is out. Marks the
  // call as moved on, so that only one caller acts on it.
  bool ReadyToMoveOn() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Runs the head, or answers with the call's error.
  void MoveOn();
  void RunHead();
  // Calls `done` once, then tells the engine.
  void Answer(absl::StatusOr<ClassifyResult> result);
  // The clip options for this call: the engine's, the call's sampling and deadline, the model's
  // preprocessing, this call's cancellation and sink, and `decoder_threads`.
  media::ClipOptions ClipOptionsFor(int decoder_threads) const;
  // Gives the decoder's cores back to the backbone, once: when the pass's last frame arrives
  // (the decoder then only winds down), or when decoding ends.
  void ReleaseDecodingCores();
  // The decoder waits for an upload's next bytes (true), or has them (false): it lends its
  // cores to the backbone and the other decoders meanwhile. On the decoder's thread.
  void WaitingForInput(bool waiting);
  // Lets the batcher take the call's frames (StillDecoding turns false) and tells it so: once the
  // pass's last frame is queued, or when decoding ends.
  void ReleaseFrames();

  ClassifyEngine* const engine_;
  const ClassifyInput input_;
  const std::shared_ptr<const model::VideoModel> model_;
  const int num_frames_;  // the sampling's frame count, the most frames the call can have
  const std::shared_ptr<Admission> admission_;
  const absl::Time admitted_;
  CancellationToken cancellation_;
  std::atomic<bool> holds_decoding_cores_{false};
  bool lent_decoding_cores_ = false;  // by WaitingForInput, on the decoder's thread
  std::atomic<bool> still_decoding_{false};

  mutable absl::Mutex mutex_;
  int64_t bytes_held_ ABSL_GUARDED_BY(mutex_);
  ClassifyEngine::Callback done_ ABSL_GUARDED_BY(mutex_);
  bool decode_started_ ABSL_GUARDED_BY(mutex_) = false;
  bool decode_over_ ABSL_GUARDED_BY(mutex_) = false;
  bool moved_on_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mutex_);          // the first error met
  int pass_ ABSL_GUARDED_BY(mutex_) = 0;                  // the decoder's current pass
  int64_t frames_out_ ABSL_GUARDED_BY(mutex_) = 0;        // queued for the backbone, not yet back
  int64_t frames_announced_ ABSL_GUARDED_BY(mutex_) = 0;  // by the decoder, for this pass
  int64_t frames_in_pass_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<torch::Tensor> embeddings_ ABSL_GUARDED_BY(mutex_);  // by slot
  media::DecodedClip clip_ ABSL_GUARDED_BY(mutex_);                // without pixels
  ClassifyResult timings_ ABSL_GUARDED_BY(mutex_);  // the stage times gathered so far
  // When each batch holding the call's frames ran, by batch id: batches side by side overlap.
  std::map<uint64_t, TimeSpan> batch_spans_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_CLASSIFY_CALL_H_
