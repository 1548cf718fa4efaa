#include "server/idle_memory_releaser.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

namespace vidclf {

IdleMemoryReleaser::IdleMemoryReleaser(std::function<Load()> load, absl::Duration poll) {
  thread_ = std::thread([this, load = std::move(load), poll] {
    // Idle polls left to trim at. Memory is still freed for a moment after the last call
    // (gRPC's buffers, threads that exit), so trim a few times, then leave the heap alone.
    int trims_left = 0;
    int64_t peak_bytes = 0;  // held since the last trim
    while (!stop_.WaitForNotificationWithTimeout(poll)) {
      const Load now = load();
      if (now.busy) {
        trims_left = kTrims;
        peak_bytes = std::max(peak_bytes, now.held_bytes);
        if (peak_bytes - now.held_bytes >= kBurstBytes) {
          malloc_trim(0);
          peak_bytes = now.held_bytes;
        }
      } else if (trims_left > 0) {
        malloc_trim(0);
        --trims_left;
        peak_bytes = 0;
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
