#include "server/engine/worker_pool.h"

#include <utility>

namespace vidclf::engine {

WorkerPool::WorkerPool(int threads, const std::function<void()>& setup) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, setup] {
      if (setup) setup();
      Loop();
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void WorkerPool::Run(std::function<void()> task) {
  absl::MutexLock lock(&mutex_);
  tasks_.push_back(std::move(task));
}

int WorkerPool::queued() const {
  absl::MutexLock lock(&mutex_);
  return static_cast<int>(tasks_.size());
}

void WorkerPool::Loop() {
  absl::MutexLock lock(&mutex_);
  while (true) {
    mutex_.Await(absl::Condition(
        +[](WorkerPool* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
          return self->stopping_ || !self->tasks_.empty();
        },
        this));
    if (tasks_.empty()) return;  // stopping, and nothing is left to do
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mutex_.Unlock();
    task();
    task = nullptr;  // what the task captured goes before the next one starts
    mutex_.Lock();
  }
}

}  // namespace vidclf::engine
