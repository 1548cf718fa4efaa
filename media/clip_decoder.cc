#include "media/clip_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "media/frame_sampler.h"
#include "media/memory_demuxer.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/mem.h>
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

// How far to turn the picture clockwise to show it upright, from the container's display matrix
// (a phone held sideways writes one); 0 when there is none.
double ClockwiseRotation(const AVStream& stream) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 29, 100)  // FFmpeg 6.1 moved it to codecpar
  const AVPacketSideData* side =
      av_packet_side_data_get(stream.codecpar->coded_side_data, stream.codecpar->nb_coded_side_data,
                              AV_PKT_DATA_DISPLAYMATRIX);
  const uint8_t* matrix = side != nullptr && side->size >= 36 ? side->data : nullptr;
#else
  size_t size = 0;
  const uint8_t* matrix = av_stream_get_side_data(&stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (size < 36) matrix = nullptr;
#endif
  if (matrix == nullptr) return 0;
  // av_display_rotation_get gives the counter-clockwise angle the matrix applies.
  const double counter_clockwise =
      av_display_rotation_get(reinterpret_cast<const int32_t*>(matrix));
  return std::isnan(counter_clockwise) ? 0 : -counter_clockwise;
}

// Every frame of the video stream, from a demux-only pass (cheap: nothing is decoded).
struct FrameTable {
  int64_t count = 0;
  // Presentation timestamps in presentation order, in the stream's time base. Empty unless every
  // packet has a distinct one; then frames are identified by timestamp, which is what lets the
  // decoder seek and skip.
  std::vector<int64_t> pts;
  // Presentation indices of the keyframes (only with `pts`).
  std::vector<int64_t> keyframes;
};

bool PastBudget(Clock::time_point deadline, const ClipOptions& options) {
  return options.decode_timeout_ms > 0 && Clock::now() >= deadline;
}

// The DEADLINE_EXCEEDED error; `progress` says how far decoding got.
absl::Status BudgetExceeded(const ClipOptions& options, absl::string_view progress) {
  return absl::DeadlineExceededError(absl::StrCat(
      "decoding ran past its budget of ", options.decode_timeout_ms, " ms (", progress, ")"));
}

absl::StatusOr<FrameTable> ReadFrameTable(AVFormatContext* format, int stream_index,
                                          Clock::time_point deadline, const ClipOptions& options) {
  PacketPtr packet(av_packet_alloc());
  if (!packet) return absl::ResourceExhaustedError("out of memory");
  FrameTable table;
  std::vector<int64_t> key_pts;
  bool all_pts = true;
  while (av_read_frame(format, packet.get()) >= 0) {
    if (packet->stream_index == stream_index) {
      ++table.count;
      if (packet->pts == AV_NOPTS_VALUE) all_pts = false;
      if (all_pts) {
        table.pts.push_back(packet->pts);
        if (packet->flags & AV_PKT_FLAG_KEY) key_pts.push_back(packet->pts);
      }
    }
    av_packet_unref(packet.get());
    if (table.count % 64 == 0) {
      if (PastBudget(deadline, options)) {
        return BudgetExceeded(options, absl::StrCat("listing frames: ", table.count, " so far"));
      }
    }
  }
  std::sort(table.pts.begin(), table.pts.end());
  if (!all_pts || std::adjacent_find(table.pts.begin(), table.pts.end()) != table.pts.end()) {
    table.pts.clear();
    return table;
  }
  for (int64_t key : key_pts) {
    table.keyframes.push_back(std::lower_bound(table.pts.begin(), table.pts.end(), key) -
                              table.pts.begin());
  }
  std::sort(table.keyframes.begin(), table.keyframes.end());
  return table;
}

// Presentation time in seconds of every frame, from the start of the stream.
std::vector<double> FrameTimes(const FrameTable& table, const AVStream& stream) {
  std::vector<double> seconds(table.count);
  if (!table.pts.empty()) {
    const int64_t origin = stream.start_time != AV_NOPTS_VALUE ? stream.start_time : 0;
    for (int64_t i = 0; i < table.count; ++i) {
      seconds[i] = static_cast<double>(table.pts[i] - origin) * av_q2d(stream.time_base);
    }
    return seconds;
  }
  // No timestamps: place frames by index at the nominal frame rate.
  const AVRational rate = stream.avg_frame_rate.num > 0 ? stream.avg_frame_rate : AVRational{25, 1};
  for (int64_t i = 0; i < table.count; ++i) {
    seconds[i] = static_cast<double>(i) * rate.den / rate.num;
  }
  return seconds;
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

// Decodes the wanted frames and converts them into the clip. Frames are identified by their
// presentation timestamp when the table has them (so packets may be skipped), else by counting
// the decoder's output, which comes in presentation order.
class SampledDecode {
 public:
  SampledDecode(AVFormatContext* format, const AVStream& stream, const FrameTable& table,
                std::vector<int64_t> wanted, std::vector<double> times, FrameConverter& converter,
                DecodedClip& clip)
      : format_(format),
        stream_(stream),
        table_(table),
        wanted_(std::move(wanted)),
        times_(std::move(times)),
        converter_(converter),
        clip_(clip) {}

  // Runs the decode loop. `by_timestamp` enables seeking and skipping (options permitting).
  absl::Status Run(AVCodecContext* decoder, bool by_timestamp, Clock::time_point deadline,
                   const ClipOptions& options) {
    by_timestamp_ = by_timestamp;
    can_seek_ = by_timestamp && options.seek_to_keyframes;
    PacketPtr packet(av_packet_alloc());
    FramePtr frame(av_frame_alloc());
    if (!packet || !frame) return absl::ResourceExhaustedError("out of memory");
    int64_t highest_sent = -1;  // presentation index of the latest packet sent
    while (!done()) {
      if (can_seek_) SeekIfAhead(decoder, highest_sent);
      const int read = av_read_frame(format_, packet.get());
      if (read < 0) break;  // The end, or a truncated or damaged tail: keep what decoded.
      if (packet->stream_index != stream_.index) {
        av_packet_unref(packet.get());
        continue;
      }
      if (seek_target_ >= 0 && !LandedOnKeyframe(packet->pts, decoder)) {
        av_packet_unref(packet.get());
        highest_sent = -1;
        continue;
      }
      if (by_timestamp_) {
        const int64_t index = IndexOf(packet->pts);
        highest_sent = std::max(highest_sent, index);
        if (options.skip_unwanted_non_reference_frames) {
          // Read by the decoder for this packet (frame threads copy it at submission).
          decoder->skip_frame = IsWanted(index) ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
        }
      }
      const int sent = avcodec_send_packet(decoder, packet.get());
      av_packet_unref(packet.get());
      // A damaged packet is skipped, as players do; the frames around it still count.
      if (sent < 0 && sent != AVERROR(EAGAIN) && sent != AVERROR_INVALIDDATA) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", sent);
      }
      if (auto status = Drain(decoder, frame.get()); !status.ok()) return status;
      if (PastBudget(deadline, options)) {
        return BudgetExceeded(
            options, absl::StrCat(clip_.frames_decoded, " of ", table_.count, " frames decoded"));
      }
    }
    if (!done()) {
      avcodec_send_packet(decoder, nullptr);  // flush the frames still held back
      if (auto status = Drain(decoder, frame.get()); !status.ok()) return status;
    }
    return absl::OkStatus();
  }

  bool done() const { return next_wanted_ >= wanted_.size(); }

 private:
  // Jumps to the keyframe before the next wanted frame when that keyframe lies past everything
  // sent so far: the frames in between would be decoded only to be thrown away. Every earlier
  // wanted frame is already in the clip, so the decoder's held-back frames can be dropped.
  void SeekIfAhead(AVCodecContext* decoder, int64_t& highest_sent) {
    const int64_t target = wanted_[next_wanted_];
    const auto after = std::upper_bound(table_.keyframes.begin(), table_.keyframes.end(), target);
    if (after == table_.keyframes.begin()) return;
    const int64_t keyframe = *std::prev(after);
    if (keyframe <= highest_sent + 1) return;
    if (av_seek_frame(format_, stream_.index, table_.pts[keyframe], AVSEEK_FLAG_BACKWARD) < 0) {
      return;  // keep decoding through
    }
    avcodec_flush_buffers(decoder);
    highest_sent = keyframe - 1;
    seek_target_ = keyframe;
    ++clip_.seeks;
  }

  // Checks the first packet after a seek. Demuxers without an index (MPEG-TS, and Matroska
  // before its cues are read) search by timestamp and may land past the keyframe; decoding from
  // there would produce damaged frames. Then go back to the start and decode through instead.
  bool LandedOnKeyframe(int64_t pts, AVCodecContext* decoder) {
    const int64_t target = seek_target_;
    seek_target_ = -1;
    const int64_t index = IndexOf(pts);
    if (index >= 0 && index <= target &&
        std::binary_search(table_.keyframes.begin(), table_.keyframes.end(), index)) {
      return true;
    }
    can_seek_ = false;
    av_seek_frame(format_, stream_.index, table_.pts.front(), AVSEEK_FLAG_BACKWARD);
    avcodec_flush_buffers(decoder);
    return false;
  }

  int64_t IndexOf(int64_t pts) const {
    const auto found = std::lower_bound(table_.pts.begin(), table_.pts.end(), pts);
    if (found == table_.pts.end() || *found != pts) return -1;
    return found - table_.pts.begin();
  }

  bool IsWanted(int64_t index) const {
    return index >= 0 && std::binary_search(wanted_.begin() + next_wanted_, wanted_.end(), index);
  }

  // Takes every frame the decoder has ready.
  absl::Status Drain(AVCodecContext* decoder, AVFrame* frame) {
    while (true) {
      const int result = avcodec_receive_frame(decoder, frame);
      if (result == AVERROR(EAGAIN) || result == AVERROR_EOF) return absl::OkStatus();
      if (result < 0) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", result);
      }
      ++clip_.frames_decoded;
      const int64_t index = by_timestamp_ ? IndexOf(frame->best_effort_timestamp) : decoded_++;
      absl::Status status = Keep(*frame, index);
      av_frame_unref(frame);
      if (!status.ok()) return status;
    }
  }

  absl::Status Keep(const AVFrame& frame, int64_t index) {
    // Frames before the next wanted one (or unknown to the table) are not needed.
    if (done() || index != wanted_[next_wanted_]) return absl::OkStatus();
    ++next_wanted_;
    const auto start = Clock::now();
    const int64_t slot = clip_.num_frames++;
    absl::Status status =
        converter_.Convert(frame, clip_.pixels.data() + slot * converter_.output_floats());
    clip_.preprocess_seconds += SecondsSince(start);
    if (!status.ok()) return status;
    clip_.frame_indices.push_back(index);
    clip_.timestamps_seconds.push_back(times_[index]);
    return absl::OkStatus();
  }

  AVFormatContext* format_;
  const AVStream& stream_;
  const FrameTable& table_;
  const std::vector<int64_t> wanted_;
  const std::vector<double> times_;
  FrameConverter& converter_;
  DecodedClip& clip_;
  bool by_timestamp_ = false;
  bool can_seek_ = false;
  int64_t seek_target_ = -1;  // keyframe sought, until the first packet after the seek
  size_t next_wanted_ = 0;
  int64_t decoded_ = 0;
};

// libav's allocations are refused above this size, process-wide. A few bytes of a crafted
// container can declare millions of samples (an MP4 trun box), for which the demuxer would
// allocate gigabytes of index; the largest legitimate buffer, one plane of an 8192x8192 16-bit
// frame, is 128 MiB.
constexpr size_t kMaxLibavAllocationBytes = size_t{256} << 20;

}  // namespace

absl::StatusOr<DecodedClip> DecodeClip(absl::string_view bytes, const ClipOptions& options) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty input: no video bytes were sent");
  if (static_cast<int64_t>(bytes.size()) > options.max_input_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input is ", bytes.size(), " bytes; the limit is ", options.max_input_bytes));
  }
  if (auto status = ValidatePreprocessOptions(options.preprocess); !status.ok()) return status;
  if (auto status = ValidateSamplingOptions(options.sampling); !status.ok()) return status;
  static std::once_flag limit_allocations;
  std::call_once(limit_allocations, [] { av_max_alloc(kMaxLibavAllocationBytes); });
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options.decode_timeout_ms);

  // First pass: find the video stream and list its frames, so that sampling knows the length.
  auto probe = MemoryDemuxer::Open(bytes);
  if (!probe.ok()) return probe.status();
  auto stream = FindVideoStream((*probe)->format(), options);
  if (!stream.ok()) return stream.status();
  const AVStream& video = *(*probe)->format()->streams[stream->index];
  auto table = ReadFrameTable((*probe)->format(), stream->index, deadline, options);
  if (!table.ok()) return table.status();
  if (table->count == 0) return absl::InvalidArgumentError("the video stream has no frames");
  if (table->count > options.max_total_frames) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "video has ", table->count, " frames; the limit is ", options.max_total_frames));
  }
  std::vector<double> times = FrameTimes(*table, video);
  if (options.max_duration_seconds > 0 && times.back() > options.max_duration_seconds) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "video lasts ", times.back(), " s; the limit is ", options.max_duration_seconds, " s"));
  }
  const std::vector<int64_t> wanted = SampleFrameIndices(times, options.sampling);
  if (wanted.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no frame matches the sampling: the video ends at ", times.back(), " s"));
  }

  // Second pass, over a fresh demuxer: decode and keep the sampled frames. If identifying frames
  // by timestamp missed any (a decoder that rewrites timestamps), decode again by counting.
  for (const bool by_timestamp : {!table->pts.empty(), false}) {
    auto demuxer = MemoryDemuxer::Open(bytes);
    if (!demuxer.ok()) return demuxer.status();
    AVFormatContext* format = (*demuxer)->format();
    if (stream->index >= static_cast<int>(format->nb_streams)) {
      return absl::InvalidArgumentError("the video stream vanished when the input was reopened");
    }
    auto decoder = OpenDecoder(video, stream->codec, options);
    if (!decoder.ok()) return decoder.status();

    FrameConverter converter(options.preprocess);
    converter.set_rotation(ClockwiseRotation(video));
    DecodedClip clip;
    clip.crop_size = options.preprocess.crop_size;
    clip.total_frames = table->count;
    clip.source_width = video.codecpar->width;
    clip.source_height = video.codecpar->height;
    clip.pixels.resize(wanted.size() * converter.output_floats());
    SampledDecode decode(format, *format->streams[stream->index], *table, wanted, times, converter,
                         clip);
    if (auto status = decode.Run(decoder->get(), by_timestamp, deadline, options); !status.ok()) {
      return status;
    }
    if (!decode.done() && by_timestamp) continue;
    if (clip.num_frames == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no frame of the video could be decoded (", DescribeInput(*format), ")"));
    }
    clip.pixels.resize(clip.num_frames * converter.output_floats());
    clip.decode_seconds = SecondsSince(start) - clip.preprocess_seconds;
    return clip;
  }
  return absl::InternalError("unreachable");
}

}  // namespace vidclf::media
