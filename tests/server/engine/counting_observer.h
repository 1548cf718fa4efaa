// An EngineObserver for the engine's tests.
#ifndef VIDCLF_TESTS_SERVER_ENGINE_COUNTING_OBSERVER_H_
#define VIDCLF_TESTS_SERVER_ENGINE_COUNTING_OBSERVER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/engine/engine_observer.h"

namespace vidclf::testing {

// Counts what the engine reports: batch sizes, frames embedded, head steps, refusals.
class CountingObserver : public engine::EngineObserver {
 public:
  void StageDone(absl::string_view, engine::Stage, double) override {}
  void BatchDone(int frames) override {
    absl::MutexLock lock(&mutex_);
    batch_sizes_.push_back(frames);
  }
  void FramesDecoded(int64_t) override {}
  void ClipDecoded(absl::string_view, absl::string_view) override {}
  void FramesEmbedded(int64_t frames) override { embedded_ += frames; }
  void StreamFrames(int64_t) override {}
  void HeadStepped(int streams) override {
    absl::MutexLock lock(&mutex_);
    step_groups_.push_back(streams);
  }
  void StreamFrameTimed(const engine::StreamFrameTimes&) override {}
  void SourceReconnect() override {}
  void StreamSegmentEvent(absl::string_view, absl::string_view, bool) override {}
  void ThreadBindingFailed(const absl::Status&) override {}
  void Refused(engine::Refusal refusal) override {
    absl::MutexLock lock(&mutex_);
    ++refused_[refusal];
  }

  std::vector<int> batch_sizes() const {
    absl::MutexLock lock(&mutex_);
    return batch_sizes_;
  }
  int refused(engine::Refusal refusal) const {
    absl::MutexLock lock(&mutex_);
    const auto it = refused_.find(refusal);
    return it == refused_.end() ? 0 : it->second;
  }
  int64_t embedded() const { return embedded_; }
  // The number of streams in each group of head steps, in the order they stepped.
  std::vector<int> step_groups() const {
    absl::MutexLock lock(&mutex_);
    return step_groups_;
  }

 private:
  mutable absl::Mutex mutex_;
  std::vector<int> batch_sizes_;
  std::map<engine::Refusal, int> refused_;
  std::vector<int> step_groups_;
  std::atomic<int64_t> embedded_{0};
};

}  // namespace vidclf::testing

#endif  // VIDCLF_TESTS_SERVER_ENGINE_COUNTING_OBSERVER_H_
