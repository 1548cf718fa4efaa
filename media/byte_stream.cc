#include "media/byte_stream.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace vidclf::media {
namespace {
// Read bytes are dropped in batches of at least this much, so that a stream of small chunks
// does not move the buffer on every read.
constexpr int64_t kDropBatchBytes = 1 << 20;
// Arrival times kept at most; past this, the oldest two merge. A live feed's decoder asks about
// bytes it has just read, among the newest.
constexpr size_t kMaxArrivals = 4096;
}  // namespace

ByteStream::ByteStream(int64_t max_bytes, Bound bound, Clock::duration idle_timeout)
    : max_bytes_(max_bytes),
      bound_(bound),
      idle_timeout_(idle_timeout),
      drop_read_bytes_(bound == Bound::kHeldBytes) {}

absl::Status ByteStream::Append(absl::string_view chunk) {
  std::vector<std::function<void()>> due;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (reader_closed_) return absl::CancelledError("the decoder has stopped reading the input");
    if (finished_ || !error_.ok()) {
      return absl::FailedPreconditionError("the input was already finished or aborted");
    }
    const auto size = static_cast<int64_t>(chunk.size());
    if (bound_ == Bound::kTotalBytes && received_ + size > max_bytes_) {
      error_ = absl::ResourceExhaustedError(
          absl::StrCat("input is over ", max_bytes_, " bytes (", received_ + size, " so far)"));
    } else if (bound_ == Bound::kHeldBytes && HeldLocked() + size > max_bytes_) {
      error_ = absl::ResourceExhaustedError(
          absl::StrCat("the feed is arriving faster than it is decoded: ", HeldLocked(),
                       " bytes are held waiting for the decoder, and a chunk of ", size,
                       " more would pass the limit of ", max_bytes_));
    }
    if (!error_.ok()) {
      arrived_.notify_all();
      status = error_;
      due = TakeDueWaiters();
    } else if (size > 0) {
      bytes_.append(chunk.data(), chunk.size());
      received_ += size;
      last_arrival_ = Clock::now();
      arrivals_.push_back({received_, last_arrival_});
      if (arrivals_.size() > kMaxArrivals) {
        // The second oldest now covers the oldest's bytes too, with its own, later time.
        arrivals_.pop_front();
      }
      arrived_.notify_all();
    }
  }
  Call(std::move(due));
  return status;
}

void ByteStream::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  arrived_.notify_all();
}

void ByteStream::Abort(absl::Status status) {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.ok()) error_ = status.ok() ? absl::CancelledError("the input was aborted") : status;
    arrived_.notify_all();
    due = TakeDueWaiters();
  }
  Call(std::move(due));
}

void ByteStream::CallWhenHeldBelow(int64_t bytes, std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (HeldLocked() >= bytes && !reader_closed_ && error_.ok()) {
      waiters_.push_back({bytes, std::move(callback)});
      return;
    }
  }
  callback();
}

bool ByteStream::WaitForBytes(std::unique_lock<std::mutex>& lock, int64_t end,
                              Clock::time_point deadline) {
  const auto arrived = [&] { return received_ >= end || finished_ || !error_.ok(); };
  if (arrived()) return error_.ok();
  if (wait_listener_) wait_listener_(true);
  while (!arrived()) {
    // Each arrival moves the idle deadline on.
    const Clock::time_point idle_deadline = idle_timeout_ == Clock::duration::max()
                                                ? Clock::time_point::max()
                                                : last_arrival_ + idle_timeout_;
    const Clock::time_point until = std::min(deadline, idle_deadline);
    if (until == Clock::time_point::max()) {
      arrived_.wait(lock);
      continue;
    }
    if (arrived_.wait_until(lock, until) == std::cv_status::no_timeout) continue;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      error_ = absl::DeadlineExceededError(
          absl::StrCat("the decode budget ran out while waiting for more input (", received_,
                       " bytes received)"));
    } else if (now >= last_arrival_ + idle_timeout_) {
      error_ = absl::DeadlineExceededError(absl::StrCat(
          "no bytes arrived for ", absl::FormatDuration(absl::FromChrono(idle_timeout_)),
          " (idle timeout; ", received_, " bytes received)"));
    }
  }
  if (wait_listener_) wait_listener_(false);
  return error_.ok();
}

int ByteStream::Read(uint8_t* buffer, int size, Clock::time_point deadline) {
  std::vector<std::function<void()>> due;
  int count = -1;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (WaitForBytes(lock, read_position_ + 1, deadline)) {
      count = static_cast<int>(std::min<int64_t>(size, received_ - read_position_));
      std::memcpy(buffer, bytes_.data() + (read_position_ - dropped_), count);
      read_position_ += count;
      if (drop_read_bytes_ && read_position_ - dropped_ >= kDropBatchBytes) {
        DropBefore(read_position_);
      }
    }
    due = TakeDueWaiters();
  }
  Call(std::move(due));
  return count;
}

std::string ByteStream::Peek(int64_t offset, int64_t size, Clock::time_point deadline) {
  std::vector<std::function<void()>> due;
  std::string copy;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (offset >= dropped_ && WaitForBytes(lock, offset + size, deadline) && offset < received_) {
      copy = bytes_.substr(offset - dropped_, size);
    }
    due = TakeDueWaiters();  // a wait past the deadline fails the stream
  }
  Call(std::move(due));
  return copy;
}

absl::string_view ByteStream::WaitForEnd(Clock::time_point deadline) {
  std::vector<std::function<void()>> due;
  absl::string_view all;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Waiting for byte "infinity" waits for the end.
    WaitForBytes(lock, std::numeric_limits<int64_t>::max(), deadline);
    // Finished: no append will move the bytes again.
    if (error_.ok() && dropped_ == 0) all = bytes_;
    due = TakeDueWaiters();
  }
  Call(std::move(due));
  return all;
}

void ByteStream::SetWaitListener(std::function<void(bool waiting)> listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_listener_ = std::move(listener);
}

void ByteStream::DropReadBytes() {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_read_bytes_ = true;
    due = TakeDueWaiters();
  }
  Call(std::move(due));
}

absl::Status ByteStream::read_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void ByteStream::CloseReader() {
  std::vector<std::function<void()>> due;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reader_closed_ = true;
    DropBefore(received_);
    std::string().swap(bytes_);
    due = TakeDueWaiters();
  }
  Call(std::move(due));
}

int64_t ByteStream::bytes_received() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return received_;
}

int64_t ByteStream::held_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return HeldLocked();
}

ByteStream::Clock::time_point ByteStream::ArrivalOf(int64_t offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (offset >= received_) return Clock::time_point::max();
  if (offset < arrivals_start_) return last_dropped_arrival_;
  const auto holding =
      std::upper_bound(arrivals_.begin(), arrivals_.end(), offset,
                       [](int64_t value, const Arrival& arrival) { return value < arrival.end; });
  return holding->time;  // offset < received_, the last chunk's end
}

int64_t ByteStream::HeldLocked() const {
  return received_ - std::max(dropped_, drop_read_bytes_ ? read_position_ : dropped_);
}

void ByteStream::DropBefore(int64_t offset) {
  bytes_.erase(0, offset - dropped_);
  dropped_ = offset;
  while (!arrivals_.empty() && arrivals_.front().end <= offset) {
    arrivals_start_ = arrivals_.front().end;
    last_dropped_arrival_ = arrivals_.front().time;
    arrivals_.pop_front();
  }
}

std::vector<std::function<void()>> ByteStream::TakeDueWaiters() {
  std::vector<std::function<void()>> due;
  const bool stopped = reader_closed_ || !error_.ok();
  const int64_t held = HeldLocked();
  for (auto waiter = waiters_.begin(); waiter != waiters_.end();) {
    if (stopped || held < waiter->below) {
      due.push_back(std::move(waiter->callback));
      waiter = waiters_.erase(waiter);
    } else {
      ++waiter;
    }
  }
  return due;
}

void ByteStream::Call(std::vector<std::function<void()>> callbacks) {
  for (auto& callback : callbacks) callback();
}

}  // namespace vidclf::media
