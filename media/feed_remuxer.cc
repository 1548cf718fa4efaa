#include "media/feed_remuxer.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <thread>

#include "absl/memory/memory.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "media/av_util.h"
#include "media/libav_settings.h"
#include "media/uri_redaction.h"

extern "C" {
#ifdef VIDCLF_HAVE_AVDEVICE
#include <libavdevice/avdevice.h>
#endif
#include <libavutil/dict.h>
#include <libavutil/mem.h>
}

namespace vidclf::media {
namespace {

// Standard input is read through this buffer, libavformat's own default for file input.
constexpr int kStdinBufferBytes = 64 * 1024;
// How long a read of standard input waits for bytes before it checks the cancellation again.
constexpr int kPollMs = 50;
// The longest sleep of the realtime wait between checks of the cancellation.
constexpr auto kMaxSleep = std::chrono::milliseconds(20);

// Whether `source` is a URL of a kind that streams until it is stopped (a camera), so that its
// end means it went away.
bool HasNoEnd(const std::string& source) {
  for (absl::string_view scheme : {"rtsp://", "rtsps://", "rtmp://", "udp://", "srt://"}) {
    if (absl::StartsWithIgnoreCase(source, scheme)) return true;
  }
  return false;
}

// Standard input cannot seek, so an MP4 whose index comes after its media data cannot be read
// from it: said with every error about what it holds.
constexpr char kStdinHint[] =
    " (standard input must hold a container that streams, such as MPEG-TS, Matroska or "
    "fragmented MP4; give an MP4 file by its name)";

bool IsCharacterDevice(const std::string& path) {
  struct stat info = {};
  return stat(path.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
}

// The status for a failure to open `source`, from libav's error code.
absl::Status OpenError(const std::string& source, int error_code) {
  const std::string quoted = absl::StrCat("'", RedactUri(source), "'");
  switch (error_code) {
    case AVERROR(ENOENT):
    case AVERROR_HTTP_NOT_FOUND:
      return AvError(absl::StatusCode::kNotFound, absl::StrCat(quoted, " was not found"),
                     error_code);
    case AVERROR(EACCES):
    case AVERROR(EPERM):
    case AVERROR_HTTP_UNAUTHORIZED:
    case AVERROR_HTTP_FORBIDDEN:
      return AvError(absl::StatusCode::kPermissionDenied, absl::StrCat("cannot open ", quoted),
                     error_code);
    case AVERROR_INVALIDDATA:
      return AvError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(quoted, " is not a video container FFmpeg can read",
                                  source == "-" ? kStdinHint : ""),
                     error_code);
    case AVERROR(EISDIR):
      return AvError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat(quoted, " is a directory, not a video"), error_code);
    case AVERROR_PROTOCOL_NOT_FOUND:
      return AvError(absl::StatusCode::kInvalidArgument,
                     absl::StrCat("FFmpeg cannot read URLs like ", quoted), error_code);
    case AVERROR(EBUSY):
      return AvError(absl::StatusCode::kUnavailable,
                     absl::StrCat(quoted, " is busy (does another program use it?)"), error_code);
    default:
      return AvError(absl::StatusCode::kUnavailable, absl::StrCat("cannot read ", quoted),
                     error_code);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FeedRemuxer>> FeedRemuxer::Open(const std::string& source,
                                                               FeedRemuxerOptions options) {
#ifdef VIDCLF_HAVE_AVDEVICE
  static std::once_flag register_devices;
  std::call_once(register_devices, [] { avdevice_register_all(); });
#endif
  EnsureLibavConfigured();
  if (options.chunk_bytes <= 0) {
    return absl::InvalidArgumentError("the feed's chunk size must be positive");
  }
  auto remuxer = absl::WrapUnique(new FeedRemuxer());
  remuxer->options_ = std::move(options);
  remuxer->source_ = source;
  if (absl::Status status = remuxer->OpenInput(source); !status.ok()) return status;
  if (absl::Status status = remuxer->CreateOutput(); !status.ok()) return status;
  return remuxer;
}

FeedRemuxer::~FeedRemuxer() {
  // Neither context closes the custom I/O it was given.
  avformat_free_context(output_);
  if (output_io_ != nullptr) {
    av_freep(&output_io_->buffer);
    avio_context_free(&output_io_);
  }
  closing_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  avformat_close_input(&input_);
  if (stdin_io_ != nullptr) {
    av_freep(&stdin_io_->buffer);
    avio_context_free(&stdin_io_);
  }
}

std::string FeedRemuxer::codec_name() const {
  return avcodec_get_name(input_stream_->codecpar->codec_id);
}
int FeedRemuxer::width() const { return input_stream_->codecpar->width; }
int FeedRemuxer::height() const { return input_stream_->codecpar->height; }

absl::Status FeedRemuxer::OpenInput(const std::string& source) {
  input_ = avformat_alloc_context();
  if (input_ == nullptr) return absl::ResourceExhaustedError("out of memory opening the source");
  input_->interrupt_callback = {&FeedRemuxer::Interrupt, this};
  const bool device = source != "-" && IsCharacterDevice(source);
#ifndef VIDCLF_HAVE_AVDEVICE
  if (device) {
    return absl::UnimplementedError(
        absl::StrCat("cannot open the camera ", source,
                     ": this vidclf was built without cameras (VIDCLF_CAMERAS=OFF)"));
  }
#endif
  std::string url = source;
  if (source == "-") {
    auto* buffer = static_cast<uint8_t*>(av_malloc(kStdinBufferBytes));
    stdin_io_ = buffer == nullptr
                    ? nullptr
                    : avio_alloc_context(buffer, kStdinBufferBytes, /*write_flag=*/0, this,
                                         &FeedRemuxer::ReadStdin, nullptr, nullptr);
    if (stdin_io_ == nullptr) {
      av_free(buffer);
      return absl::ResourceExhaustedError("out of memory opening standard input");
    }
    input_->pb = stdin_io_;
    input_->flags |= AVFMT_FLAG_CUSTOM_IO;
    url = "pipe:";
  } else if (!device && !absl::StrContains(source, "://")) {
    url = absl::StrCat("file:", source);  // a path with a colon is not a protocol
  }
  const AVInputFormat* format = nullptr;
  std::string format_name = options_.input_format;
  if (format_name.empty() && device) format_name = "v4l2";
  if (!format_name.empty()) {
    format = av_find_input_format(format_name.c_str());
    if (format == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("this FFmpeg has no input format or device '", format_name, "'"));
    }
  }
  AVDictionary* input_options = nullptr;
  for (const auto& [key, value] : options_.input_options) {
    av_dict_set(&input_options, key.c_str(), value.c_str(), 0);
  }
  // Frees input_ and sets it to null when it fails.
  const int error = avformat_open_input(&input_, url.c_str(), format, &input_options);
  const AVDictionaryEntry* unused = av_dict_get(input_options, "", nullptr, AV_DICT_IGNORE_SUFFIX);
  const std::string unused_key = unused == nullptr ? "" : unused->key;
  av_dict_free(&input_options);
  if (Cancelled()) return CancelledStatus();
  if (error < 0) return OpenError(source, error);
  if (!unused_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input option '", unused_key, "' is not one that '", RedactUri(source),
                     "' (format: ", input_->iformat->name, ") takes"));
  }
  if (const int info = avformat_find_stream_info(input_, nullptr); info < 0) {
    if (Cancelled()) return CancelledStatus();
    return OpenError(source, info);
  }
  int index = av_find_best_stream(input_, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  // A cover picture (an MP3's, say) is a video stream of one frame, not a feed.
  if (index >= 0 && (input_->streams[index]->disposition & AV_DISPOSITION_ATTACHED_PIC) != 0) {
    index = -1;
    for (unsigned i = 0; i < input_->nb_streams; ++i) {
      const AVStream* stream = input_->streams[i];
      if (stream->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
          (stream->disposition & AV_DISPOSITION_ATTACHED_PIC) == 0) {
        index = static_cast<int>(i);
        break;
      }
    }
  }
  if (index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("no video stream in '", RedactUri(source),
                                                   "' (format: ", input_->iformat->name, ")"));
  }
  input_stream_ = input_->streams[index];
  // The demuxer need not keep packets of the other streams.
  for (unsigned i = 0; i < input_->nb_streams; ++i) {
    if (static_cast<int>(i) != index) input_->streams[i]->discard = AVDISCARD_ALL;
  }
  return absl::OkStatus();
}

absl::Status FeedRemuxer::CreateOutput() {
  const AVCodecParameters* input = input_stream_->codecpar;
  const AVOutputFormat* format = av_guess_format("matroska", nullptr, nullptr);
  if (format == nullptr) return absl::InternalError("this FFmpeg has no Matroska muxer");
  if (avformat_query_codec(format, input->codec_id, FF_COMPLIANCE_NORMAL) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("the video of '", RedactUri(source_), "' is ",
                                                   avcodec_get_name(input->codec_id),
                                                   ", which cannot be sent in Matroska"));
  }
  if (const int error = avformat_alloc_output_context2(&output_, format, nullptr, nullptr);
      error < 0) {
    return AvError(absl::StatusCode::kInternal, "cannot create the feed's muxer", error);
  }
  AVStream* stream = avformat_new_stream(output_, nullptr);
  if (stream == nullptr) return absl::ResourceExhaustedError("out of memory creating the feed");
  if (const int error = avcodec_parameters_copy(stream->codecpar, input); error < 0) {
    return AvError(absl::StatusCode::kInternal, "cannot copy the video's parameters", error);
  }
  // The source container's tag means nothing in the feed's; raw frames keep theirs, which names
  // their pixel format.
  if (input->codec_id != AV_CODEC_ID_RAWVIDEO) {
    stream->codecpar->codec_tag = 0;
  } else if (stream->codecpar->codec_tag == 0) {
    stream->codecpar->codec_tag =
        avcodec_pix_fmt_to_codec_tag(static_cast<AVPixelFormat>(input->format));
  }
  stream->time_base = input_stream_->time_base;
  stream->avg_frame_rate = input_stream_->avg_frame_rate;
  const AVCodecDescriptor* codec = avcodec_descriptor_get(input->codec_id);
  waiting_for_keyframe_ = codec == nullptr || (codec->props & AV_CODEC_PROP_INTRA_ONLY) == 0;
  return absl::OkStatus();
}

absl::Status FeedRemuxer::Run(const Sink& sink) {
  if (ran_) return absl::FailedPreconditionError("a FeedRemuxer runs once");
  ran_ = true;
  sink_ = &sink;
  auto* buffer = static_cast<uint8_t*>(av_malloc(options_.chunk_bytes));
  output_io_ = buffer == nullptr
                   ? nullptr
                   : avio_alloc_context(buffer, options_.chunk_bytes, /*write_flag=*/1, this,
                                        nullptr, &FeedRemuxer::WriteToSink, nullptr);
  if (output_io_ == nullptr) {
    av_free(buffer);
    return absl::ResourceExhaustedError("out of memory creating the feed");
  }
  output_io_->seekable = 0;
  output_->pb = output_io_;
  // Each packet goes to the sink as soon as it is written, not when the buffer fills. (The
  // Matroska muxer converts H.264 and HEVC from Annex B, as MPEG-TS sources carry them, to the
  // length-prefixed form it stores.)
  output_->flush_packets = 1;
  // Live: no seeking back to write sizes, no index.
  AVDictionary* muxer_options = nullptr;
  av_dict_set(&muxer_options, "live", "1", 0);
  const int header = avformat_write_header(output_, &muxer_options);
  av_dict_free(&muxer_options);
  if (header < 0) return WriteError("start", header);

  PacketPtr packet(av_packet_alloc());
  if (packet == nullptr) return absl::ResourceExhaustedError("out of memory reading the source");
  while (true) {
    if (Cancelled()) return CancelledStatus();
    const int error = av_read_frame(input_, packet.get());
    if (error == AVERROR_EOF && HasNoEnd(source_)) {
      return absl::UnavailableError(absl::StrCat(
          "'", RedactUri(source_), "' stopped sending after ", packets_written_, " packets"));
    }
    if (error == AVERROR_EOF) break;
    if (error == AVERROR(EAGAIN)) {  // a device with no frame ready yet
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (error < 0) return ReadError(error);
    absl::Status status = absl::OkStatus();
    if (packet->stream_index == input_stream_->index) status = WritePacket(packet.get());
    av_packet_unref(packet.get());
    if (!status.ok()) return status;
  }
  if (const int error = av_write_trailer(output_); error < 0) return WriteError("end", error);
  return sink_error_;
}

absl::Status FeedRemuxer::WritePacket(AVPacket* packet) {
  if (waiting_for_keyframe_) {
    if ((packet->flags & AV_PKT_FLAG_KEY) == 0) return absl::OkStatus();
    waiting_for_keyframe_ = false;
  }
  if (packet->dts == AV_NOPTS_VALUE) packet->dts = packet->pts;
  if (packet->pts == AV_NOPTS_VALUE) packet->pts = packet->dts;
  const AVRational input_time_base = input_stream_->time_base;
  if (packet->dts == AV_NOPTS_VALUE) {
    // An untimed source (a raw bitstream): frames follow each other at its frame rate.
    AVRational rate = av_guess_frame_rate(input_, input_stream_, nullptr);
    if (rate.num <= 0 || rate.den <= 0) rate = {25, 1};
    packet->dts = packet->pts = av_rescale_q(packets_written_, av_inv_q(rate), input_time_base);
  }

  const double seconds = static_cast<double>(packet->dts) * av_q2d(input_time_base);
  if (packets_written_ == 0) {
    first_packet_seconds_ = seconds;
    first_packet_written_ = std::chrono::steady_clock::now();
  } else if (options_.realtime) {
    if (absl::Status status = WaitUntil(seconds - first_packet_seconds_); !status.ok()) {
      return status;
    }
  }

  const AVStream* stream = output_->streams[0];
  av_packet_rescale_ts(packet, input_time_base, stream->time_base);
  packet->stream_index = 0;
  packet->pos = -1;
  // Muxers refuse decoding times that do not increase (a live source's jitter, a rounding in the
  // rescale); as the ffmpeg CLI does, move them just past the previous one.
  if (packets_written_ > 0 && packet->dts <= last_dts_) {
    if (packet->pts >= packet->dts) packet->pts = std::max(packet->pts, last_dts_ + 1);
    packet->dts = last_dts_ + 1;
  }
  last_dts_ = packet->dts;
  if (const int error = av_write_frame(output_, packet); error < 0) {
    return WriteError("write a packet of", error);
  }
  // A null packet ends Matroska's cluster, which the muxer would otherwise hold for up to a
  // second.
  if (const int error = av_write_frame(output_, nullptr); error < 0) {
    return WriteError("write a packet of", error);
  }
  ++packets_written_;
  return absl::OkStatus();
}

absl::Status FeedRemuxer::WaitUntil(double seconds) {
  const auto due = first_packet_written_ + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               std::chrono::duration<double>(seconds));
  while (true) {
    if (Cancelled()) return CancelledStatus();
    const auto now = std::chrono::steady_clock::now();
    if (now >= due) return absl::OkStatus();
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(due - now, kMaxSleep));
  }
}

bool FeedRemuxer::Cancelled() const {
  return options_.cancellation != nullptr && options_.cancellation->cancelled();
}

absl::Status FeedRemuxer::CancelledStatus() const { return options_.cancellation->reason(); }

absl::Status FeedRemuxer::ReadError(int error_code) const {
  if (Cancelled()) return CancelledStatus();
  if (error_code == AVERROR_INVALIDDATA) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("'", RedactUri(source_), "' holds data FFmpeg cannot read",
                                source_ == "-" ? kStdinHint : ""),
                   error_code);
  }
  return AvError(absl::StatusCode::kUnavailable,
                 absl::StrCat("reading '", RedactUri(source_), "' failed"), error_code);
}

absl::Status FeedRemuxer::WriteError(absl::string_view what, int error_code) const {
  if (!sink_error_.ok()) return sink_error_;
  if (Cancelled()) return CancelledStatus();
  return AvError(absl::StatusCode::kInvalidArgument,
                 absl::StrCat("cannot ", what, " the Matroska feed of '", RedactUri(source_), "'"),
                 error_code);
}

int FeedRemuxer::ReadStdin(void* opaque, uint8_t* buffer, int size) {
  const auto* self = static_cast<FeedRemuxer*>(opaque);
  while (true) {
    if (self->Cancelled()) return AVERROR_EXIT;
    pollfd ready = {STDIN_FILENO, POLLIN, 0};
    const int polled = poll(&ready, 1, kPollMs);
    if (polled < 0 && errno != EINTR) return AVERROR(errno);
    if (polled <= 0) continue;
    const ssize_t count = read(STDIN_FILENO, buffer, static_cast<size_t>(size));
    if (count > 0) return static_cast<int>(count);
    if (count == 0) return AVERROR_EOF;
    if (errno != EINTR && errno != EAGAIN) return AVERROR(errno);
  }
}

int FeedRemuxer::WriteToSink(void* opaque, uint8_t* buffer, int size) {
  auto* self = static_cast<FeedRemuxer*>(opaque);
  if (!self->sink_error_.ok()) return AVERROR_EXIT;
  absl::Status status =
      (*self->sink_)(absl::string_view(reinterpret_cast<const char*>(buffer), size));
  if (!status.ok()) {
    self->sink_error_ = std::move(status);
    return AVERROR_EXIT;
  }
  return size;
}

int FeedRemuxer::Interrupt(void* opaque) {
  const auto* self = static_cast<const FeedRemuxer*>(opaque);
  if (self->closing_until_.has_value()) {
    return std::chrono::steady_clock::now() >= *self->closing_until_ ? 1 : 0;
  }
  return self->Cancelled() ? 1 : 0;
}

}  // namespace vidclf::media
