#include "server/idle_memory_releaser.h"

#include <algorithm>
#include <utility>

#include "server/heap.h"

namespace vidclf {

IdleMemoryReleaser::IdleMemoryReleaser(std::function<Load()> load, absl::Duration poll) {
  thread_ = std::thread([this, load = std::move(load), poll] {
    // Idle polls left to release at. Memory is still freed for a moment after the last call
    // (gRPC's buffers, threads that exit), so release a few times, then leave the heap alone.
    int releases_left = 0;
    int64_t peak_bytes = 0;  // held since the last release
    while (!stop_.WaitForNotificationWithTimeout(poll)) {
      const Load now = load();
      if (now.busy) {
        releases_left = kReleases;
        peak_bytes = std::max(peak_bytes, now.held_bytes);
        if (peak_bytes - now.held_bytes >= kBurstBytes) {
          heap::ReleaseFree();
          peak_bytes = now.held_bytes;
        }
      } else if (releases_left > 0) {
        heap::ReleaseFree();
        --releases_left;
        peak_bytes = 0;
      }
    }
  });
}

IdleMemoryReleaser::~IdleMemoryReleaser() {
  stop_.Notify();
  thread_.join();
}

}  // namespace vidclf
