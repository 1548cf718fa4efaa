#include "media/demuxer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "media/input_formats.h"
#include "media/uri_redaction.h"

namespace vidclf::media {
namespace {
// libavformat reads through this buffer; 64 KiB is its own default for file input.
constexpr int kIoBufferBytes = 64 * 1024;

// The status for a failure to open or read a URI, from libav's error code.
absl::Status UriError(const std::string& raw_uri, int error_code) {
  const std::string uri = RedactUri(raw_uri);
  switch (error_code) {
    case AVERROR_INVALIDDATA:
      return AvError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("'", uri, "' is not a video container FFmpeg can read"),
                     error_code);
    case AVERROR(ENOENT):
    case AVERROR_HTTP_NOT_FOUND:
      return AvError(absl::StatusCode::kNotFound, absl::StrCat("'", uri, "' was not found"),
                     error_code);
    case AVERROR_HTTP_UNAUTHORIZED:
    case AVERROR_HTTP_FORBIDDEN:
      return AvError(absl::StatusCode::kPermissionDenied,
                     absl::StrCat("'", uri,
                                  "' refused the credentials: check the user name and password "
                                  "in the URI"),
                     error_code);
    case AVERROR(EIO):  // what libavformat's HTTP answers a redirect with, past max_redirects
      return AvError(absl::StatusCode::kUnavailable,
                     absl::StrCat("cannot read '", uri, "' (redirects are not followed)"),
                     error_code);
    default:
      return AvError(absl::StatusCode::kUnavailable, absl::StrCat("cannot read '", uri, "'"),
                     error_code);
  }
}

// Where an AVIOContext seek callback's (offset, whence) lands in an input of `size` bytes (an
// error code when unknown) read up to `position`; for AVSEEK_SIZE, the size. Negative: an error.
int64_t SeekTarget(int64_t offset, int whence, int64_t position, int64_t size) {
  int64_t target = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
      return size;
    case SEEK_SET:
      target = offset;
      break;
    case SEEK_CUR:
      target = position + offset;
      break;
    case SEEK_END:
      if (size < 0) return size;
      target = size + offset;
      break;
    default:
      return AVERROR(EINVAL);
  }
  return target < 0 ? AVERROR(EINVAL) : target;
}

// Formats that libavformat demuxes front to back without seeking (by their iformat names), besides
// fast-start MP4 and the image pipes ("png_pipe", ...).
bool IsStreamingFormat(absl::string_view name) {
  for (const char* streaming : {"mpegts", "matroska,webm", "h264", "hevc", "mjpeg", "ogg", "mpeg",
                                "mpegvideo", "m4v", "flv", "ivf", "obu", "yuv4mpegpipe"}) {
    if (name == streaming) return true;
  }
  return absl::EndsWith(name, "_pipe");
}

uint64_t BigEndian(absl::string_view bytes) {
  uint64_t value = 0;
  for (const char c : bytes) value = (value << 8) | static_cast<uint8_t>(c);
  return value;
}

bool IsIsoBmffBox(absl::string_view type) {
  for (const char* box :
       {"ftyp", "styp", "moov", "moof", "mdat", "free", "skip", "wide", "pdin", "sidx", "uuid"}) {
    if (type == box) return true;
  }
  return false;
}

// Walks an ISO BMFF file's top-level boxes as they arrive: a moov (or moof) before any mdat means
// it demuxes front to back.
absl::StatusOr<bool> MovieBeforeMediaData(ByteStream& input, Demuxer::Clock::time_point deadline) {
  int64_t offset = 0;
  while (true) {
    const std::string header = input.Peek(offset, 16, deadline);
    if (auto status = input.read_error(); !status.ok()) return status;
    if (header.size() < 8) return false;
    const absl::string_view type = absl::string_view(header).substr(4, 4);
    if (type == "moov" || type == "moof") return true;
    if (type == "mdat") return false;
    uint64_t size = BigEndian(absl::string_view(header).substr(0, 4));
    if (size == 1 && header.size() == 16) size = BigEndian(absl::string_view(header).substr(8));
    // 0 (to the end of the file) or malformed: the buffered path reports what is wrong.
    if (size < 8 || size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - offset)) {
      return false;
    }
    offset += static_cast<int64_t>(size);
  }
}

}  // namespace

absl::StatusOr<bool> DemuxesAsItArrives(ByteStream& input, Demuxer::Clock::time_point deadline) {
  // As libavformat probes: on 2 KiB, then on twice as much while unsure, up to 64 KiB; a live
  // feed that never ends is not kept waiting for more than the format needs.
  constexpr int64_t kFirstProbeBytes = 2048;
  constexpr int64_t kMaxProbeBytes = 64 * 1024;
  for (int64_t probe_bytes = kFirstProbeBytes;; probe_bytes *= 2) {
    const std::string head = input.Peek(0, probe_bytes, deadline);
    if (auto status = input.read_error(); !status.ok()) return status;
    if (head.size() >= 8 && IsIsoBmffBox(absl::string_view(head).substr(4, 4))) {
      return MovieBeforeMediaData(input, deadline);
    }
    std::string padded = head;
    padded.resize(head.size() + AVPROBE_PADDING_SIZE, '\0');
    AVProbeData probe = {};
    probe.filename = "";
    probe.buf = reinterpret_cast<unsigned char*>(padded.data());
    probe.buf_size = static_cast<int>(head.size());
    int score = 0;
    const AVInputFormat* format = av_probe_input_format3(&probe, /*is_opened=*/1, &score);
    const bool sure = format != nullptr && score > AVPROBE_SCORE_RETRY;
    const bool all_seen = static_cast<int64_t>(head.size()) < probe_bytes;
    if (sure || all_seen || probe_bytes >= kMaxProbeBytes) {
      return format != nullptr && score >= AVPROBE_SCORE_RETRY && IsStreamingFormat(format->name);
    }
  }
}

absl::StatusOr<std::unique_ptr<Demuxer>> Demuxer::OpenMemory(absl::string_view bytes) {
  std::unique_ptr<Demuxer> demuxer(new Demuxer());
  demuxer->bytes_ = bytes;
  if (auto status = demuxer->OpenCustomIo(&Demuxer::ReadMemory, &Demuxer::SeekMemory);
      !status.ok()) {
    return status;
  }
  return demuxer;
}

absl::StatusOr<std::unique_ptr<Demuxer>> Demuxer::OpenStream(ByteStream& input,
                                                             Clock::time_point deadline,
                                                             int64_t max_fragment_samples) {
  std::unique_ptr<Demuxer> demuxer(new Demuxer());
  demuxer->input_ = &input;
  demuxer->fragment_guard_.emplace(max_fragment_samples);
  demuxer->deadline_ = deadline;
  if (auto status = demuxer->OpenCustomIo(&Demuxer::ReadStream, /*seek=*/nullptr); !status.ok()) {
    if (auto read_error = demuxer->ReadError(); !read_error.ok()) return read_error;
    return status;
  }
  return demuxer;
}

absl::Status Demuxer::UseCustomIo(int (*read)(void*, uint8_t*, int),
                                  int64_t (*seek)(void*, int64_t, int)) {
  auto* io_buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  if (io_buffer == nullptr) return absl::ResourceExhaustedError("out of memory for the I/O buffer");
  io_ = avio_alloc_context(io_buffer, kIoBufferBytes, /*write_flag=*/0, this, read,
                           /*write_packet=*/nullptr, seek);
  if (io_ == nullptr) {
    av_free(io_buffer);
    return absl::ResourceExhaustedError("out of memory for the I/O context");
  }
  format_->pb = io_;
  format_->flags |= AVFMT_FLAG_CUSTOM_IO;
  return absl::OkStatus();
}

absl::Status Demuxer::OpenCustomIo(int (*read)(void*, uint8_t*, int),
                                   int64_t (*seek)(void*, int64_t, int)) {
  format_ = avformat_alloc_context();
  if (format_ == nullptr) return absl::ResourceExhaustedError("out of memory");
  format_->opaque = this;
  format_->io_open = &Demuxer::RefuseNested;
  if (auto status = UseCustomIo(read, seek); !status.ok()) return status;
  const AVInputFormat* input_format = nullptr;
  if (const int probed = av_probe_input_buffer2(io_, &input_format, "", format_, 0, 0);
      probed < 0) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   "input is not a video container FFmpeg can read", probed);
  }
  if (auto status = CheckInputFormat(*input_format, InputOrigin::kUpload, "the input");
      !status.ok()) {
    return status;
  }
  // Besides the refusing io_open hook: no protocol at all, for demuxers that open one past the
  // hook (DASH), and no referencing format in any nested context.
  AVDictionary* options = nullptr;
  av_dict_set(&options, "protocol_whitelist", "", 0);
  av_dict_set(&options, "format_whitelist", FormatWhitelist(InputOrigin::kUpload).c_str(), 0);
  // On failure avformat_open_input frees the context and nulls the pointer; the custom I/O context
  // stays ours and the destructor frees it.
  const int result = avformat_open_input(&format_, nullptr, input_format, &options);
  av_dict_free(&options);
  if (result < 0) {
    if (!refused_.ok()) return refused_;
    return AvError(absl::StatusCode::kInvalidArgument,
                   "input is not a video container FFmpeg can read", result);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Demuxer>> Demuxer::OpenUri(const std::string& uri,
                                                          const UriAllowlist& allowlist,
                                                          Clock::time_point deadline,
                                                          const UriInputChecks& checks,
                                                          const CancellationToken* cancellation) {
  return OpenUriUntil(uri, allowlist, deadline, Clock::duration::max(), checks, cancellation, {});
}

absl::StatusOr<std::unique_ptr<Demuxer>> Demuxer::OpenLiveUri(const std::string& uri,
                                                              const UriAllowlist& allowlist,
                                                              Clock::duration stall_timeout,
                                                              const UriInputChecks& checks,
                                                              const CancellationToken* cancellation,
                                                              const InputOptions& input_options) {
  return OpenUriUntil(uri, allowlist, Clock::time_point::max(), stall_timeout, checks, cancellation,
                      input_options);
}

absl::StatusOr<std::unique_ptr<Demuxer>> Demuxer::OpenUriUntil(
    const std::string& uri, const UriAllowlist& allowlist, Clock::time_point deadline,
    Clock::duration stall_timeout, const UriInputChecks& checks,
    const CancellationToken* cancellation, const InputOptions& input_options) {
  if (auto status = allowlist.Check(uri); !status.ok()) return status;
  if (auto status = ValidateInputOptions(input_options, uri); !status.ok()) return status;
  std::unique_ptr<Demuxer> demuxer(new Demuxer());
  demuxer->cancellation_ = cancellation;
  demuxer->allowlist_ = &allowlist;
  demuxer->uri_ = uri;
  demuxer->deadline_ = deadline;
  demuxer->stall_timeout_ = stall_timeout;
  AVFormatContext* format = avformat_alloc_context();
  if (format == nullptr) return absl::ResourceExhaustedError("out of memory");
  format->opaque = demuxer.get();
  format->interrupt_callback = {&Demuxer::Interrupt, demuxer.get()};
  demuxer->default_io_open_ = format->io_open;
  format->io_open = &Demuxer::OpenNested;
  demuxer->format_ = format;

  AVDictionary* options = nullptr;
  for (const auto& [name, value] : input_options) {
    av_dict_set(&options, name.c_str(), value.c_str(), 0);
  }
  av_dict_set(&options, "protocol_whitelist", allowlist.ProtocolWhitelist().c_str(), 0);
  av_dict_set(&options, "format_whitelist", FormatWhitelist(InputOrigin::kUri).c_str(), 0);
  // A redirect could lead to a host the allowlist does not name.
  av_dict_set(&options, "max_redirects", "0", 0);
  // HLS would otherwise fetch segments over its open connection, past OpenNested's check.
  av_dict_set(&options, "http_persistent", "0", 0);
  // RTSP and the like have no protocol: their demuxer opens its own connections.
  if (avio_find_protocol_name(uri.c_str()) != nullptr) {
    if (auto status = demuxer->OpenCheckedSource(options, checks); !status.ok()) {
      av_dict_free(&options);
      return status;
    }
  }
  // On failure avformat_open_input frees the context and nulls format_.
  const int result =
      avformat_open_input(&demuxer->format_, uri.c_str(), demuxer->input_format_, &options);
  av_dict_free(&options);
  if (result < 0) {
    if (auto status = demuxer->ReadError(); !status.ok()) return status;
    return UriError(uri, result);
  }
  return demuxer;
}

absl::Status Demuxer::OpenCheckedSource(AVDictionary* options, const UriInputChecks& checks) {
  AVDictionary* source_options = nullptr;
  av_dict_copy(&source_options, options, 0);
  const int opened = avio_open2(&source_, uri_.c_str(), AVIO_FLAG_READ,
                                &format_->interrupt_callback, &source_options);
  av_dict_free(&source_options);
  if (opened < 0) {
    if (auto status = ReadError(); !status.ok()) return status;
    return UriError(uri_, opened);
  }
  head_.resize(checks.head_bytes);
  const int read = avio_read(source_, reinterpret_cast<unsigned char*>(head_.data()),
                             static_cast<int>(head_.size()));
  if (read < 0 && read != AVERROR_EOF) {
    if (auto status = ReadError(); !status.ok()) return status;
    return UriError(uri_, read);
  }
  head_.resize(std::max(read, 0));
  source_position_ = static_cast<int64_t>(head_.size());
  if (checks.check_head) {
    if (auto status = checks.check_head(head_); !status.ok()) return status;
  }
  fragment_guard_.emplace(checks.max_fragment_samples);
  if (auto status = UseCustomIo(&Demuxer::ReadSource, &Demuxer::SeekSource); !status.ok()) {
    return status;
  }
  io_->seekable = source_->seekable;
  if (const int probed = av_probe_input_buffer2(io_, &input_format_, uri_.c_str(), format_, 0, 0);
      probed < 0) {
    if (auto status = ReadError(); !status.ok()) return status;
    return UriError(uri_, probed);
  }
  return CheckInputFormat(*input_format_, InputOrigin::kUri,
                          absl::StrCat("'", RedactUri(uri_), "'"));
}

Demuxer::~Demuxer() {
  closing_until_ = Clock::now() + kCloseBudget;
  avformat_close_input(&format_);
  if (io_ != nullptr) av_freep(&io_->buffer);
  avio_context_free(&io_);
  avio_closep(&source_);
}

absl::Status Demuxer::ReadError() const {
  if (!refused_.ok()) return refused_;
  if (cancellation_ != nullptr && cancellation_->cancelled()) return cancellation_->reason();
  if (input_ != nullptr) return input_->read_error();
  if (past_deadline_) {
    return absl::DeadlineExceededError("the source did not deliver the video within the budget");
  }
  if (stalled_) {
    return absl::UnavailableError(
        absl::StrCat("'", RedactUri(uri_), "' sent nothing for ",
                     absl::FormatDuration(absl::FromChrono(stall_timeout_))));
  }
  return absl::OkStatus();
}

int Demuxer::ReadMemory(void* opaque, uint8_t* buffer, int size) {
  auto* self = static_cast<Demuxer*>(opaque);
  const int64_t left = static_cast<int64_t>(self->bytes_.size()) - self->position_;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, size));
  std::memcpy(buffer, self->bytes_.data() + self->position_, n);
  self->position_ += n;
  return n;
}

int64_t Demuxer::SeekMemory(void* opaque, int64_t offset, int whence) {
  auto* self = static_cast<Demuxer*>(opaque);
  const auto size = static_cast<int64_t>(self->bytes_.size());
  const int64_t target = SeekTarget(offset, whence, self->position_, size);
  if (target < 0 || (whence & ~AVSEEK_FORCE) == AVSEEK_SIZE) return target;
  if (target > size) return AVERROR(EINVAL);
  self->position_ = target;
  return target;
}

int Demuxer::ReadStream(void* opaque, uint8_t* buffer, int size) {
  auto* self = static_cast<Demuxer*>(opaque);
  const int n = self->input_->Read(buffer, size, self->deadline_);
  if (n < 0) return AVERROR_EXIT;
  if (n == 0) return AVERROR_EOF;
  return self->PassGuard(buffer, n);
}

int Demuxer::PassGuard(const uint8_t* buffer, int n) {
  refused_ = fragment_guard_->Inspect(
      absl::string_view(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n)));
  return refused_.ok() ? n : AVERROR_EXIT;
}

int Demuxer::ReadSource(void* opaque, uint8_t* buffer, int size) {
  auto* self = static_cast<Demuxer*>(opaque);
  int n = 0;
  const auto head_size = static_cast<int64_t>(self->head_.size());
  if (self->position_ < head_size) {
    n = static_cast<int>(std::min<int64_t>(head_size - self->position_, size));
    std::memcpy(buffer, self->head_.data() + self->position_, n);
  } else {
    if (self->source_position_ != self->position_) {
      const int64_t sought = avio_seek(self->source_, self->position_, SEEK_SET);
      if (sought < 0) return static_cast<int>(sought);
      self->source_position_ = sought;
    }
    n = avio_read_partial(self->source_, buffer, size);
    if (n == 0) return AVERROR_EOF;
    if (n < 0) return n;
    self->source_position_ += n;
    self->NoteProgress();
  }
  self->fragment_guard_->SeekTo(self->position_);
  n = self->PassGuard(buffer, n);
  if (n > 0) self->position_ += n;
  return n;
}

// Moves where the next read starts; the source itself seeks when a read needs it to.
int64_t Demuxer::SeekSource(void* opaque, int64_t offset, int whence) {
  auto* self = static_cast<Demuxer*>(opaque);
  // Asking a protocol for the size may cost a system call; most seeks do not need it.
  const int mode = whence & ~AVSEEK_FORCE;
  const int64_t size =
      mode == AVSEEK_SIZE || mode == SEEK_END ? avio_size(self->source_) : AVERROR(ENOSYS);
  const int64_t target = SeekTarget(offset, whence, self->position_, size);
  if (target < 0 || (whence & ~AVSEEK_FORCE) == AVSEEK_SIZE) return target;
  self->position_ = target;
  return target;
}

int Demuxer::Interrupt(void* opaque) {
  auto* self = static_cast<Demuxer*>(opaque);
  const Clock::time_point now = Clock::now();
  if (self->closing_until_.has_value()) return now >= *self->closing_until_ ? 1 : 0;
  if (now >= self->deadline_) self->past_deadline_ = true;
  if (self->stall_timeout_ != Clock::duration::max() &&
      now - self->last_progress_ >= self->stall_timeout_) {
    self->stalled_ = true;
  }
  // RTSP follows a redirect by itself, past max_redirects and OpenNested, rewriting the URL; stop
  // it before it sends the new host anything.
  if (self->refused_.ok() && self->format_ != nullptr && self->format_->url != nullptr &&
      self->uri_ != self->format_->url) {
    self->refused_ = absl::UnavailableError(
        absl::StrCat("'", RedactUri(self->uri_), "' redirects to '", RedactUri(self->format_->url),
                     "'; redirects are not followed"));
  }
  const bool cancelled = self->cancellation_ != nullptr && self->cancellation_->cancelled();
  return self->past_deadline_ || self->stalled_ || cancelled || !self->refused_.ok() ? 1 : 0;
}

int Demuxer::OpenNested(AVFormatContext* format, AVIOContext** io, const char* url, int flags,
                        AVDictionary** options) {
  auto* self = static_cast<Demuxer*>(format->opaque);
  if (auto status = self->allowlist_->Check(url); !status.ok()) {
    self->refused_ = absl::PermissionDeniedError(
        absl::StrCat("the source refers to a URI that is not allowed: ", status.message()));
    return AVERROR(EPERM);
  }
  if (options != nullptr) av_dict_set(options, "max_redirects", "0", 0);
  return self->default_io_open_(format, io, url, flags, options);
}

int Demuxer::RefuseNested(AVFormatContext* format, AVIOContext** /*io*/, const char* url,
                          int /*flags*/, AVDictionary** /*options*/) {
  auto* self = static_cast<Demuxer*>(format->opaque);
  if (self->refused_.ok()) {
    self->refused_ = absl::InvalidArgumentError(
        absl::StrCat("the input refers to another resource ('", RedactUri(url),
                     "'); uploaded bytes may not open anything else"));
  }
  return AVERROR(EPERM);
}

}  // namespace vidclf::media
