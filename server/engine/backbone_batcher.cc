#include "server/engine/backbone_batcher.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/thread_name.h"
#include "model/thread_affinity.h"
#include "model/torch_threads.h"

namespace vidclf::engine {

BackboneBatcher::BackboneBatcher(const BatcherOptions& options, std::function<CoreUse()> core_use,
                                 EngineObserver* observer)
    : options_(options),
      core_use_(std::move(core_use)),
      observer_(observer),
      threads_in_use_(std::max(1, options.batches_with_feeds), 0) {
  for (int runner = 0; runner < static_cast<int>(threads_in_use_.size()); ++runner) {
    runners_.emplace_back([this, runner] { Loop(runner); });
  }
}

BackboneBatcher::~BackboneBatcher() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& runner : runners_) runner.join();
}

void BackboneBatcher::Enqueue(std::shared_ptr<FrameOwner> owner, int pass, int64_t slot,
                              torch::Tensor pixels) {
  const model::VideoModel& model = owner->model();
  const QueueKey key{model.backbone_key(), model.config().input.crop_size, pixels.device().type(),
                     pixels.device().index()};
  absl::MutexLock lock(&mutex_);
  queues_[key].push_back(Frame{std::move(owner), pass, slot, std::move(pixels), absl::Now()});
  ++queued_;
  ++arrivals_;
}

int64_t BackboneBatcher::queued_frames() const {
  absl::MutexLock lock(&mutex_);
  return queued_;
}

std::vector<BackboneBatcher::Frame> BackboneBatcher::TakeUnwanted() {
  std::vector<Frame> unwanted;
  for (auto& [key, queue] : queues_) {
    const auto wanted_end = std::stable_partition(
        queue.begin(), queue.end(), [](const Frame& f) { return f.owner->Wants(f.pass); });
    std::move(wanted_end, queue.end(), std::back_inserter(unwanted));
    queue.erase(wanted_end, queue.end());
  }
  queued_ -= static_cast<int64_t>(unwanted.size());
  return unwanted;
}

void BackboneBatcher::Loop(int runner) {
  NameThisThread("vidclf-backbone");
  absl::MutexLock lock(&mutex_);
  while (true) {
    mutex_.Await(absl::Condition(
        +[](BackboneBatcher* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
          return self->stopping_ || self->queued_ > 0;
        },
        this));
    std::vector<Frame> unwanted = TakeUnwanted();
    if (stopping_) {
      for (auto& [key, queue] : queues_)
        std::move(queue.begin(), queue.end(), std::back_inserter(unwanted));
      queues_.clear();
      queued_ = 0;
    }
    if (!unwanted.empty()) {
      mutex_.Unlock();
      for (Frame& frame : unwanted) {
        frame.owner->Embedded(frame.pass, frame.slot,
                              absl::CancelledError("the frame was no longer wanted"), {});
      }
      unwanted.clear();
      mutex_.Lock();
    }
    if (stopping_) return;
    const CoreUse core_use = core_use_();
    if (runner > 0 && core_use.live_feeds == 0) {
      AwaitChange(absl::InfiniteFuture());  // the first runner takes the batches alone
      continue;
    }
    absl::Time oldest_time;
    const auto chosen = NextQueue(&oldest_time);
    if (chosen == queues_.end()) {
      AwaitChange(absl::InfiniteFuture());
      continue;
    }
    Queue& queue = chosen->second;
    const bool full = static_cast<int>(queue.size()) >= options_.max_batch_frames;
    const absl::Time due = oldest_time + options_.max_queue_delay;
    if (!full && absl::Now() < due && core_use.decoding_calls > 0) {
      AwaitChange(due);  // for more frames to join, or for the delay to pass
      continue;
    }
    size_t ready = queue.size();
    if (!full) {
      // Only frames whose owner has stopped decoding go (decoding never starts again).
      ready = std::stable_partition(queue.begin(), queue.end(),
                                    [this](const Frame& f) { return !Held(f); }) -
              queue.begin();
    }
    const size_t take = std::min<size_t>(ready, options_.max_batch_frames);
    std::vector<Frame> batch(std::make_move_iterator(queue.begin()),
                             std::make_move_iterator(queue.begin() + take));
    queue.erase(queue.begin(), queue.begin() + take);
    if (queue.empty()) queues_.erase(chosen);  // a reloaded backbone's queue goes with it
    queued_ -= static_cast<int64_t>(take);
    mutex_.Unlock();
    Run(runner, core_use, std::move(batch));
    mutex_.Lock();
  }
}

std::map<BackboneBatcher::QueueKey, BackboneBatcher::Queue>::iterator BackboneBatcher::NextQueue(
    absl::Time* oldest) {
  auto chosen = queues_.end();
  for (auto it = queues_.begin(); it != queues_.end(); ++it) {
    const Queue& queue = it->second;
    if (queue.empty()) continue;
    auto first = queue.begin();
    if (static_cast<int>(queue.size()) < options_.max_batch_frames) {
      first = std::find_if(queue.begin(), queue.end(), [this](const Frame& f) { return !Held(f); });
      if (first == queue.end()) continue;
    }
    if (chosen == queues_.end() || first->enqueued < *oldest) {
      chosen = it;
      *oldest = first->enqueued;
    }
  }
  return chosen;
}

void BackboneBatcher::AwaitChange(absl::Time deadline) {
  struct Seen {
    BackboneBatcher* self;
    int64_t arrivals;
    int64_t decode_ends;
  } seen{this, arrivals_, decode_ends_};
  mutex_.AwaitWithDeadline(absl::Condition(
                               +[](Seen* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return s->self->stopping_ || s->self->arrivals_ != s->arrivals ||
                                        s->self->decode_ends_ != s->decode_ends;
                               },
                               &seen),
                           deadline);
}

void BackboneBatcher::DecodingEnded() {
  absl::MutexLock lock(&mutex_);
  ++decode_ends_;
}

void BackboneBatcher::Run(int runner, const CoreUse& core_use, std::vector<Frame> batch) {
  const absl::Time start = absl::Now();
  // Decoding keeps about a core per call busy; the backbone takes the rest, shared between its
  // runners while feeds are open (the first ones a thread more where they do not divide evenly),
  // each on CPUs of its own where they are bound.
  const int runners = core_use.live_feeds > 0 ? static_cast<int>(threads_in_use_.size()) : 1;
  const int free_cores = std::max(runners, options_.max_threads - core_use.decoding_calls);
  const int share = free_cores / runners;
  const int extra = free_cores % runners;
  const int threads = share + (runner < extra ? 1 : 0);
  if (threads != threads_in_use_[runner]) {
    const size_t first = std::min(options_.cpus.size(),
                                  static_cast<size_t>(runner * share + std::min(runner, extra)));
    if (options_.cpus.size() - first >= static_cast<size_t>(threads)) {
      const absl::Status bound = model::BindIntraOpThreadsOfThisThread(
          std::vector<int>(options_.cpus.begin() + first, options_.cpus.begin() + first + threads));
      if (!bound.ok()) observer_->ThreadBindingFailed(bound);
    } else {
      model::SetIntraOpThreadsOfThisThread(threads);
    }
    threads_in_use_[runner] = threads;
  }
  // Every model in the batch embeds alike (QueueKey): any of them will do.
  const model::VideoModel& model = batch.front().owner->model();
  absl::StatusOr<torch::Tensor> embeddings = [&]() -> absl::StatusOr<torch::Tensor> {
    std::vector<torch::Tensor> pixels;
    pixels.reserve(batch.size());
    for (const Frame& frame : batch) pixels.push_back(frame.pixels);
    try {
      torch::Tensor frames;
      if (model.device().is_cuda() && pixels.front().device().is_cpu()) {
        // Frames decoded on the CPU for a GPU model are gathered in page-locked memory, from
        // LibTorch's caching host allocator (a pool that keeps each block until the copies that
        // read it have run), so that Embed's copy to the GPU runs asynchronously on the
        // device's stream and the next batch is gathered meanwhile.
        std::vector<int64_t> shape = pixels.front().sizes().vec();
        shape.insert(shape.begin(), static_cast<int64_t>(pixels.size()));
        frames = torch::empty(shape, pixels.front().options().pinned_memory(true));
        torch::stack_out(frames, pixels);
      } else {
        frames = torch::stack(pixels);
      }
      // [B, crop, crop, 3] is a channels-last [B, 3, crop, crop] once permuted: no copy.
      if (model.channels_last()) frames = frames.permute({0, 3, 1, 2});
      return model.Embed(frames, options_.max_batch_frames);
    } catch (const c10::Error& e) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot gather a batch of frames: ", e.what_without_backtrace()));
    }
  }();
  BatchReport report;
  report.batch_id = ++batches_run_;
  report.started = start;
  report.finished = absl::Now();
  report.batch_frames = static_cast<int>(batch.size());
  observer_->BatchDone(report.batch_frames);
  if (embeddings.ok()) observer_->FramesEmbedded(report.batch_frames);
  for (size_t i = 0; i < batch.size(); ++i) {
    Frame& frame = batch[i];
    report.waited_seconds = absl::ToDoubleSeconds(start - frame.enqueued);
    frame.owner->Embedded(
        frame.pass, frame.slot,
        embeddings.ok() ? absl::StatusOr<torch::Tensor>((*embeddings)[static_cast<int64_t>(i)])
                        : absl::StatusOr<torch::Tensor>(embeddings.status()),
        report);
  }
}

}  // namespace vidclf::engine
