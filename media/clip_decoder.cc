#include "media/clip_decoder.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "media/frame_sampler.h"
#include "media/memory_demuxer.h"

extern "C" {
#include <libavutil/avutil.h>
#include <libavutil/dict.h>
}

namespace vidclf::media {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "format: mp3, streams: audio" — what the input holds, for error messages.
std::string DescribeInput(const AVFormatContext& format) {
  std::vector<std::string> streams;
  for (unsigned i = 0; i < format.nb_streams; ++i) {
    const char* type = av_get_media_type_string(format.streams[i]->codecpar->codec_type);
    streams.push_back(type ? type : "unknown");
  }
  return absl::StrCat("format: ", format.iformat->name,
                      ", streams: ", streams.empty() ? "none" : absl::StrJoin(streams, ", "));
}

absl::Status CheckFrameSize(int width, int height, const ClipOptions& options) {
  if (width > options.max_frame_side || height > options.max_frame_side) {
    return absl::ResourceExhaustedError(absl::StrCat("video frames are ", width, "x", height,
                                                     "; the limit is ", options.max_frame_side,
                                                     " pixels on either side"));
  }
  return absl::OkStatus();
}

struct VideoStream {
  int index = -1;
  const AVCodec* codec = nullptr;
};

absl::StatusOr<VideoStream> FindVideoStream(AVFormatContext* format, const ClipOptions& options) {
  // The demuxer reads dimensions from the header; refuse oversized frames before any decoder
  // allocates a picture buffer for them.
  for (unsigned i = 0; i < format->nb_streams; ++i) {
    const AVCodecParameters* par = format->streams[i]->codecpar;
    if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
      if (auto status = CheckFrameSize(par->width, par->height, options); !status.ok()) {
        return status;
      }
    }
  }
  // Stream probing decodes a few frames; cap the picture size its decoders accept.
  std::vector<AVDictionary*> probe_options(format->nb_streams, nullptr);
  const std::string max_pixels =
      std::to_string(static_cast<int64_t>(options.max_frame_side) * options.max_frame_side);
  for (auto& dict : probe_options) av_dict_set(&dict, "max_pixels", max_pixels.c_str(), 0);
  const int probed = avformat_find_stream_info(format, probe_options.data());
  for (auto& dict : probe_options) av_dict_free(&dict);
  if (probed < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "cannot read the video's streams", probed);
  }

  VideoStream stream;
  stream.index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &stream.codec, 0);
  if (stream.index == AVERROR_STREAM_NOT_FOUND) {
    return absl::InvalidArgumentError(
        absl::StrCat("no video stream in input (", DescribeInput(*format), ")"));
  }
  if (stream.index == AVERROR_DECODER_NOT_FOUND) {
    const int any = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    const char* name = avcodec_get_name(format->streams[any]->codecpar->codec_id);
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported video codec: ", name, " (", DescribeInput(*format), ")"));
  }
  if (stream.index < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "cannot select a video stream",
                   stream.index);
  }
  const AVCodecParameters* par = format->streams[stream.index]->codecpar;
  if (auto status = CheckFrameSize(par->width, par->height, options); !status.ok()) return status;
  return stream;
}

// Counts the video stream's packets: one per frame for every codec we decode, and cheap, since it
// only demuxes.
absl::StatusOr<int64_t> CountFrames(AVFormatContext* format, int stream_index) {
  PacketPtr packet(av_packet_alloc());
  if (!packet) return absl::ResourceExhaustedError("out of memory");
  int64_t count = 0;
  while (av_read_frame(format, packet.get()) >= 0) {
    if (packet->stream_index == stream_index) ++count;
    av_packet_unref(packet.get());
  }
  return count;
}

absl::StatusOr<CodecContextPtr> OpenDecoder(const AVStream& stream, const AVCodec* codec,
                                            const ClipOptions& options) {
  CodecContextPtr decoder(avcodec_alloc_context3(codec));
  if (!decoder) return absl::ResourceExhaustedError("out of memory for the decoder");
  int result = avcodec_parameters_to_context(decoder.get(), stream.codecpar);
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, "bad video stream parameters", result);
  }
  decoder->thread_count = options.decoder_threads;
  decoder->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  decoder->max_pixels = static_cast<int64_t>(options.max_frame_side) * options.max_frame_side;
  decoder->pkt_timebase = stream.time_base;
  result = avcodec_open2(decoder.get(), codec, nullptr);
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("cannot open the ", codec->name, " decoder"), result);
  }
  return decoder;
}

// Decodes frames in presentation order, converting the wanted ones into the clip.
class SampledDecode {
 public:
  SampledDecode(const AVStream& stream, std::vector<int64_t> wanted, FrameConverter& converter,
                DecodedClip& clip)
      : stream_(stream), wanted_(std::move(wanted)), converter_(converter), clip_(clip) {}

  bool done() const { return next_wanted_ >= wanted_.size(); }

  // Takes every frame the decoder has ready.
  absl::Status Drain(AVCodecContext* decoder, AVFrame* frame) {
    while (true) {
      const int result = avcodec_receive_frame(decoder, frame);
      if (result == AVERROR(EAGAIN) || result == AVERROR_EOF) return absl::OkStatus();
      if (result < 0) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", result);
      }
      absl::Status status = Keep(*frame);
      av_frame_unref(frame);
      if (!status.ok()) return status;
    }
  }

 private:
  absl::Status Keep(const AVFrame& frame) {
    const int64_t index = decoded_++;
    if (done() || index != wanted_[next_wanted_]) return absl::OkStatus();
    ++next_wanted_;
    const auto start = Clock::now();
    const int64_t slot = clip_.num_frames++;
    absl::Status status =
        converter_.Convert(frame, clip_.pixels.data() + slot * converter_.output_floats());
    clip_.preprocess_seconds += SecondsSince(start);
    if (!status.ok()) return status;
    clip_.frame_indices.push_back(index);
    clip_.timestamps_seconds.push_back(TimestampSeconds(frame, index));
    return absl::OkStatus();
  }

  double TimestampSeconds(const AVFrame& frame, int64_t index) const {
    int64_t pts = frame.best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE) {
      // No timestamp in the stream: place the frame by its index at the nominal frame rate.
      const AVRational rate =
          stream_.avg_frame_rate.num > 0 ? stream_.avg_frame_rate : AVRational{25, 1};
      return static_cast<double>(index) * rate.den / rate.num;
    }
    if (stream_.start_time != AV_NOPTS_VALUE) pts -= stream_.start_time;
    return static_cast<double>(pts) * av_q2d(stream_.time_base);
  }

  const AVStream& stream_;
  const std::vector<int64_t> wanted_;
  FrameConverter& converter_;
  DecodedClip& clip_;
  size_t next_wanted_ = 0;
  int64_t decoded_ = 0;
};

}  // namespace

absl::StatusOr<DecodedClip> DecodeClip(absl::string_view bytes, const ClipOptions& options) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty input: no video bytes were sent");
  if (static_cast<int64_t>(bytes.size()) > options.max_input_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input is ", bytes.size(), " bytes; the limit is ", options.max_input_bytes));
  }
  if (auto status = ValidatePreprocessOptions(options.preprocess); !status.ok()) return status;
  const auto start = Clock::now();

  // First pass: find the video stream and count its frames, so that sampling knows the length.
  auto probe = MemoryDemuxer::Open(bytes);
  if (!probe.ok()) return probe.status();
  auto stream = FindVideoStream((*probe)->format(), options);
  if (!stream.ok()) return stream.status();
  auto total_frames = CountFrames((*probe)->format(), stream->index);
  if (!total_frames.ok()) return total_frames.status();
  if (*total_frames == 0) return absl::InvalidArgumentError("the video stream has no frames");
  if (*total_frames > options.max_total_frames) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "video has ", *total_frames, " frames; the limit is ", options.max_total_frames));
  }

  // Second pass, over a fresh demuxer: decode from the start and keep the sampled frames.
  auto demuxer = MemoryDemuxer::Open(bytes);
  if (!demuxer.ok()) return demuxer.status();
  AVFormatContext* format = (*demuxer)->format();
  if (stream->index >= static_cast<int>(format->nb_streams)) {
    return absl::InvalidArgumentError("the video stream vanished when the input was reopened");
  }
  const AVStream& video = *(*probe)->format()->streams[stream->index];
  auto decoder = OpenDecoder(video, stream->codec, options);
  if (!decoder.ok()) return decoder.status();

  std::vector<int64_t> wanted = UniformSampleIndices(*total_frames, options.num_frames);
  FrameConverter converter(options.preprocess);
  DecodedClip clip;
  clip.crop_size = options.preprocess.crop_size;
  clip.total_frames = *total_frames;
  clip.source_width = video.codecpar->width;
  clip.source_height = video.codecpar->height;
  clip.pixels.resize(wanted.size() * converter.output_floats());
  SampledDecode decode(video, std::move(wanted), converter, clip);

  PacketPtr packet(av_packet_alloc());
  FramePtr frame(av_frame_alloc());
  if (!packet || !frame) return absl::ResourceExhaustedError("out of memory");
  while (!decode.done()) {
    const int read = av_read_frame(format, packet.get());
    if (read == AVERROR_EOF) break;
    if (read < 0) break;  // A truncated or damaged tail ends the video; keep what decoded.
    if (packet->stream_index == stream->index) {
      const int sent = avcodec_send_packet(decoder->get(), packet.get());
      // A damaged packet is skipped, as players do; the frames around it still count.
      if (sent < 0 && sent != AVERROR(EAGAIN) && sent != AVERROR_INVALIDDATA) {
        av_packet_unref(packet.get());
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", sent);
      }
      if (auto status = decode.Drain(decoder->get(), frame.get()); !status.ok()) {
        av_packet_unref(packet.get());
        return status;
      }
    }
    av_packet_unref(packet.get());
  }
  if (!decode.done()) {
    avcodec_send_packet(decoder->get(), nullptr);  // flush the frames still held back
    if (auto status = decode.Drain(decoder->get(), frame.get()); !status.ok()) return status;
  }
  if (clip.num_frames == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no frame of the video could be decoded (", DescribeInput(*format), ")"));
  }
  clip.pixels.resize(clip.num_frames * converter.output_floats());
  clip.decode_seconds = SecondsSince(start) - clip.preprocess_seconds;
  return clip;
}

}  // namespace vidclf::media
