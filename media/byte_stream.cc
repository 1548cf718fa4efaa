#include "media/byte_stream.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace vidclf::media {
namespace {
// Read bytes are dropped in batches of at least this much, so that a stream of small chunks
// does not move the buffer on every read.
constexpr int64_t kDropBatchBytes = 1 << 20;
}  // namespace

absl::Status ByteStream::Append(absl::string_view chunk) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reader_closed_) return absl::CancelledError("the decoder has stopped reading the input");
  if (finished_ || !error_.ok()) {
    return absl::FailedPreconditionError("the input was already finished or aborted");
  }
  if (received_ + static_cast<int64_t>(chunk.size()) > max_bytes_) {
    error_ = absl::ResourceExhaustedError(absl::StrCat("input is over ", max_bytes_, " bytes (",
                                                       received_ + chunk.size(), " so far)"));
    arrived_.notify_all();
    return error_;
  }
  bytes_.append(chunk.data(), chunk.size());
  received_ += static_cast<int64_t>(chunk.size());
  arrived_.notify_all();
  return absl::OkStatus();
}

void ByteStream::Finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  finished_ = true;
  arrived_.notify_all();
}

void ByteStream::Abort(absl::Status status) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_.ok()) error_ = status.ok() ? absl::CancelledError("the input was aborted") : status;
  arrived_.notify_all();
}

bool ByteStream::WaitForBytes(std::unique_lock<std::mutex>& lock, int64_t end,
                              Clock::time_point deadline) {
  const auto arrived = [&] { return received_ >= end || finished_ || !error_.ok(); };
  if (deadline == Clock::time_point::max()) {
    arrived_.wait(lock, arrived);
  } else if (!arrived_.wait_until(lock, deadline, arrived)) {
    error_ = absl::DeadlineExceededError(absl::StrCat(
        "the decode budget ran out while waiting for more input (", received_, " bytes received)"));
  }
  return error_.ok();
}

int ByteStream::Read(uint8_t* buffer, int size, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!WaitForBytes(lock, read_position_ + 1, deadline)) return -1;
  const int count = static_cast<int>(std::min<int64_t>(size, received_ - read_position_));
  std::memcpy(buffer, bytes_.data() + (read_position_ - dropped_), count);
  read_position_ += count;
  if (drop_read_bytes_ && read_position_ - dropped_ >= kDropBatchBytes) {
    bytes_.erase(0, read_position_ - dropped_);
    dropped_ = read_position_;
  }
  return count;
}

std::string ByteStream::Peek(int64_t offset, int64_t size, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (offset < dropped_ || !WaitForBytes(lock, offset + size, deadline)) return {};
  if (offset >= received_) return {};
  return bytes_.substr(offset - dropped_, size);
}

absl::string_view ByteStream::WaitForEnd(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Waiting for byte "infinity" waits for the end.
  WaitForBytes(lock, std::numeric_limits<int64_t>::max(), deadline);
  if (!error_.ok() || dropped_ > 0) return {};
  // Finished: no append will move the bytes again.
  return bytes_;
}

void ByteStream::DropReadBytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  drop_read_bytes_ = true;
}

absl::Status ByteStream::read_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void ByteStream::CloseReader() {
  std::lock_guard<std::mutex> lock(mutex_);
  reader_closed_ = true;
  std::string().swap(bytes_);
  dropped_ = received_;
}

int64_t ByteStream::bytes_received() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return received_;
}

}  // namespace vidclf::media
