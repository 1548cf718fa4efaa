// Demuxes a container from memory, from bytes as they arrive, or from an allowed URI.
#ifndef VIDCLF_MEDIA_DEMUXER_H_
#define VIDCLF_MEDIA_DEMUXER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cancellation.h"
#include "media/av_util.h"
#include "media/byte_stream.h"
#include "media/fragment_guard.h"
#include "media/input_options.h"
#include "media/uri_allowlist.h"

namespace vidclf::media {

// What the bytes at a URI must pass before libavformat reads them, as those from memory or a
// stream pass in DecodeClip: a check of the first bytes, and a FragmentGuard.
struct UriInputChecks {
  size_t head_bytes = 0;
  // Sees the first head_bytes (fewer if the input is shorter); its error refuses the input.
  std::function<absl::Status(absl::string_view head)> check_head;
  int64_t max_fragment_samples = std::numeric_limits<int64_t>::max();
};

// Owns an AVFormatContext and whatever it reads from. Not thread-safe; one demuxer serves one
// reader.
class Demuxer {
 public:
  using Clock = std::chrono::steady_clock;

  // Reads a caller-owned buffer, which must outlive the demuxer, through a custom AVIOContext:
  // no temporary files. Bytes from memory or a stream open nothing else: no protocol, no nested
  // input (media/input_formats.h). INVALID_ARGUMENT when the bytes are not a container
  // libavformat reads, or are one that refers to other resources (a playlist, say).
  static absl::StatusOr<std::unique_ptr<Demuxer>> OpenMemory(absl::string_view bytes);

  // Reads `input` as its bytes arrive, without seeking; `input` must outlive the demuxer. Reads
  // wait for bytes until `deadline`. The bytes pass a FragmentGuard with `max_fragment_samples`
  // first. Errors as OpenMemory, the input's own read_error(), or the guard's.
  static absl::StatusOr<std::unique_ptr<Demuxer>> OpenStream(ByteStream& input,
                                                             Clock::time_point deadline,
                                                             int64_t max_fragment_samples);

  // Opens `uri` when `allowlist` allows it, with FFmpeg's protocol_whitelist set from the
  // allowlist and every URI a nested format opens (HLS segments, say) checked against it too;
  // formats whose demuxers would open resources past that check are refused
  // (media/input_formats.h). Redirects are not followed. Messages name URIs redacted
  // (media/uri_redaction.h). Opening and reading give up at `deadline`, or as soon as
  // `cancellation` (when not null; it must outlive the demuxer) is cancelled. The bytes of a URI
  // read through a protocol (all but RTSP's) pass `checks` first; those of nested URIs do not.
  // Errors:
  //   PERMISSION_DENIED   the allowlist refuses the URI, or one that the source refers to
  //   NOT_FOUND           no such file, or HTTP or RTSP 404
  //   PERMISSION_DENIED   also: the source refused the credentials (HTTP or RTSP 401, 403)
  //   UNAVAILABLE         the source cannot be reached, refuses to serve or redirects
  //   DEADLINE_EXCEEDED   `deadline` passed
  //   the cancellation's reason
  //   INVALID_ARGUMENT    what was fetched is not a container libavformat reads, or is one of
  //                       a format refused for URIs
  //   and the errors of `checks`.
  static absl::StatusOr<std::unique_ptr<Demuxer>> OpenUri(
      const std::string& uri, const UriAllowlist& allowlist, Clock::time_point deadline,
      const UriInputChecks& checks, const CancellationToken* cancellation = nullptr);

  // As OpenUri, for a live source followed without a deadline: opening, and every read after
  // it, gives up with UNAVAILABLE once the source has sent nothing for `stall_timeout`. Progress
  // is each read of the source's bytes, and each NoteProgress(). `input_options` must have
  // passed ValidateInputOptions for `uri`.
  static absl::StatusOr<std::unique_ptr<Demuxer>> OpenLiveUri(
      const std::string& uri, const UriAllowlist& allowlist, Clock::duration stall_timeout,
      const UriInputChecks& checks, const CancellationToken* cancellation = nullptr,
      const InputOptions& input_options = {});

  // Closes the input. Closing may still talk to the source for up to kCloseBudget, even once
  // cancelled or stalled: an RTSP camera is sent its TEARDOWN, so that it frees the session
  // rather than sending to a closed port until its own timeout (cameras allow few sessions).
  ~Demuxer();
  static constexpr Clock::duration kCloseBudget = std::chrono::seconds(1);
  Demuxer(const Demuxer&) = delete;
  Demuxer& operator=(const Demuxer&) = delete;

  AVFormatContext* format() const { return format_; }

  // The source delivered something (a packet, say): restarts the stall timeout of a live URI.
  // Sources whose demuxer opens its own connections (RTSP) make progress only through this.
  void NoteProgress() { last_progress_ = Clock::now(); }

  // Why a read failed, when the reason lies outside libav: the stream input's read_error() or
  // its fragment guard's, a nested URI the allowlist refused, a redirect, the deadline, a live
  // source's stall, or a cancellation. OK otherwise.
  absl::Status ReadError() const;

 private:
  Demuxer() = default;

  // Wraps format_ around a custom AVIOContext reading with `read` (and seeking with `seek` when
  // not null), then reads the container's header.
  absl::Status OpenCustomIo(int (*read)(void*, uint8_t*, int),
                            int64_t (*seek)(void*, int64_t, int));
  // Sets format_'s I/O to a custom AVIOContext (io_) reading with `read` and `seek`.
  absl::Status UseCustomIo(int (*read)(void*, uint8_t*, int), int64_t (*seek)(void*, int64_t, int));
  // Hands `n` bytes just read to fragment_guard_: `n`, or AVERROR_EXIT once it refuses (refused_).
  int PassGuard(const uint8_t* buffer, int n);

  static int ReadMemory(void* opaque, uint8_t* buffer, int size);
  static int64_t SeekMemory(void* opaque, int64_t offset, int whence);
  static int ReadStream(void* opaque, uint8_t* buffer, int size);
  static int ReadSource(void* opaque, uint8_t* buffer, int size);
  static int64_t SeekSource(void* opaque, int64_t offset, int whence);
  static int Interrupt(void* opaque);
  // The io_open hooks: a URI's nested opens pass the allowlist; an upload's are all refused.
  static int OpenNested(AVFormatContext* format, AVIOContext** io, const char* url, int flags,
                        AVDictionary** options);
  static int RefuseNested(AVFormatContext* format, AVIOContext** io, const char* url, int flags,
                          AVDictionary** options);

  // Memory input, and a URI read through a protocol.
  absl::string_view bytes_;
  int64_t position_ = 0;  // of the next byte io_ reads
  // Stream input.
  ByteStream* input_ = nullptr;
  std::optional<FragmentGuard> fragment_guard_;
  // URI input.
  const UriAllowlist* allowlist_ = nullptr;
  std::string uri_;
  // A URI read through a protocol: the protocol's own context, read through io_ so that its
  // bytes pass the checks. head_ holds its first bytes, which were checked before io_ existed.
  AVIOContext* source_ = nullptr;
  std::string head_;
  int64_t source_position_ = 0;
  // Opens source_, checks its head, sets up io_ over it and probes its format (input_format_).
  absl::Status OpenCheckedSource(AVDictionary* options, const UriInputChecks& checks);
  const AVInputFormat* input_format_ = nullptr;
  decltype(AVFormatContext::io_open) default_io_open_ = nullptr;
  absl::Status refused_;

  // OpenUri and OpenLiveUri.
  static absl::StatusOr<std::unique_ptr<Demuxer>> OpenUriUntil(
      const std::string& uri, const UriAllowlist& allowlist, Clock::time_point deadline,
      Clock::duration stall_timeout, const UriInputChecks& checks,
      const CancellationToken* cancellation, const InputOptions& input_options);

  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::duration stall_timeout_ = Clock::duration::max();
  Clock::time_point last_progress_ = Clock::now();
  const CancellationToken* cancellation_ = nullptr;
  bool past_deadline_ = false;
  bool stalled_ = false;
  // Set by the destructor: interrupts then only past this time.
  std::optional<Clock::time_point> closing_until_;
  AVIOContext* io_ = nullptr;
  AVFormatContext* format_ = nullptr;
};

// Whether the container arriving in `input` can be demuxed as it arrives, judged from its first
// bytes (up to 64 KiB): false for an MP4/MOV whose media data come before its moov box, and for
// any format not known to stream (AVI, for one). Reads nothing past what it peeks at. Waits for
// those bytes until `deadline`; fails with the input's read_error().
absl::StatusOr<bool> DemuxesAsItArrives(ByteStream& input, Demuxer::Clock::time_point deadline);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_DEMUXER_H_
