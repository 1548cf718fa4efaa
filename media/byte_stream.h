// Bytes that arrive in chunks (from a gRPC stream, a socket) and are demuxed as they arrive.
#ifndef VIDCLF_MEDIA_BYTE_STREAM_H_
#define VIDCLF_MEDIA_BYTE_STREAM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// A one-way pipe of bytes between a producer thread, which appends chunks as they arrive, and the
// decoder (DecodeClipFromStream), which reads them on its own thread. The decoder may keep every
// byte (a container it cannot demux before the end) or drop what it has read; either way the
// bytes held never exceed `max_bytes`. Thread-safe.
class ByteStream {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ByteStream(int64_t max_bytes) : max_bytes_(max_bytes) {}
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Producer side.
  // Appends a chunk; never blocks. RESOURCE_EXHAUSTED once the input passes max_bytes,
  // FAILED_PRECONDITION after Finish or Abort, and CANCELLED once the decoder has stopped reading
  // (it failed, or has every frame it needs): the producer can stop sending then.
  absl::Status Append(absl::string_view chunk);
  // The input is complete.
  void Finish();
  // The input will never be complete (the client went away): the decoder stops with `status`.
  void Abort(absl::Status status);

  // Decoder side.
  // Copies up to `size` bytes from the read position, waiting for them until `deadline`. Returns
  // the count, 0 at the end of the input, or -1 when the input was aborted, went over max_bytes or
  // the deadline passed; read_error() then says which.
  int Read(uint8_t* buffer, int size, Clock::time_point deadline);
  // Waits until bytes [offset, offset + size) have arrived, or the input ended, and returns a copy
  // of those that have (unless reading dropped them). Empty with read_error() set on an abort or
  // past the deadline.
  std::string Peek(int64_t offset, int64_t size, Clock::time_point deadline);
  // Waits for the end of the input and returns all of it, valid until CloseReader. Empty with
  // read_error() set on an abort or past the deadline.
  absl::string_view WaitForEnd(Clock::time_point deadline);
  // From now on, bytes behind the read position are dropped.
  void DropReadBytes();
  // The error that made Read return -1 or Peek come back short; OK otherwise.
  absl::Status read_error() const;
  // The decoder has stopped: the bytes are freed and further chunks are refused.
  void CloseReader();

  int64_t bytes_received() const;

 private:
  // Waits until `end` bytes have arrived, the input finished or failed, or `deadline`; returns
  // false (with error_ set) on failure or timeout. `lock` holds mutex_.
  bool WaitForBytes(std::unique_lock<std::mutex>& lock, int64_t end, Clock::time_point deadline);

  const int64_t max_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  // The bytes from offset `dropped_` up to `received_`.
  std::string bytes_;
  int64_t dropped_ = 0;
  int64_t received_ = 0;
  int64_t read_position_ = 0;
  bool drop_read_bytes_ = false;
  bool finished_ = false;
  bool reader_closed_ = false;
  absl::Status error_;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_BYTE_STREAM_H_
