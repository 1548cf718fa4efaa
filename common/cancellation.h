// One cancellation token per call: the service cancels it (the client went away, the server
// drains), and every stage below checks it between units of work.
#ifndef VIDCLF_COMMON_CANCELLATION_H_
#define VIDCLF_COMMON_CANCELLATION_H_

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace vidclf {

// Thread-safe. Cancelled at most once: the first reason stands.
class CancellationToken {
 public:
  CancellationToken() = default;
  CancellationToken(const CancellationToken&) = delete;
  CancellationToken& operator=(const CancellationToken&) = delete;

  // Cancels with `reason` (not OK) and runs the callbacks added so far, on this thread.
  void Cancel(absl::Status reason) {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cancelled_.load(std::memory_order_relaxed)) return;
      reason_ = std::move(reason);
      cancelled_.store(true, std::memory_order_release);
      callbacks.swap(callbacks_);
    }
    for (auto& callback : callbacks) callback();
  }

  // Cheap enough to call for every packet.
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // The reason given to Cancel; OK while not cancelled.
  absl::Status reason() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return reason_;
  }

  // Runs `callback` when the token is cancelled: at once, on this thread, if it already is. For
  // waking a wait that does not poll the token (a read blocked on bytes still to come).
  void OnCancel(std::function<void()> callback) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!cancelled_.load(std::memory_order_relaxed)) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> cancelled_{false};
  absl::Status reason_;
  std::vector<std::function<void()>> callbacks_;
};

}  // namespace vidclf

#endif  // VIDCLF_COMMON_CANCELLATION_H_
