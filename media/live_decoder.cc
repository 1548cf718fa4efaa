#include "media/live_decoder.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "media/av_util.h"
#include "media/demuxer.h"
#include "media/feed_sampler.h"
#include "media/libav_settings.h"
#include "media/uri_redaction.h"
#include "media/video_stream.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
}

namespace vidclf::media {
namespace {

using Clock = ByteStream::Clock;

// A live feed waits for its bytes as long as the caller lets it: the caller aborts the input to
// stop it.
constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

absl::Status CancellationStatus(const LiveDecodeOptions& options) {
  if (options.cancellation == nullptr || !options.cancellation->cancelled()) {
    return absl::OkStatus();
  }
  return options.cancellation->reason();
}

// When the packets sent to the decoder arrived, by presentation timestamp, until their frames
// come out (in presentation order, not the order sent).
class PacketArrivals {
 public:
  void Sent(int64_t pts, Clock::time_point arrived) {
    latest_ = arrived;
    if (pts == AV_NOPTS_VALUE) return;
    pending_.push_back({pts, arrived});
    // A decoder holds back a few frames (reordering, frame threads), never this many; the rest
    // are packets whose frames never came out (damaged ones).
    if (pending_.size() > kMaxPending) pending_.pop_front();
  }

  // When the packet of a frame presented at `pts` arrived. A frame without a timestamp, or whose
  // packet is not known, gets the latest packet's arrival: its bytes were in by then.
  Clock::time_point Of(int64_t pts) {
    const auto found = std::find_if(pending_.begin(), pending_.end(),
                                    [pts](const Pending& sent) { return sent.pts == pts; });
    if (pts == AV_NOPTS_VALUE || found == pending_.end()) return latest_;
    const Clock::time_point arrived = found->arrived;
    pending_.erase(found);
    return arrived;
  }

 private:
  static constexpr size_t kMaxPending = 256;
  struct Pending {
    int64_t pts;
    Clock::time_point arrived;
  };
  std::deque<Pending> pending_;
  Clock::time_point latest_ = Clock::time_point::min();
};

// Presentation times of the decoded frames, in seconds from the first one's (see
// LiveFrame::timestamp_seconds).
class FrameClock {
 public:
  explicit FrameClock(const AVStream& stream)
      : time_base_(av_q2d(stream.time_base)),
        // As DecodeClip times a video without timestamps.
        rate_(stream.avg_frame_rate.num > 0 && stream.avg_frame_rate.den > 0 ? stream.avg_frame_rate
                                                                             : AVRational{25, 1}) {}

  double Time(int64_t pts, int64_t index) {
    double seconds = 0;
    if (index == 0) {
      by_pts_ = pts != AV_NOPTS_VALUE;
      origin_ = pts;
    } else if (!by_pts_) {
      seconds = static_cast<double>(index) * rate_.den / rate_.num;
    } else {
      seconds = pts != AV_NOPTS_VALUE ? static_cast<double>(pts - origin_) * time_base_ : 0;
      if (pts == AV_NOPTS_VALUE || seconds <= last_) {
        seconds = last_ + static_cast<double>(rate_.den) / rate_.num;
      }
    }
    last_ = seconds;
    return seconds;
  }

 private:
  const double time_base_;
  const AVRational rate_;
  bool by_pts_ = false;
  int64_t origin_ = 0;
  double last_ = 0;
};

// The decode loop over an open demuxer and decoder.
class LiveDecode {
 public:
  // `input` is null when the demuxer reads a URI: a packet then arrived when it was read.
  LiveDecode(ByteStream* input, Demuxer& demuxer, int stream_index, AVCodecContext* decoder,
             const LiveDecodeOptions& options,
             const std::function<absl::Status(const LiveFrame&)>& on_frame)
      : input_(input),
        demuxer_(demuxer),
        format_(demuxer.format()),
        stream_index_(stream_index),
        decoder_(decoder),
        options_(options),
        on_frame_(on_frame),
        clock_(*format_->streams[stream_index]),
        converter_(options.preprocess),
        pixels_(converter_.output_floats()),
        gpu_picture_device_(GpuPictureDevice(options.nvdec, options.hand_over_gpu_pictures)),
        sampler_(options.embed_stride, options.sample_fps) {
    converter_.set_rotation(ClockwiseRotation(*format_->streams[stream_index]));
  }

  absl::Status Run() {
    PacketPtr packet(av_packet_alloc());
    frame_.reset(av_frame_alloc());
    if (!packet || !frame_) return absl::ResourceExhaustedError("out of memory");
    while (true) {
      if (auto status = CancellationStatus(options_); !status.ok()) return status;
      last_read_ = av_read_frame(format_, packet.get());
      if (last_read_ < 0) {
        // The input's own failure (an abort) stops the feed; otherwise it ended, or its tail is
        // damaged past what the demuxer resynchronises on: keep what decoded.
        if (auto status = demuxer_.ReadError(); !status.ok()) return status;
        break;
      }
      demuxer_.NoteProgress();
      if (packet->stream_index != stream_index_) {
        av_packet_unref(packet.get());
        continue;
      }
      arrivals_.Sent(packet->pts, Arrival(*packet));
      const int sent = avcodec_send_packet(decoder_, packet.get());
      av_packet_unref(packet.get());
      // A damaged packet is skipped, as players do; the frames around it still count.
      if (sent < 0 && sent != AVERROR(EAGAIN) && sent != AVERROR_INVALIDDATA) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", sent);
      }
      if (auto status = Drain(); !status.ok()) return status;
    }
    avcodec_send_packet(decoder_, nullptr);  // flush the frames still held back
    if (auto status = Drain(); !status.ok()) return status;
    if (decoded_ == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no frame of the video could be decoded (", DescribeInput(*format_), ")"));
    }
    return absl::OkStatus();
  }

  int64_t decoded() const { return decoded_; }
  // Whether reading stopped at the end of an input whose size is known (a file), rather than
  // where a live source closed or broke.
  bool ReachedKnownEnd() const {
    return last_read_ == AVERROR_EOF && format_->pb != nullptr && avio_size(format_->pb) > 0;
  }

 private:
  // When the last byte of `packet` arrived. Bytes up to avio_tell have been read, so have
  // arrived; a packet's own position is older for packets read ahead while probing.
  Clock::time_point Arrival(const AVPacket& packet) const {
    if (input_ == nullptr) return Clock::now();
    const int64_t read = avio_tell(format_->pb);
    int64_t last_byte = read - 1;
    if (packet.pos >= 0) last_byte = std::min(last_byte, packet.pos + packet.size - 1);
    return input_->ArrivalOf(std::max<int64_t>(last_byte, 0));
  }

  // Takes every frame the decoder has ready, handing out those on the stride.
  absl::Status Drain() {
    while (true) {
      const int result = avcodec_receive_frame(decoder_, frame_.get());
      if (result == AVERROR(EAGAIN) || result == AVERROR_EOF) return absl::OkStatus();
      if (result < 0) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", result);
      }
      absl::Status status = HandOut(*frame_);
      av_frame_unref(frame_.get());
      if (!status.ok()) return status;
    }
  }

  absl::Status HandOut(const AVFrame& frame) {
    // A feed may change its picture size midway; the decoder caps only the pixel count.
    if (auto status = CheckFrameSize(frame.width, frame.height, options_.max_frame_side);
        !status.ok()) {
      return status;
    }
    LiveFrame live;
    FrameBuffer converted;
    live.index = decoded_++;
    live.timestamp_seconds = clock_.Time(frame.pts, live.index);
    live.arrived = arrivals_.Of(frame.pts);
    if (sampler_.Takes(live.timestamp_seconds, live.index)) {
      std::optional<FrameBuffer> picture;
      if (gpu_picture_device_ >= 0) {
        picture = FrameBuffer::GpuPicture(frame, gpu_picture_device_, converter_.quarter_turns());
      }
      if (picture) {
        converted = *std::move(picture);
      } else {
        if (auto status = converter_.Convert(frame, pixels_.data()); !status.ok()) return status;
        converted = converter_.Output(pixels_.data());
      }
      live.pixels = &converted;
    }
    return on_frame_(live);
  }

  ByteStream* const input_;
  Demuxer& demuxer_;
  AVFormatContext* const format_;
  const int stream_index_;
  AVCodecContext* const decoder_;
  const LiveDecodeOptions& options_;
  const std::function<absl::Status(const LiveFrame&)>& on_frame_;
  FramePtr frame_;
  PacketArrivals arrivals_;
  FrameClock clock_;
  FrameConverter converter_;
  std::vector<float> pixels_;
  // The GPU whose pictures are handed out as they are (hand_over_gpu_pictures); -1: none.
  const int gpu_picture_device_;
  int64_t decoded_ = 0;
  FeedSampler sampler_;
  int last_read_ = 0;
};

// Finds the video stream of an open demuxer and opens its decoder.
absl::StatusOr<std::pair<int, VideoDecoder>> OpenLiveVideo(const Demuxer& demuxer,
                                                           const LiveDecodeOptions& options) {
  AVFormatContext* format = demuxer.format();
  // Matroska's header describes its streams. Probing for a second would wait for H.264's decoder
  // to have output 7 frames (280 ms at 25 fps) to guess how far it reorders, which the decoder
  // also learns as it goes: a lone 25 fps feed's first update took 297 ms, and 95 ms without
  // (latency_ms, medians of 6 feeds each, the two servers taking turns).
  if (absl::string_view(format->iformat->name) == "matroska,webm") {
    format->max_analyze_duration = 1;
  }
  auto stream = FindVideoStream(format, options.max_frame_side);
  if (auto status = demuxer.ReadError(); !status.ok()) return status;
  if (!stream.ok()) return stream.status();
  auto decoder = OpenVideoDecoder(*format->streams[stream->index], stream->codec,
                                  options.decoder_threads, options.max_frame_side, options.nvdec);
  if (!decoder.ok()) return decoder.status();
  return std::make_pair(stream->index, *std::move(decoder));
}

}  // namespace

absl::Status ValidateLiveDecodeOptions(const LiveDecodeOptions& options) {
  if (auto status = ValidatePreprocessOptions(options.preprocess); !status.ok()) return status;
  if (options.embed_stride < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("embed_stride must be at least 1, not ", options.embed_stride));
  }
  if (options.decoder_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decoder_threads must be 0 (automatic) or more, not ", options.decoder_threads));
  }
  if (options.max_frame_side < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_frame_side must be at least 1, not ", options.max_frame_side));
  }
  if (!(options.sample_fps >= 0) || std::isinf(options.sample_fps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample_fps must be a finite number >= 0, not ", options.sample_fps));
  }
  if (options.max_fragment_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_fragment_samples must be at least 1, not ",
                                                   options.max_fragment_samples));
  }
  return absl::OkStatus();
}

absl::Status DecodeLive(ByteStream& input, const LiveDecodeOptions& options,
                        const std::function<absl::Status(const LiveFrame&)>& on_frame) {
  const ReaderCloser close_reader(input);
  if (auto status = ValidateLiveDecodeOptions(options); !status.ok()) return status;
  EnsureLibavConfigured();
  if (auto status = CancellationStatus(options); !status.ok()) return status;

  auto streamable = DemuxesAsItArrives(input, kNoDeadline);
  if (!streamable.ok()) return streamable.status();
  const std::string head = input.Peek(0, kRawHeaderBytes, kNoDeadline);
  if (auto status = input.read_error(); !status.ok()) return status;
  if (head.empty()) {
    return absl::InvalidArgumentError("empty input: the feed ended before any bytes arrived");
  }
  if (auto status = CheckRawHeaderFrameSize(head, options.max_frame_side); !status.ok()) {
    return status;
  }
  input.DropReadBytes();
  auto demuxer = Demuxer::OpenStream(input, kNoDeadline, options.max_fragment_samples);
  if (!demuxer.ok()) return demuxer.status();
  AVFormatContext* format = (*demuxer)->format();
  if (!*streamable && absl::StartsWith(format->iformat->name, "mov,")) {
    return absl::InvalidArgumentError(
        "an MP4 or MOV whose moov box follows its media data cannot be decoded as it arrives; "
        "send fragmented MP4 (ffmpeg -movflags frag_keyframe+empty_moov), MPEG-TS or Matroska");
  }
  auto video = OpenLiveVideo(**demuxer, options);
  if (!video.ok()) return video.status();
  return LiveDecode(&input, **demuxer, video->first, video->second.get(), options, on_frame).Run();
}

absl::Status DecodeLiveMemory(absl::string_view bytes, const LiveDecodeOptions& options,
                              const std::function<absl::Status(const LiveFrame&)>& on_frame) {
  if (auto status = ValidateLiveDecodeOptions(options); !status.ok()) return status;
  EnsureLibavConfigured();
  if (auto status = CancellationStatus(options); !status.ok()) return status;
  if (auto status = CheckWholeInput(bytes, options.max_frame_side, options.max_fragment_samples);
      !status.ok()) {
    return status;
  }
  auto demuxer = Demuxer::OpenMemory(bytes);
  if (!demuxer.ok()) return demuxer.status();
  auto video = OpenLiveVideo(**demuxer, options);
  if (!video.ok()) return video.status();
  return LiveDecode(nullptr, **demuxer, video->first, video->second.get(), options, on_frame).Run();
}

absl::Status DecodeLiveUri(const std::string& uri, const UriAllowlist& allowlist,
                           const LiveSourceOptions& source, const LiveDecodeOptions& options,
                           const std::function<absl::Status(const LiveFrame&)>& on_frame) {
  if (auto status = ValidateLiveDecodeOptions(options); !status.ok()) return status;
  if (source.stall_timeout <= Clock::duration::zero()) {
    return absl::InvalidArgumentError("a live source's stall timeout must be positive");
  }
  EnsureLibavConfigured();
  if (auto status = CancellationStatus(options); !status.ok()) return status;
  auto demuxer =
      Demuxer::OpenLiveUri(uri, allowlist, source.stall_timeout,
                           RawInputChecks(options.max_frame_side, options.max_fragment_samples),
                           options.cancellation, source.input_options);
  if (!demuxer.ok()) return demuxer.status();
  auto video = OpenLiveVideo(**demuxer, options);
  if (!video.ok()) return video.status();
  if (source.on_connected) {
    const AVFormatContext& format = *(*demuxer)->format();
    const AVCodecParameters& video_parameters = *format.streams[video->first]->codecpar;
    source.on_connected(absl::StrCat(format.iformat->name, ": ",
                                     avcodec_get_name(video_parameters.codec_id), " ",
                                     video_parameters.width, "x", video_parameters.height));
  }
  LiveDecode decode(nullptr, **demuxer, video->first, video->second.get(), options, on_frame);
  const absl::Status status = decode.Run();
  if (decode.ReachedKnownEnd()) return status;
  // A live source has no end of its own: however it stopped, following it again may resume it.
  if (status.ok() || (decode.decoded() == 0 && absl::IsInvalidArgument(status))) {
    return absl::UnavailableError(
        absl::StrCat("'", RedactUri(uri), "' stopped sending after ", decode.decoded(), " frames"));
  }
  return status;
}

}  // namespace vidclf::media
