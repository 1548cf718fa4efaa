#include "server/engine/admission.h"

#include "absl/strings/str_cat.h"

namespace vidclf::engine {

absl::Status Admission::Admit(int64_t bytes, Refusal* refusal) {
  absl::MutexLock lock(&mutex_);
  if (draining_) {
    *refusal = Refusal::kDraining;
    return absl::UnavailableError("the server is shutting down; retry on another replica");
  }
  if (calls_ >= options_.max_inflight_calls) {
    *refusal = Refusal::kRequests;
    return absl::ResourceExhaustedError(
        absl::StrCat("server is busy: ", calls_, " calls are in flight, the limit; retry later"));
  }
  if (bytes_ + bytes > options_.max_inflight_bytes) {
    *refusal = Refusal::kBytes;
    return absl::ResourceExhaustedError(
        absl::StrCat("server is busy: calls in flight hold ", bytes_, " bytes and this one needs ",
                     bytes, "; the limit is ", options_.max_inflight_bytes, "; retry later"));
  }
  ++calls_;
  bytes_ += bytes;
  return absl::OkStatus();
}

absl::Status Admission::AddBytes(int64_t bytes) {
  absl::MutexLock lock(&mutex_);
  if (bytes_ + bytes > options_.max_inflight_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("server is busy: calls in flight hold ",
                                                     bytes_, " bytes, near the limit of ",
                                                     options_.max_inflight_bytes, "; retry later"));
  }
  bytes_ += bytes;
  return absl::OkStatus();
}

void Admission::Release(int64_t bytes, bool call_ended) {
  absl::MutexLock lock(&mutex_);
  bytes_ -= bytes;
  if (call_ended) --calls_;
}

void Admission::StartDraining() {
  absl::MutexLock lock(&mutex_);
  draining_ = true;
}

bool Admission::draining() const {
  absl::MutexLock lock(&mutex_);
  return draining_;
}

int Admission::inflight_calls() const {
  absl::MutexLock lock(&mutex_);
  return calls_;
}

int64_t Admission::inflight_bytes() const {
  absl::MutexLock lock(&mutex_);
  return bytes_;
}

}  // namespace vidclf::engine
