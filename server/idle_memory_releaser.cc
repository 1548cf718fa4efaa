#include "server/idle_memory_releaser.h"

#include <malloc.h>

#include <utility>

namespace vidclf {

IdleMemoryReleaser::IdleMemoryReleaser(std::function<bool()> busy, absl::Duration poll) {
  thread_ = std::thread([this, busy = std::move(busy), poll] {
    // Idle polls left to trim at. Memory is still freed for a moment after the last call
    // (gRPC's buffers, threads that exit), so trim a few times, then leave the heap alone.
    int trims_left = 0;
    while (!stop_.WaitForNotificationWithTimeout(poll)) {
      if (busy()) {
        trims_left = kTrims;
      } else if (trims_left > 0) {
        malloc_trim(0);
        --trims_left;
      }
    }
  });
}

void IdleMemoryReleaser::UseOneArena() { mallopt(M_ARENA_MAX, 1); }

void IdleMemoryReleaser::TrimNow() { malloc_trim(0); }

IdleMemoryReleaser::~IdleMemoryReleaser() {
  stop_.Notify();
  thread_.join();
}

}  // namespace vidclf
