// Hands freed heap memory back to the system once the server falls idle after a load, or once a
// burst of large calls has gone while others go on.
//
// Allocators keep what a load freed for the next; handing it back once idle (server/heap.h)
// returned the most of the settings tried (docs/code-measurements.md, "Heap after a load").
#ifndef VIDCLF_SERVER_IDLE_MEMORY_RELEASER_H_
#define VIDCLF_SERVER_IDLE_MEMORY_RELEASER_H_

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace vidclf {

class IdleMemoryReleaser {
 public:
  struct Load {
    bool busy = false;       // calls in flight or streams open
    int64_t held_bytes = 0;  // what the calls in flight hold (payloads, decoded frames)
  };

  // Polls `load` every `poll`. Once it has been busy and then not, releases free heap memory at
  // each of the next kReleases idle polls. While busy, releases it once whenever the bytes held
  // have fallen by kBurstBytes from their peak since the last release: a server that never falls
  // idle would otherwise keep a burst's memory for good (in a 3-minute bench/soak/run_soak.py trial
  // with a small model, a burst of 100 10 MB calls left 1107 MB resident, 449 MB with this
  // release).
  IdleMemoryReleaser(std::function<Load()> load, absl::Duration poll);
  ~IdleMemoryReleaser();

  IdleMemoryReleaser(const IdleMemoryReleaser&) = delete;
  IdleMemoryReleaser& operator=(const IdleMemoryReleaser&) = delete;

 private:
  static constexpr int kReleases = 3;
  static constexpr int64_t kBurstBytes = int64_t{256} << 20;

  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_IDLE_MEMORY_RELEASER_H_
