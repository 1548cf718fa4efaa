#include "server/engine/reservation.h"

namespace vidclf::engine {

Reservation::~Reservation() { Close(); }

void Reservation::Expire(const absl::Status& reason) {
  absl::MutexLock lock(&mutex_);
  if (over_) return;
  over_ = true;
  on_idle_(reason);
  on_idle_ = nullptr;
}

bool Reservation::HandOver() {
  absl::MutexLock lock(&mutex_);
  if (over_) return false;
  over_ = true;
  on_idle_ = nullptr;
  release_ = nullptr;
  return true;
}

void Reservation::Close() {
  std::function<void()> release;
  {
    absl::MutexLock lock(&mutex_);
    over_ = true;
    on_idle_ = nullptr;
    release = std::move(release_);
    release_ = nullptr;
  }
  if (release) release();
}

}  // namespace vidclf::engine
