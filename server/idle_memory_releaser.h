// Hands freed heap memory back to the system once the server falls idle after a load, or once a
// burst of large calls has gone while others go on.
//
// glibc keeps what a load freed in its arenas. Measured with bench/serving/memory_after_load.sh
// (48 calls at concurrency 16 over cockatoo.mp4 and 10 s 720p and 1080p H.264 files, the demo
// model), resident memory 10 s after the load ended against 229 MB idle:
//   glibc as it is                                  517 MB
//   glibc, MALLOC_ARENA_MAX=2                       493 MB
//   jemalloc (LD_PRELOAD)                           377 MB
//   jemalloc, background thread, 1 s decay          273 MB
//   mimalloc (LD_PRELOAD)                           468 MB
//   glibc, malloc_trim(0) once idle                 328 MB
//   glibc, malloc_trim(0) once idle, arenas <= cores 264 MB
// Throughput was the same within noise (2.2-2.4 clips/s). Since the heap keeps up to 128 MiB free
// at its top while busy (model/tensor_heap.h), a thread arena holds on to its top, up to 64 MiB:
// malloc_trim shrinks only the main arena's. Against 234 MB idle, with the three default models
// sharing one backbone, two runs each, at 3.0 clips/s:
//   malloc_trim(0) once idle, arenas <= cores (2)   256 and 290 MB
//   malloc_trim(0) once idle, one arena             258 and 258 MB   <- this
// One arena cost no throughput in a side-by-side run at concurrency 1 and 8 (3.17 and 4.14
// clips/s against 3.17 and 4.08, medians of three): small allocations come from per-thread
// caches, and tensors are few and large.
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

  // Polls `load` every `poll`. Once it has been busy and then not, trims the heap at each of the
  // next kTrims idle polls. While busy, trims once whenever the bytes held have fallen by
  // kBurstBytes from their peak since the last trim: a server that never falls idle would
  // otherwise keep a burst's memory for good (in a 3-minute bench/soak/run_soak.py trial with a
  // small model, a burst of 100 10 MB calls left 1107 MB resident, 449 MB with this trim).
  IdleMemoryReleaser(std::function<Load()> load, absl::Duration poll);
  ~IdleMemoryReleaser();

  // Makes every thread allocate from glibc's main arena (it makes up to 8 per core), the one
  // arena whose free top malloc_trim hands back. Call before the threads that allocate start.
  static void UseOneArena();

  // Trims the heap once, now: after loading the models, whose preparation (the fused backbone's
  // folding) frees temporaries that glibc would otherwise keep until the first load ends.
  static void TrimNow();
  IdleMemoryReleaser(const IdleMemoryReleaser&) = delete;
  IdleMemoryReleaser& operator=(const IdleMemoryReleaser&) = delete;

 private:
  static constexpr int kTrims = 3;
  static constexpr int64_t kBurstBytes = int64_t{256} << 20;

  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace vidclf

#endif  // VIDCLF_SERVER_IDLE_MEMORY_RELEASER_H_
