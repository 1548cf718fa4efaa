// A place the engine holds for a call or a stream whose request has not arrived yet (an upload
// before its settings, a live stream before its config), so that it counts against the engine's
// bounds from its first byte; and the idle timeout that ends it when nothing comes.
#ifndef VIDCLF_SERVER_ENGINE_RESERVATION_H_
#define VIDCLF_SERVER_ENGINE_RESERVATION_H_

#include <atomic>
#include <chrono>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace vidclf::engine {

// Thread-safe. Made by ClassifyEngine::ReserveCall and ReserveStream, which also watch it.
class Reservation {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Kind { kCall, kStream };

  // `on_idle` hears the expiry, at most once; `release` gives the place back.
  Reservation(Kind kind, std::function<void(const absl::Status&)> on_idle,
              std::function<void()> release)
      : kind_(kind), on_idle_(std::move(on_idle)), release_(std::move(release)) {}
  // Closes it.
  ~Reservation();
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;

  Kind kind() const { return kind_; }
  // Expired, handed over or closed: nothing waits on it any more. Takes no lock.
  bool over() const { return over_; }
  // Something arrived: the idle timeout starts again.
  void NoteProgress() { last_progress_ = Clock::now().time_since_epoch().count(); }
  // Whether it is still waiting, with nothing arrived since `cutoff`. Takes no lock.
  bool IdleSince(Clock::time_point cutoff) const {
    return !over() && last_progress_.load() < cutoff.time_since_epoch().count();
  }

  // The engine's watchdog: calls on_idle with `reason` unless the reservation was closed or handed
  // over. on_idle runs with the reservation's lock held, so that Close waits for it.
  void Expire(const absl::Status& reason);
  // A call or stream takes the place over: it is theirs from now on, and on_idle is never called.
  // False when the reservation had expired or was closed.
  bool HandOver();
  // Its owner is done with it: waits for an on_idle in progress, and gives the place back unless
  // it was handed over. The owner calls it before it goes (on_idle may refer to it).
  void Close();

 private:
  const Kind kind_;
  mutable absl::Mutex mutex_;
  std::function<void(const absl::Status&)> on_idle_ ABSL_GUARDED_BY(mutex_);
  std::function<void()> release_ ABSL_GUARDED_BY(mutex_);
  std::atomic<Clock::rep> last_progress_{Clock::now().time_since_epoch().count()};
  std::atomic<bool> over_{false};  // expired, handed over or closed; set under mutex_
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_RESERVATION_H_
