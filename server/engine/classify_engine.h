// Classifies whole videos: decode and sample (media), embed and classify (model), on a fixed pool
// of worker threads so that RPC threads never block on the work.
#ifndef VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_
#define VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_

#include <deque>
#include <functional>
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
#include "media/byte_stream.h"
#include "media/clip_decoder.h"
#include "media/uri_allowlist.h"
#include "server/engine/model_repository.h"

namespace vidclf::engine {

struct EngineOptions {
  // Threads that run requests; each handles one request at a time.
  int workers = 2;
  // Requests waiting for a worker beyond this are refused (RESOURCE_EXHAUSTED).
  int max_queued_requests = 64;
  // Most frames one request may ask to be sampled.
  int max_sampled_frames = 256;
  // Decoding limits, budget and decoder threads; each request and its model set the sampling and
  // preprocessing. One decoder thread per request: the workers already run requests side by side.
  // The decode budget shrinks to the request's deadline when that comes sooner.
  media::ClipOptions decode = [] {
    media::ClipOptions clip;
    clip.max_input_bytes = 64LL << 20;
    clip.decoder_threads = 1;
    clip.decode_timeout_ms = 30000;
    return clip;
  }();
  // URIs that requests may ask the server to pull video from; empty: none.
  media::UriAllowlist uri_allowlist;
};

struct ClassifyInput {
  // The encoded video; must stay valid until `done` has been called.
  absl::string_view video;
  // Or, when not empty, a URI to pull the video from (EngineOptions::uri_allowlist rules).
  std::string uri;
  // Or, when set, chunks that a producer appends while the engine decodes them (an upload in
  // progress). The producer closes the stream's reader once `done` has been called, so that a
  // request refused before decoding does not leave it accepting chunks.
  std::shared_ptr<media::ByteStream> stream;
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
  // The work is abandoned with DEADLINE_EXCEEDED once this passes.
  absl::Time deadline = absl::InfiniteFuture();
};

struct ClassifyResult {
  std::string model;
  std::string model_version;
  std::vector<std::pair<std::string, float>> top_k;  // highest score first
  std::vector<double> frame_timestamps_seconds;
  double decode_seconds = 0;
  double preprocess_seconds = 0;
  double embed_seconds = 0;
  double head_seconds = 0;
  double total_seconds = 0;  // from submission, queueing included
};

class ClassifyEngine {
 public:
  using Callback = std::function<void(absl::StatusOr<ClassifyResult>)>;

  // `repository` must outlive the engine.
  static absl::StatusOr<std::unique_ptr<ClassifyEngine>> Create(const EngineOptions& options,
                                                                const ModelRepository* repository);
  // Finishes the queued requests, then stops the workers.
  ~ClassifyEngine();

  // Queues a request; `done` is called exactly once, on a worker thread, or on the caller's thread
  // when the request is refused at once (queue full: RESOURCE_EXHAUSTED). Thread-safe.
  void ClassifyAsync(ClassifyInput input, Callback done);

  // Runs a request on the calling thread. Thread-safe.
  absl::StatusOr<ClassifyResult> Classify(const ClassifyInput& input) const;

  const EngineOptions& options() const { return options_; }

 private:
  struct Job {
    ClassifyInput input;
    Callback done;
    absl::Time submitted;
  };

  ClassifyEngine(const EngineOptions& options, const ModelRepository* repository);
  void WorkerLoop();

  const EngineOptions options_;
  const ModelRepository* const repository_;
  absl::Mutex mutex_;  // guards the queue and the stop flag
  std::deque<Job> queue_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_CLASSIFY_ENGINE_H_
