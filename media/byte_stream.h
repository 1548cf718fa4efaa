// Bytes that arrive in chunks (from a gRPC stream, a socket) and are demuxed as they arrive.
#ifndef VIDCLF_MEDIA_BYTE_STREAM_H_
#define VIDCLF_MEDIA_BYTE_STREAM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace vidclf::media {

// A one-way pipe of bytes between a producer thread, which appends chunks as they arrive, and the
// decoder (DecodeClip of a VideoSource::Stream, DecodeLive), which reads them on its own thread.
// The decoder may keep every byte (a container it cannot demux before the end) or drop what it has
// read. Thread-safe.
//
// The bound on its size is one of:
//   kTotalBytes  the input is refused once more than `max_bytes` have arrived in all: an upload,
//                which ends.
//   kHeldBytes   read bytes are always dropped, and a chunk is refused only when the bytes held
//                would pass `max_bytes`: a live feed, which never ends. Its producer keeps under
//                the bound by pausing until CallWhenHeldBelow says there is room.
class ByteStream {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Bound { kTotalBytes, kHeldBytes };

  // A reader waiting for bytes gives up once none has arrived for `idle_timeout` (an upload whose
  // client stalled), as it does at its own deadline.
  explicit ByteStream(int64_t max_bytes, Bound bound = Bound::kTotalBytes,
                      Clock::duration idle_timeout = Clock::duration::max());
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Producer side.
  // Appends a chunk; never blocks. RESOURCE_EXHAUSTED when it passes the bound (the decoder then
  // stops with the same error), FAILED_PRECONDITION after Finish or Abort, and CANCELLED once the
  // decoder has stopped reading (it failed, or has every frame it needs): the producer can stop
  // sending then.
  absl::Status Append(absl::string_view chunk);
  // The input is complete.
  void Finish();
  // The input will never be complete (the client went away): the decoder stops with `status`.
  void Abort(absl::Status status);
  // Calls `callback` once, as soon as held_bytes() is below `bytes`, or the reader has closed, or
  // the stream has failed (aborted, over its bound, or a read past its deadline), so that a
  // producer pausing for room is never stranded. At once, on this thread, when that is already
  // so; otherwise on the thread whose Read, CloseReader or Abort made it so. Never with the
  // stream's lock held, so the callback may call back into the stream. Any number may wait.
  void CallWhenHeldBelow(int64_t bytes, std::function<void()> callback);

  // Decoder side.
  // Copies up to `size` bytes from the read position, waiting for them until `deadline`. Returns
  // the count, 0 at the end of the input, or -1 when the input was aborted, went over its bound,
  // the deadline passed or the idle timeout did (DEADLINE_EXCEEDED); read_error() then says
  // which. Empty chunks are not arrivals.
  int Read(uint8_t* buffer, int size, Clock::time_point deadline);
  // Waits until bytes [offset, offset + size) have arrived, or the input ended, and returns a copy
  // of those that have (unless reading dropped them). Empty with read_error() set on an abort or
  // past the deadline.
  std::string Peek(int64_t offset, int64_t size, Clock::time_point deadline);
  // Waits for the end of the input and returns all of it, valid until CloseReader. Empty with
  // read_error() set on an abort or past the deadline, or when read bytes were dropped.
  absl::string_view WaitForEnd(Clock::time_point deadline);
  // From now on, bytes behind the read position are dropped (always so with kHeldBytes).
  void DropReadBytes();
  // `listener(true)` as a read starts waiting for bytes, `listener(false)` as it stops: on the
  // reader's thread, with the stream's lock held, so it must be quick and not call the stream.
  // Set before reading starts.
  void SetWaitListener(std::function<void(bool waiting)> listener);
  // The error that made Read return -1 or Peek come back short; OK otherwise.
  absl::Status read_error() const;
  // The decoder has stopped: the bytes are freed and further chunks are refused.
  void CloseReader();

  int64_t bytes_received() const;
  // Bytes received and not yet dropped: those not yet read once read bytes are dropped, else all
  // not freed by CloseReader. Read bytes are freed in batches (up to 1 MiB more stays in memory
  // until the next batch) but count as dropped as soon as they are read, so that a producer
  // waiting for room under a small bound is not kept waiting for a batch that never fills.
  int64_t held_bytes() const;
  // When the byte at `offset` arrived (the Append that brought it). Arrival times are kept for the
  // chunks still in memory (the most recent few thousand; older neighbours are merged, keeping
  // the later time); for an offset before them, the arrival of the last chunk forgotten. So the
  // answer is never before the byte's arrival, and exact while it is held. Clock::time_point::max()
  // for an offset that has not arrived.
  Clock::time_point ArrivalOf(int64_t offset) const;

 private:
  // When a chunk ending at `end` (exclusive stream offset) arrived.
  struct Arrival {
    int64_t end;
    Clock::time_point time;
  };
  struct Waiter {
    int64_t below;
    std::function<void()> callback;
  };

  // Waits until `end` bytes have arrived, the input finished or failed, or `deadline` or the idle
  // timeout passed; returns false (with error_ set) on failure or timeout. `lock` holds mutex_.
  bool WaitForBytes(std::unique_lock<std::mutex>& lock, int64_t end, Clock::time_point deadline);
  // held_bytes() with mutex_ held.
  int64_t HeldLocked() const;
  // Frees the bytes before `offset` and forgets their arrival times. mutex_ held.
  void DropBefore(int64_t offset);
  // Takes the waiters whose condition now holds, to be called once mutex_ is released.
  std::vector<std::function<void()>> TakeDueWaiters();
  static void Call(std::vector<std::function<void()>> callbacks);

  const int64_t max_bytes_;
  const Bound bound_;
  const Clock::duration idle_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  // The bytes from offset `dropped_` up to `received_`.
  std::string bytes_;
  int64_t dropped_ = 0;
  int64_t received_ = 0;
  Clock::time_point last_arrival_ = Clock::now();  // of a byte, or the stream's creation
  int64_t read_position_ = 0;
  bool drop_read_bytes_ = false;
  bool finished_ = false;
  bool reader_closed_ = false;
  absl::Status error_;
  // The chunks whose bytes are in memory, oldest first, and the arrival of the last one dropped.
  std::deque<Arrival> arrivals_;
  int64_t arrivals_start_ = 0;
  Clock::time_point last_dropped_arrival_ = Clock::time_point::min();
  std::vector<Waiter> waiters_;
  std::function<void(bool)> wait_listener_;
};

// Closes `input`'s reader side when it goes out of scope, so that however a decode returns, the
// producer learns that nobody reads any more, and the bytes are freed.
class ReaderCloser {
 public:
  explicit ReaderCloser(ByteStream& input) : input_(input) {}
  ~ReaderCloser() { input_.CloseReader(); }
  ReaderCloser(const ReaderCloser&) = delete;
  ReaderCloser& operator=(const ReaderCloser&) = delete;

 private:
  ByteStream& input_;
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_BYTE_STREAM_H_
