#include "media/clip_decoder.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "media/conversion_worker.h"
#include "media/demuxer.h"
#include "media/fragment_guard.h"
#include "media/frame_sampler.h"

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

absl::Status CheckFrameSize(int64_t width, int64_t height, const ClipOptions& options) {
  if (width > options.max_frame_side || height > options.max_frame_side) {
    return absl::ResourceExhaustedError(absl::StrCat("video frames are ", width, "x", height,
                                                     "; the limit is ", options.max_frame_side,
                                                     " pixels on either side"));
  }
  return absl::OkStatus();
}

// Bytes enough to hold a y4m stream header or a PNM image header.
constexpr int64_t kRawHeaderBytes = 1024;

// Checks the picture size that a y4m stream header ("YUV4MPEG2 W640 H480 ...") or a PNM image
// header ("P6 640 480 255", PAM's "WIDTH 640") at the start of `head` declares. libavformat and
// the PNM decoder turn down sizes past their own bound (about 16384x16384) as invalid data
// before anyone can read the size, which would hide that a limit was hit. Other inputs pass.
absl::Status CheckRawHeaderFrameSize(absl::string_view head, const ClipOptions& options) {
  std::vector<absl::string_view> tokens;        // whitespace-separated, PNM comments left out
  size_t header_end = absl::string_view::npos;  // P1 to P6: the first tokens are the header
  if (absl::StartsWith(head, "YUV4MPEG2")) header_end = head.find('\n');
  if (absl::StartsWith(head, "P7")) header_end = head.find("ENDHDR");
  for (absl::string_view rest = head.substr(0, header_end); !rest.empty() && tokens.size() < 16;) {
    const size_t begin = rest.find_first_not_of(" \t\r\n");
    if (begin == absl::string_view::npos) break;
    if (rest[begin] == '#') {
      const size_t line_end = rest.find('\n', begin);
      rest.remove_prefix(line_end == absl::string_view::npos ? rest.size() : line_end);
      continue;
    }
    const size_t end = std::min(rest.size(), rest.find_first_of(" \t\r\n#", begin));
    tokens.push_back(rest.substr(begin, end - begin));
    rest.remove_prefix(end);
  }
  int64_t width = -1, height = -1;
  const auto number = [](absl::string_view text, int64_t* value) {
    return absl::SimpleAtoi(text, value) && *value >= 0;
  };
  if (!tokens.empty() && tokens[0] == "YUV4MPEG2") {
    for (absl::string_view token : tokens) {
      if (absl::ConsumePrefix(&token, "W")) number(token, &width);
      if (absl::ConsumePrefix(&token, "H")) number(token, &height);
    }
  } else if (!tokens.empty() && tokens[0] == "P7") {
    for (size_t i = 1; i + 1 < tokens.size(); ++i) {
      if (tokens[i] == "WIDTH") number(tokens[i + 1], &width);
      if (tokens[i] == "HEIGHT") number(tokens[i + 1], &height);
    }
  } else if (tokens.size() >= 3 && tokens[0].size() == 2 && tokens[0][0] == 'P' &&
             tokens[0][1] >= '1' && tokens[0][1] <= '6') {
    if (!number(tokens[1], &width) || !number(tokens[2], &height)) width = height = -1;
  }
  return CheckFrameSize(width, height, options);
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
  // Probing may read this much media to fill in the streams' parameters. FFmpeg's default, 5 s,
  // is 5 s of waiting before the first frame of a live feed (MPEG-TS from a camera reads all of
  // it); 1 s finds every stream of the decode matrix's containers.
  if (format->max_analyze_duration == 0) format->max_analyze_duration = AV_TIME_BASE;
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
  // What ended the listing: AVERROR_EOF at the end of input, another libav error for a damaged
  // or broken-off input, 0 when the sampling was settled first.
  int read_error = 0;
};

// When the decode budget ends; never without one.
Clock::time_point DeadlineFrom(Clock::time_point start, const ClipOptions& options) {
  return options.decode_timeout_ms > 0
             ? start + std::chrono::milliseconds(options.decode_timeout_ms)
             : Clock::time_point::max();
}

bool PastBudget(Clock::time_point deadline) { return Clock::now() >= deadline; }

// The cancellation's reason once the call is cancelled; OK otherwise.
absl::Status CancellationStatus(const ClipOptions& options) {
  if (options.cancellation == nullptr || !options.cancellation->cancelled()) {
    return absl::OkStatus();
  }
  return options.cancellation->reason();
}

// The DEADLINE_EXCEEDED error; `progress` says how far decoding got.
absl::Status BudgetExceeded(const ClipOptions& options, absl::string_view progress) {
  return absl::DeadlineExceededError(absl::StrCat(
      "decoding ran past its budget of ", options.decode_timeout_ms, " ms (", progress, ")"));
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

// The video stream's packets, kept by a single-pass source (a stream, a URI) that cannot be read
// twice.
using PacketList = std::vector<PacketPtr>;

// Whether the frames read so far settle the sampling: a strategy with a frame count that the
// frames up to `pts` (sorted) already fill. Uniform sampling needs the whole video.
bool SamplingSettled(std::vector<int64_t> pts, const AVStream& stream,
                     const SamplingOptions& sampling) {
  if (sampling.strategy == SamplingStrategy::kUniform || sampling.num_frames <= 0) return false;
  std::sort(pts.begin(), pts.end());
  FrameTable prefix;
  prefix.count = static_cast<int64_t>(pts.size());
  prefix.pts = std::move(pts);
  return static_cast<int64_t>(SampleFrameIndices(FrameTimes(prefix, stream), sampling).size()) >=
         sampling.num_frames;
}

// Lists the video stream's frames (moving its packets into `keep` when not null). Stops early,
// at the end of input or on a read error (a truncated or damaged tail: what came before stands),
// or once the sampling is settled: a live source has no end.
absl::StatusOr<FrameTable> ReadFrameTable(AVFormatContext* format, int stream_index,
                                          Clock::time_point deadline, const ClipOptions& options,
                                          PacketList* keep) {
  // Packets arrive in decode order; reading this many past the settling one lets frames that
  // present earlier (B-frames) arrive too.
  constexpr int64_t kReorderMargin = 16;
  const AVStream& stream = *format->streams[stream_index];
  FrameTable table;
  std::vector<int64_t> key_pts;
  bool all_pts = true;
  int64_t next_settle_check = std::max(options.sampling.num_frames, 1);
  int64_t stop_at = std::numeric_limits<int64_t>::max();
  int64_t kept_bytes = 0;
  while (table.count < stop_at) {
    PacketPtr packet(av_packet_alloc());
    if (!packet) return absl::ResourceExhaustedError("out of memory");
    table.read_error = av_read_frame(format, packet.get());
    if (table.read_error < 0) break;
    if (packet->stream_index == stream_index) {
      ++table.count;
      if (packet->pts == AV_NOPTS_VALUE) all_pts = false;
      if (all_pts) {
        table.pts.push_back(packet->pts);
        if (packet->flags & AV_PKT_FLAG_KEY) key_pts.push_back(packet->pts);
      }
      if (keep != nullptr) {
        kept_bytes += packet->size;
        if (kept_bytes > options.max_input_bytes) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "the video data are over ", options.max_input_bytes, " bytes, the input limit"));
        }
        keep->push_back(std::move(packet));
      }
      if (all_pts && table.count >= next_settle_check &&
          stop_at == std::numeric_limits<int64_t>::max()) {
        // Checked at geometrically spaced counts, so that the checks cost O(n log n) in all.
        next_settle_check = table.count + std::max<int64_t>(32, table.count / 4);
        if (SamplingSettled(table.pts, stream, options.sampling)) {
          stop_at = table.count + kReorderMargin;
        }
      }
      if (table.count > options.max_total_frames) {
        return absl::ResourceExhaustedError(
            absl::StrCat("video has more than ", options.max_total_frames, " frames, the limit"));
      }
    }
    if (auto status = CancellationStatus(options); !status.ok()) return status;
    if (table.count % 64 == 0 && PastBudget(deadline)) {
      return BudgetExceeded(options, absl::StrCat("listing frames: ", table.count, " so far"));
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

// Where the decode loop takes the video stream's packets from.
class PacketReader {
 public:
  virtual ~PacketReader() = default;
  // The next packet of the video stream; false at the end, or where the input is damaged.
  virtual bool Next(AVPacket* packet) = 0;
  // Moves to the keyframe presented at `pts`, or near it; false when the reader cannot.
  virtual bool SeekToKeyframe(int64_t pts) = 0;
};

// Reads a demuxer that can seek (memory input).
class DemuxerPacketReader : public PacketReader {
 public:
  DemuxerPacketReader(std::unique_ptr<Demuxer> demuxer, int stream_index)
      : demuxer_(std::move(demuxer)), format_(demuxer_->format()), stream_index_(stream_index) {}

  bool Next(AVPacket* packet) override {
    while (av_read_frame(format_, packet) >= 0) {
      if (packet->stream_index == stream_index_) return true;
      av_packet_unref(packet);
    }
    return false;
  }

  bool SeekToKeyframe(int64_t pts) override {
    return av_seek_frame(format_, stream_index_, pts, AVSEEK_FLAG_BACKWARD) >= 0;
  }

 private:
  std::unique_ptr<Demuxer> demuxer_;
  AVFormatContext* format_;
  int stream_index_;
};

// Reads the packets that a single-pass source's listing kept; seeking is exact.
class ListPacketReader : public PacketReader {
 public:
  explicit ListPacketReader(const PacketList& packets) : packets_(packets) {}

  bool Next(AVPacket* packet) override {
    return next_ < packets_.size() && av_packet_ref(packet, packets_[next_++].get()) >= 0;
  }

  bool SeekToKeyframe(int64_t pts) override {
    for (size_t i = 0; i < packets_.size(); ++i) {
      if (packets_[i]->pts == pts) {
        next_ = i;
        return true;
      }
    }
    return false;
  }

 private:
  const PacketList& packets_;
  size_t next_ = 0;
};

// Decodes the wanted frames and converts them into the clip. Frames are identified by their
// presentation timestamp when the table has them (so packets may be skipped), else by counting
// the decoder's output, which comes in presentation order.
class SampledDecode {
 public:
  SampledDecode(PacketReader& reader, const FrameTable& table, std::vector<int64_t> wanted,
                std::vector<double> times, FrameConverter& converter, DecodedClip& clip,
                const ClipOptions& options)
      : reader_(reader),
        table_(table),
        wanted_(std::move(wanted)),
        times_(std::move(times)),
        frame_floats_(converter.output_floats()),
        conversion_(converter, options.convert_while_decoding),
        sink_(options.frame_sink),
        clip_(clip) {}

  // Frames a sink's clip holds at once: one being converted, those waiting, and one more.
  static constexpr int64_t kSinkRingFrames = ConversionWorker::kMaxWaitingFrames + 2;

  // Runs the decode loop until the wanted frames are in the clip, converted. `by_timestamp`
  // enables seeking and skipping (options permitting).
  absl::Status Run(AVCodecContext* decoder, bool by_timestamp, Clock::time_point deadline,
                   const ClipOptions& options) {
    absl::Status status = Decode(decoder, by_timestamp, deadline, options);
    absl::Status converted = conversion_.Finish();
    clip_.preprocess_seconds = conversion_.converting_seconds();
    return status.ok() ? converted : status;
  }

  bool done() const { return next_wanted_ >= wanted_.size(); }

  // Time the decoding spent converting frames or waiting for their conversion.
  double conversion_waiting_seconds() const { return conversion_.waiting_seconds(); }

 private:
  absl::Status Decode(AVCodecContext* decoder, bool by_timestamp, Clock::time_point deadline,
                      const ClipOptions& options) {
    by_timestamp_ = by_timestamp;
    can_seek_ = by_timestamp && options.seek_to_keyframes;
    PacketPtr packet(av_packet_alloc());
    FramePtr frame(av_frame_alloc());
    if (!packet || !frame) return absl::ResourceExhaustedError("out of memory");
    int64_t highest_sent = -1;  // presentation index of the latest packet sent
    while (!done()) {
      if (can_seek_) SeekIfAhead(decoder, highest_sent);
      if (!reader_.Next(packet.get())) break;  // The end, or a damaged tail: keep what decoded.
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
      if (auto status = CancellationStatus(options); !status.ok()) return status;
      if (PastBudget(deadline)) {
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

  // Jumps to the keyframe before the next wanted frame when that keyframe lies past everything
  // sent so far: the frames in between would be decoded only to be thrown away. Every earlier
  // wanted frame is already in the clip, so the decoder's held-back frames can be dropped.
  void SeekIfAhead(AVCodecContext* decoder, int64_t& highest_sent) {
    const int64_t target = wanted_[next_wanted_];
    const auto after = std::upper_bound(table_.keyframes.begin(), table_.keyframes.end(), target);
    if (after == table_.keyframes.begin()) return;
    const int64_t keyframe = *std::prev(after);
    if (keyframe <= highest_sent + 1) return;
    if (!reader_.SeekToKeyframe(table_.pts[keyframe])) return;  // keep decoding through
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
    reader_.SeekToKeyframe(table_.pts.front());
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

  // Hands a wanted frame to the conversion, leaving `frame` blank.
  absl::Status Keep(AVFrame& frame, int64_t index) {
    // Frames before the next wanted one (or unknown to the table) are not needed.
    if (done() || index != wanted_[next_wanted_]) return absl::OkStatus();
    ++next_wanted_;
    const int64_t slot = clip_.num_frames++;
    if (sink_ == nullptr) {
      absl::Status status = conversion_.Submit(frame, clip_.pixels.data() + slot * frame_floats_);
      if (!status.ok()) return status;
    } else {
      // The ring slot is free again: the worker holds fewer frames than the ring.
      float* out = clip_.pixels.data() + (slot % kSinkRingFrames) * frame_floats_;
      absl::Status status = conversion_.Submit(
          frame, out,
          [sink = sink_, slot, out, time = times_[index]] { return sink->Frame(slot, out, time); });
      if (!status.ok()) return status;
    }
    clip_.frame_indices.push_back(index);
    clip_.timestamps_seconds.push_back(times_[index]);
    return absl::OkStatus();
  }

  PacketReader& reader_;
  const FrameTable& table_;
  const std::vector<int64_t> wanted_;
  const std::vector<double> times_;
  const int64_t frame_floats_;
  ConversionWorker conversion_;  // writes into clip_.pixels, which outlives it
  FrameSink* const sink_;
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

// The most samples the movie fragments of an MP4 may declare, over all tracks: 4 per frame that
// max_total_frames allows, room for an audio track (AAC at 48 kHz has 1.6 packets per frame of
// 30 fps video) and a few more.
int64_t MaxFragmentSamples(const ClipOptions& options) { return 4 * options.max_total_frames; }

// What the listing pass learnt, and the frames the sampling wants.
struct ListedVideo {
  VideoStream stream;
  FrameTable table;
  std::vector<double> times;
  std::vector<int64_t> wanted;
};

absl::StatusOr<ListedVideo> ListVideo(AVFormatContext* format, Clock::time_point deadline,
                                      const ClipOptions& options, PacketList* keep) {
  ListedVideo listed;
  auto stream = FindVideoStream(format, options);
  if (!stream.ok()) return stream.status();
  listed.stream = *stream;
  auto table = ReadFrameTable(format, stream->index, deadline, options, keep);
  if (!table.ok()) return table.status();
  listed.table = *std::move(table);
  if (listed.table.count == 0) return absl::InvalidArgumentError("the video stream has no frames");
  listed.times = FrameTimes(listed.table, *format->streams[stream->index]);
  if (options.max_duration_seconds > 0 && listed.times.back() > options.max_duration_seconds) {
    return absl::ResourceExhaustedError(absl::StrCat("video lasts ", listed.times.back(),
                                                     " s; the limit is ",
                                                     options.max_duration_seconds, " s"));
  }
  listed.wanted = SampleFrameIndices(listed.times, options.sampling);
  if (listed.wanted.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no frame matches the sampling: the video ends at ", listed.times.back(), " s"));
  }
  return listed;
}

using PacketReaderFactory = std::function<absl::StatusOr<std::unique_ptr<PacketReader>>()>;

// Decodes the wanted frames from the packets of a fresh reader. If identifying frames by
// timestamp missed any (a decoder that rewrites timestamps), decodes again by counting.
absl::StatusOr<DecodedClip> DecodeListed(const ListedVideo& listed, const AVFormatContext& format,
                                         const PacketReaderFactory& open_reader,
                                         Clock::time_point start, Clock::time_point deadline,
                                         const ClipOptions& options) {
  const AVStream& video = *format.streams[listed.stream.index];
  for (const bool by_timestamp : {!listed.table.pts.empty(), false}) {
    auto reader = open_reader();
    if (!reader.ok()) return reader.status();
    auto decoder = OpenDecoder(video, listed.stream.codec, options);
    if (!decoder.ok()) return decoder.status();

    FrameConverter converter(options.preprocess);
    converter.set_rotation(ClockwiseRotation(video));
    DecodedClip clip;
    clip.crop_size = options.preprocess.crop_size;
    clip.total_frames = listed.table.count;
    clip.source_width = video.codecpar->width;
    clip.source_height = video.codecpar->height;
    FrameSink* const sink = options.frame_sink;
    if (sink != nullptr) sink->StartPass();
    const int64_t slots =
        sink == nullptr ? static_cast<int64_t>(listed.wanted.size())
                        : std::min<int64_t>(listed.wanted.size(), SampledDecode::kSinkRingFrames);
    clip.pixels.resize(slots * converter.output_floats());
    SampledDecode decode(**reader, listed.table, listed.wanted, listed.times, converter, clip,
                         options);
    if (auto status = decode.Run(decoder->get(), by_timestamp, deadline, options); !status.ok()) {
      return status;
    }
    if (!decode.done() && by_timestamp) continue;
    if (clip.num_frames == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no frame of the video could be decoded (", DescribeInput(format), ")"));
    }
    if (sink == nullptr) {
      clip.pixels.resize(clip.num_frames * converter.output_floats());
    } else {
      clip.pixels = PixelBuffer();
    }
    clip.decode_seconds = SecondsSince(start) - decode.conversion_waiting_seconds();
    return clip;
  }
  return absl::InternalError("unreachable");
}

absl::Status CheckOptions(const ClipOptions& options) {
  if (auto status = ValidatePreprocessOptions(options.preprocess); !status.ok()) return status;
  if (auto status = ValidateSamplingOptions(options.sampling); !status.ok()) return status;
  static std::once_flag limit_allocations;
  std::call_once(limit_allocations, [] { av_max_alloc(kMaxLibavAllocationBytes); });
  return absl::OkStatus();
}

// Whether libav's error code says that a connection broke, rather than that the data is bad.
bool IsConnectionError(int error_code) {
  for (const int code : {EIO, ECONNRESET, ECONNREFUSED, ECONNABORTED, ETIMEDOUT, EPIPE, ENETUNREACH,
                         EHOSTUNREACH, ENOTCONN}) {
    if (error_code == AVERROR(code)) return true;
  }
  return false;
}

// Lists and decodes a source that can be read only once (a stream, a URI), keeping its video
// packets in memory for the decode.
absl::StatusOr<DecodedClip> DecodeSinglePass(const Demuxer& demuxer, Clock::time_point start,
                                             Clock::time_point deadline,
                                             const ClipOptions& options) {
  PacketList packets;
  auto listed = ListVideo(demuxer.format(), deadline, options, &packets);
  if (auto status = demuxer.ReadError(); !status.ok()) return status;
  if (!listed.ok()) return listed.status();
  if (IsConnectionError(listed->table.read_error)) {
    return AvError(absl::StatusCode::kUnavailable,
                   absl::StrCat("the source broke off after ", listed->table.count, " frames"),
                   listed->table.read_error);
  }
  return DecodeListed(
      *listed, *demuxer.format(),
      [&]() -> absl::StatusOr<std::unique_ptr<PacketReader>> {
        return std::make_unique<ListPacketReader>(packets);
      },
      start, deadline, options);
}

}  // namespace

absl::StatusOr<DecodedClip> DecodeClip(absl::string_view bytes, const ClipOptions& options) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty input: no video bytes were sent");
  if (static_cast<int64_t>(bytes.size()) > options.max_input_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("input is ", bytes.size(), " bytes; the limit is ", options.max_input_bytes));
  }
  if (auto status = CheckOptions(options); !status.ok()) return status;
  if (auto status = CheckRawHeaderFrameSize(bytes.substr(0, kRawHeaderBytes), options);
      !status.ok()) {
    return status;
  }
  FragmentGuard fragment_guard(MaxFragmentSamples(options));
  if (auto status = fragment_guard.Inspect(bytes); !status.ok()) return status;
  const auto start = Clock::now();
  const Clock::time_point deadline = DeadlineFrom(start, options);

  // First pass: find the video stream and list its frames, so that sampling knows the length.
  // The second pass, over a fresh demuxer, decodes and may seek.
  auto probe = Demuxer::OpenMemory(bytes);
  if (!probe.ok()) return probe.status();
  auto listed = ListVideo((*probe)->format(), deadline, options, /*keep=*/nullptr);
  if (!listed.ok()) return listed.status();
  const int stream_index = listed->stream.index;
  return DecodeListed(
      *listed, *(*probe)->format(),
      [&]() -> absl::StatusOr<std::unique_ptr<PacketReader>> {
        auto demuxer = Demuxer::OpenMemory(bytes);
        if (!demuxer.ok()) return demuxer.status();
        if (stream_index >= static_cast<int>((*demuxer)->format()->nb_streams)) {
          return absl::InvalidArgumentError(
              "the video stream vanished when the input was reopened");
        }
        return std::make_unique<DemuxerPacketReader>(*std::move(demuxer), stream_index);
      },
      start, deadline, options);
}

absl::StatusOr<DecodedClip> DecodeClipFromStream(ByteStream& input, const ClipOptions& options) {
  // Whatever happens, the producer learns that nobody reads any more, and the bytes are freed.
  struct CloseReader {
    ByteStream& input;
    ~CloseReader() { input.CloseReader(); }
  } close_reader{input};
  if (auto status = CheckOptions(options); !status.ok()) return status;
  const auto start = Clock::now();
  const Clock::time_point deadline = DeadlineFrom(start, options);

  auto streamable = DemuxesAsItArrives(input, deadline);
  if (!streamable.ok()) return streamable.status();
  if (!*streamable) {
    const absl::string_view bytes = input.WaitForEnd(deadline);
    if (auto status = input.read_error(); !status.ok()) return status;
    av_log(nullptr, AV_LOG_DEBUG,
           "vidclf: the container cannot be demuxed before its end (an MP4 whose moov box "
           "follows its media data, or a format not known to stream): buffered all %zu bytes\n",
           bytes.size());
    ClipOptions rest = options;
    if (options.decode_timeout_ms > 0) {
      rest.decode_timeout_ms = std::max<int64_t>(
          1, options.decode_timeout_ms - static_cast<int64_t>(SecondsSince(start) * 1000));
    }
    auto clip = DecodeClip(bytes, rest);
    if (clip.ok()) clip->buffered_whole_input = true;
    return clip;
  }
  const std::string head = input.Peek(0, kRawHeaderBytes, deadline);
  if (auto status = input.read_error(); !status.ok()) return status;
  if (auto status = CheckRawHeaderFrameSize(head, options); !status.ok()) return status;
  input.DropReadBytes();
  auto demuxer = Demuxer::OpenStream(input, deadline, MaxFragmentSamples(options));
  if (!demuxer.ok()) return demuxer.status();
  return DecodeSinglePass(**demuxer, start, deadline, options);
}

absl::StatusOr<DecodedClip> DecodeClipFromUri(const std::string& uri, const UriAllowlist& allowlist,
                                              const ClipOptions& options) {
  if (auto status = CheckOptions(options); !status.ok()) return status;
  const auto start = Clock::now();
  const Clock::time_point deadline = DeadlineFrom(start, options);
  UriInputChecks checks;
  checks.head_bytes = kRawHeaderBytes;
  checks.check_head = [&options](absl::string_view head) {
    return CheckRawHeaderFrameSize(head, options);
  };
  checks.max_fragment_samples = MaxFragmentSamples(options);
  auto demuxer = Demuxer::OpenUri(uri, allowlist, deadline, checks, options.cancellation);
  if (!demuxer.ok()) return demuxer.status();
  return DecodeSinglePass(**demuxer, start, deadline, options);
}

}  // namespace vidclf::media
