// Bounds what the engine holds at once: the calls in flight and the bytes they hold (uploaded
// video, decoded frames). Past either bound a call is refused at once, never queued.
#ifndef VIDCLF_SERVER_ENGINE_ADMISSION_H_
#define VIDCLF_SERVER_ENGINE_ADMISSION_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/engine_observer.h"

namespace vidclf::engine {

struct AdmissionOptions {
  // Calls admitted and not yet finished, from admission to their answer.
  int max_inflight_calls = 64;
  // Bytes those calls hold: request payloads, uploads as they arrive, and decoded frames.
  int64_t max_inflight_bytes = int64_t{1} << 30;
};

// Thread-safe.
class Admission {
 public:
  explicit Admission(const AdmissionOptions& options) : options_(options) {}

  // Takes one call holding `bytes`, or refuses it: RESOURCE_EXHAUSTED past a bound, UNAVAILABLE
  // once draining. `refusal` says which when not OK.
  absl::Status Admit(int64_t bytes, Refusal* refusal);
  // More bytes for a call already admitted (an upload's next chunk); RESOURCE_EXHAUSTED, with
  // nothing taken, past the byte bound.
  absl::Status AddBytes(int64_t bytes);
  // A call ends, handing back its bytes; or bytes a call no longer holds (call_ended false).
  void Release(int64_t bytes, bool call_ended);

  // From now on every call is refused with UNAVAILABLE, so that clients retry elsewhere.
  void StartDraining();
  bool draining() const;

  int inflight_calls() const;
  int64_t inflight_bytes() const;

 private:
  const AdmissionOptions options_;
  mutable absl::Mutex mutex_;
  int calls_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace vidclf::engine

#endif  // VIDCLF_SERVER_ENGINE_ADMISSION_H_
