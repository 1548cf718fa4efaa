// A fixed set of threads running tasks in the order they were queued.
#ifndef VIDCLF_SERVER_ENGINE_WORKER_POOL_H_
#define VIDCLF_SERVER_ENGINE_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace vidclf::engine {

// Thread-safe. Tasks must not throw.
class WorkerPool {
 public:
  // Each thread runs `setup`, when given, before its first task.
  explicit WorkerPool(int threads, const std::function<void()>& setup = nullptr);
  // Runs the tasks still queued, then stops the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Run(std::function<void()> task);

  // Tasks waiting for a thread.
  int queued() const;

 private:
  void Loop();

  mutable absl::Mutex mutex_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mutex_);
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_WORKER_POOL_H_
