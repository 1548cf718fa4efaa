#include "media/sampled_decode.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cancellation.h"
#include "media/conversion_worker.h"
#include "media/decode_split.h"
#include "media/decoder_feed.h"
#include "media/decoder_pool.h"
#include "media/frame_converter.h"
#include "media/video_stream.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
}

namespace vidclf::media {
namespace {

using Clock = DecodeClock;

// Two decoders run side by side only when the larger share of the work is at most this: above
// it, the larger share runs on half the threads for little gain.
constexpr double kMaxLargerShare = 0.75;
// Nor for frames larger than 4K UHD: each decoder holds its own reference frames.
constexpr int64_t kMaxSplitFramePixels = 3840 * 2160;
// A seek that sets the GPU decoder up anew (DecoderFeed::RunEndSetsUpAnew) took 0.2-0.3 s on an
// H200, about what NVDEC takes to decode 300 frames of 720p (docs/gpu-serving-benchmark.md): such
// a decoder seeks only past at least that many frames.
constexpr int64_t kNvdecH264FramesPerSeek = 300;

// Another decoder decoding the same pass beside this one.
struct Partner {
  // Set when the other failed: this one's work is then wasted.
  const CancellationToken* other_failed = nullptr;
  // This one starts at a later keyframe (SampledDecode::Prime).
  bool prime_first = false;
};

// Decodes the wanted frames and converts them into the clip. Frames are identified by their
// presentation timestamp when the table has them (so packets may be skipped), else by counting
// the decoder's output, which comes in presentation order.
class SampledDecode {
 public:
  SampledDecode(PacketReader& reader, const FrameTable& table, std::vector<int64_t> wanted,
                std::vector<double> times, FrameConverter& converter, float* frames,
                DecodedClip& clip, const ClipOptions& options, const Partner& partner)
      : reader_(reader),
        table_(table),
        wanted_(std::move(wanted)),
        times_(std::move(times)),
        converter_(converter),
        frame_floats_(converter.output_floats()),
        frames_(frames),
        conversion_(converter, options.convert_while_decoding),
        sink_(options.frame_sink),
        gpu_picture_device_(GpuPictureDevice(
            options.nvdec, options.frame_sink != nullptr && options.hand_over_gpu_pictures)),
        partner_(partner),
        clip_(clip) {}

  // Frames a sink's clip holds at once: one being converted, those waiting, and one more.
  static constexpr int64_t kSinkRingFrames = ConversionWorker::kMaxWaitingFrames + 2;

  // Runs the decode loop until the wanted frames are in the clip, converted. `by_timestamp`
  // enables seeking and skipping (options permitting). A decoder kept set up ends with its last
  // run ended, ready for another stream.
  absl::Status Run(VideoDecoder& decoder, const AVStream& video, bool by_timestamp,
                   Clock::time_point deadline, const ClipOptions& options) {
    DecoderFeed feed(decoder, video);
    absl::Status status = Decode(feed, decoder.get(), by_timestamp, deadline, options);
    if (status.ok() && decoder.keep_set_up) {
      status = EndRun(feed, decoder.get(), DecoderFeed::HeldFrames::kDropped);
    }
    absl::Status converted = conversion_.Finish();
    clip_.preprocess_seconds = conversion_.converting_seconds();
    return status.ok() ? converted : status;
  }

  bool done() const { return next_wanted_ >= wanted_.size(); }

  // Time the decoding spent converting frames or waiting for their conversion.
  double conversion_waiting_seconds() const { return conversion_.waiting_seconds(); }

 private:
  absl::Status Decode(DecoderFeed& feed, AVCodecContext* decoder, bool by_timestamp,
                      Clock::time_point deadline, const ClipOptions& options) {
    by_timestamp_ = by_timestamp;
    can_seek_ = by_timestamp && options.seek_to_keyframes;
    if (feed.RunEndSetsUpAnew()) min_frames_skipped_ = kNvdecH264FramesPerSeek;
    PacketPtr packet(av_packet_alloc());
    frame_.reset(av_frame_alloc());
    if (!packet || !frame_) return absl::ResourceExhaustedError("out of memory");
    int64_t highest_sent = -1;  // presentation index of the latest packet sent
    if (partner_.prime_first) Prime(decoder, packet.get(), frame_.get());
    while (!done()) {
      if (can_seek_ && SeekToKeyframeBefore(wanted_[next_wanted_], highest_sent)) {
        // Every earlier wanted frame is in the clip: the frames the decoder holds are not wanted.
        auto status = EndRun(feed, decoder, DecoderFeed::HeldFrames::kDropped);
        if (!status.ok()) return status;
      }
      if (!reader_.Next(packet.get())) break;  // The end, or a damaged tail: keep what decoded.
      if (seek_target_ >= 0 && !LandedOnKeyframe(packet->pts)) {
        av_packet_unref(packet.get());
        highest_sent = -1;
        auto status = EndRun(feed, decoder, DecoderFeed::HeldFrames::kDropped);
        if (!status.ok()) return status;
        continue;
      }
      int64_t index = -1;
      if (by_timestamp_) {
        index = IndexOf(packet->pts);
        highest_sent = std::max(highest_sent, index);
        if (options.skip_unwanted_non_reference_frames) {
          // Read by the decoder for this packet (frame threads copy it at submission).
          decoder->skip_frame = IsWanted(index) ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
        }
      }
      const int sent = feed.Send(packet.get());
      av_packet_unref(packet.get());
      // A damaged packet is skipped, as players do; the frames around it still count.
      if (sent < 0 && sent != AVERROR(EAGAIN) && sent != AVERROR_INVALIDDATA) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", sent);
      }
      if (auto status = Drain(decoder); !status.ok()) return status;
      if (can_seek_ && !done() && index == wanted_[next_wanted_] && JumpAfterWanted(highest_sent)) {
        auto status = EndRun(feed, decoder, DecoderFeed::HeldFrames::kWanted);
        if (!status.ok()) return status;
      }
      if (auto status = CancellationStatus(options); !status.ok()) return status;
      if (partner_.other_failed != nullptr && partner_.other_failed->cancelled()) {
        return partner_.other_failed->reason();
      }
      if (PastBudget(deadline)) {
        return BudgetExceeded(
            options, absl::StrCat(clip_.frames_decoded, " of ", table_.count, " frames decoded"));
      }
    }
    if (!done()) return EndRun(feed, decoder, DecoderFeed::HeldFrames::kWanted);
    return absl::OkStatus();
  }

  absl::Status EndRun(DecoderFeed& feed, AVCodecContext* decoder, DecoderFeed::HeldFrames held) {
    return feed.EndRun(held, [this, decoder] { return Drain(decoder); });
  }

  // Decodes the stream's first packet and drops what it gave. Decoders learn from the first frame
  // what later frames do not repeat, and a flush keeps it: libavcodec's H.264 decoder reads the
  // x264 version from the first frame's SEI and works around a 4:4:4 bug of versions before 151
  // by it. A decoder that starts at a later keyframe must know what one that decoded from the
  // start and sought there knows.
  void Prime(AVCodecContext* decoder, AVPacket* packet, AVFrame* frame) {
    if (!reader_.Next(packet)) return;
    avcodec_send_packet(decoder, packet);
    av_packet_unref(packet);
    avcodec_send_packet(decoder, nullptr);
    while (avcodec_receive_frame(decoder, frame) >= 0) av_frame_unref(frame);
    avcodec_flush_buffers(decoder);
    reader_.SeekToKeyframe(table_.pts.front());
  }

  // Called once the packet of the next wanted frame is sent. A decoder holds frames back (for
  // reordering, and one per frame thread) until later packets push them out; when no later packet
  // is needed, because this frame is the last wanted or the next lies past a keyframe ahead, the
  // reader jumps there now and the decoder's run ends, so that it hands the frame out without
  // decoding the packets after it. True when the caller must end the run.
  bool JumpAfterWanted(int64_t& highest_sent) {
    return next_wanted_ + 1 >= wanted_.size() ||
           SeekToKeyframeBefore(wanted_[next_wanted_ + 1], highest_sent);
  }

  // Moves the reader to the keyframe before frame `target` when that keyframe lies at least
  // min_frames_skipped_ frames past everything sent so far and the reader can seek there; true
  // when it did. The caller deals with the decoder.
  bool SeekToKeyframeBefore(int64_t target, int64_t& highest_sent) {
    const auto after = std::upper_bound(table_.keyframes.begin(), table_.keyframes.end(), target);
    if (after == table_.keyframes.begin()) return false;
    const int64_t keyframe = *std::prev(after);
    if (keyframe - (highest_sent + 1) < min_frames_skipped_) return false;
    if (!reader_.SeekToKeyframe(table_.pts[keyframe])) return false;  // keep decoding through
    highest_sent = keyframe - 1;
    seek_target_ = keyframe;
    ++clip_.seeks;
    return true;
  }

  // Checks the first packet after a seek. Demuxers without an index (MPEG-TS, and Matroska
  // before its cues are read) search by timestamp and may land past the keyframe; decoding from
  // there would produce damaged frames. Then go back to the start and decode through instead
  // (the caller ends the decoder's run).
  bool LandedOnKeyframe(int64_t pts) {
    const int64_t target = seek_target_;
    seek_target_ = -1;
    const int64_t index = IndexOf(pts);
    if (index >= 0 && index <= target &&
        std::binary_search(table_.keyframes.begin(), table_.keyframes.end(), index)) {
      return true;
    }
    can_seek_ = false;
    reader_.SeekToKeyframe(table_.pts.front());
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
  absl::Status Drain(AVCodecContext* decoder) {
    AVFrame* frame = frame_.get();
    while (true) {
      const int result = avcodec_receive_frame(decoder, frame);
      if (result == AVERROR(EAGAIN) || result == AVERROR_EOF) return absl::OkStatus();
      if (result < 0) {
        return AvError(absl::StatusCode::kInvalidArgument, "video decoding failed", result);
      }
      if (DecoderFeed::IsFiller(*frame)) {
        av_frame_unref(frame);
        continue;
      }
      ++clip_.frames_decoded;
      if (frame->hw_frames_ctx != nullptr) ++clip_.frames_decoded_on_gpu;
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
      absl::Status status = conversion_.Submit(frame, frames_ + slot * frame_floats_);
      if (!status.ok()) return status;
    } else {
      std::optional<FrameBuffer> picture;
      if (gpu_picture_device_ >= 0) {
        picture = FrameBuffer::GpuPicture(frame, gpu_picture_device_, converter_.quarter_turns());
      }
      // The ring slot is free again: the worker holds fewer frames than the ring.
      float* out = picture ? nullptr : frames_ + (slot % kSinkRingFrames) * frame_floats_;
      absl::Status status = conversion_.Submit(
          frame, out,
          [sink = sink_, slot, pixels = picture ? *std::move(picture) : converter_.Output(out),
           time = times_[index]] { return sink->Frame(slot, pixels, time); });
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
  const FrameConverter& converter_;  // its Output only: Convert runs on conversion_'s thread
  const int64_t frame_floats_;
  // Where frame `slot` goes, or with a sink, a ring of kSinkRingFrames frames. Outlives
  // conversion_.
  float* const frames_;
  ConversionWorker conversion_;
  FrameSink* const sink_;
  // The GPU whose pictures go to the sink as they are (ClipOptions::hand_over_gpu_pictures); -1:
  // every frame is converted on the host.
  const int gpu_picture_device_;
  const Partner partner_;
  DecodedClip& clip_;
  bool by_timestamp_ = false;
  bool can_seek_ = false;
  int64_t min_frames_skipped_ = 1;  // by a seek
  int64_t seek_target_ = -1;        // keyframe sought, until the first packet after the seek
  size_t next_wanted_ = 0;
  int64_t decoded_ = 0;
  FramePtr frame_;  // the decoder's output, taken by Drain
};

// Whether a decoder for `codec` comes from options.decoder_pool. Not where a GPU decodes and has
// no decoder for the codec: the CPU then decodes with the threads asked for.
bool TakesFromPool(const ClipOptions& options, const AVCodec& codec) {
  return options.decoder_pool != nullptr &&
         (options.nvdec == nullptr || NvdecDevice::CanDecode(codec));
}

// What one decoder produced: its frames, and how long its decoding waited for their conversion.
struct DecoderRun {
  DecodedClip clip;
  bool done = false;  // every frame it was given is in the clip
  double conversion_waiting_seconds = 0;
  Clock::time_point finished;
};

// Decodes `wanted` (some of listed.wanted) with a decoder of its own, reading from `reader`.
// Without a sink, frame k goes to frames_out + k frames when frames_out is set (the clip's pixels
// then stay empty), else to the clip's own pixels.
absl::StatusOr<DecoderRun> RunDecoder(const ListedVideo& listed, const AVStream& video,
                                      PacketReader& reader, std::vector<int64_t> wanted,
                                      bool by_timestamp, Clock::time_point deadline,
                                      const ClipOptions& options, const Partner& partner,
                                      float* frames_out) {
  auto decoder = TakesFromPool(options, *listed.stream.codec)
                     ? options.decoder_pool->Take(video, listed.stream.codec,
                                                  options.max_frame_side, options.nvdec)
                     : OpenVideoDecoder(video, listed.stream.codec, options.decoder_threads,
                                        options.max_frame_side, options.nvdec);
  if (!decoder.ok()) return decoder.status();
  // Frame threads copy it into their contexts with each packet.
  decoder->get()->skip_loop_filter =
      options.sampling.skip_loop_filter ? AVDISCARD_ALL : AVDISCARD_DEFAULT;

  FrameConverter converter(options.preprocess);
  converter.set_rotation(ClockwiseRotation(video));
  DecoderRun run;
  DecodedClip& clip = run.clip;
  clip.crop_size = options.preprocess.crop_size;
  clip.total_frames = listed.table.count;
  clip.source_width = video.codecpar->width;
  clip.source_height = video.codecpar->height;
  const bool to_sink = options.frame_sink != nullptr;
  const bool own_pixels = to_sink || frames_out == nullptr;
  if (own_pixels) {
    const int64_t slots = to_sink ? std::min<int64_t>(wanted.size(), SampledDecode::kSinkRingFrames)
                                  : static_cast<int64_t>(wanted.size());
    clip.pixels.resize(slots * converter.output_floats());
  }
  SampledDecode decode(reader, listed.table, std::move(wanted), listed.times, converter,
                       own_pixels ? clip.pixels.data() : frames_out, clip, options, partner);
  if (auto status = decode.Run(*decoder, video, by_timestamp, deadline, options); !status.ok()) {
    return status;
  }
  if (clip.frames_decoded_on_gpu > 0) {
    clip.decoded_on = options.nvdec->name();
  } else if (options.nvdec != nullptr) {
    clip.gpu_fallback = decoder->nvdec.active() ? kFormatFallback : decoder->nvdec.cpu_reason();
  }
  // Kept only where it decoded as asked: on the GPU, or on the CPU where no GPU was asked for. One
  // on the CPU for want of a session or for the stream's format would not be taken again.
  const bool as_asked =
      decoder->nvdec.active() ? clip.frames_decoded_on_gpu > 0 : options.nvdec == nullptr;
  if (decoder->keep_set_up && as_asked) {
    options.decoder_pool->Give(*std::move(decoder));
  }
  run.done = decode.done();
  run.conversion_waiting_seconds = decode.conversion_waiting_seconds();
  run.finished = Clock::now();
  if (to_sink) {
    clip.pixels = PixelBuffer();
  } else if (own_pixels) {
    clip.pixels.resize(clip.num_frames * converter.output_floats());
  }
  return run;
}

// Hands the frames of two decoders running side by side to one sink, one call at a time, each
// decoder's slots counted on from `first_slot`.
class SharedSink : public FrameSink {
 public:
  SharedSink(FrameSink& sink, std::mutex& mutex, int64_t first_slot)
      : sink_(sink), mutex_(mutex), first_slot_(first_slot) {}
  absl::Status Frame(int64_t slot, const FrameBuffer& frame, double timestamp_seconds) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return sink_.Frame(first_slot_ + slot, frame, timestamp_seconds);
  }

 private:
  FrameSink& sink_;
  std::mutex& mutex_;
  const int64_t first_slot_;
};

// Decodes listed.wanted[0, split) from `first_reader` and listed.wanted[split, end) from
// `second_reader`, with two decoders side by side, each with half the threads, and joins their
// clips. When one fails, the other stops at its next packet. Without a thread for the second,
// decodes all with one.
absl::StatusOr<DecoderRun> RunSideBySide(const ListedVideo& listed, const AVStream& video,
                                         PacketReader& first_reader, PacketReader& second_reader,
                                         size_t split, Clock::time_point deadline,
                                         const ClipOptions& options) {
  const auto middle = listed.wanted.begin() + static_cast<std::ptrdiff_t>(split);
  ClipOptions first_options = options;
  first_options.decoder_threads = std::max(1, options.decoder_threads / 2);
  ClipOptions second_options = first_options;
  std::mutex sink_mutex;
  std::optional<SharedSink> first_sink;
  std::optional<SharedSink> second_sink;
  // Without a sink both write into one clip, so that no copy joins them.
  PixelBuffer pixels;
  const int64_t frame_floats = FrameConverter(options.preprocess).output_floats();
  if (options.frame_sink != nullptr) {
    first_options.frame_sink = &first_sink.emplace(*options.frame_sink, sink_mutex, 0);
    second_options.frame_sink =
        &second_sink.emplace(*options.frame_sink, sink_mutex, static_cast<int64_t>(split));
  } else {
    pixels.resize(listed.wanted.size() * frame_floats);
  }
  CancellationToken first_failed;
  CancellationToken second_failed;
  absl::StatusOr<DecoderRun> second = absl::InternalError("the second decoder did not run");
  const auto decode_second = [&] {
    try {
      second = RunDecoder(listed, video, second_reader,
                          std::vector<int64_t>(middle, listed.wanted.end()),
                          /*by_timestamp=*/true, deadline, second_options,
                          Partner{&first_failed, /*prime_first=*/true},
                          pixels.empty() ? nullptr : pixels.data() + split * frame_floats);
    } catch (const std::exception& e) {
      second = absl::ResourceExhaustedError(absl::StrCat("decoding failed: ", e.what()));
    }
    if (!second.ok()) second_failed.Cancel(second.status());
  };
  std::thread second_thread;
  try {
    second_thread = std::thread(decode_second);
  } catch (const std::system_error&) {
    return RunDecoder(listed, video, first_reader, listed.wanted, /*by_timestamp=*/true, deadline,
                      options, Partner{}, /*frames_out=*/nullptr);
  }
  absl::StatusOr<DecoderRun> first = absl::InternalError("the first decoder did not run");
  try {
    first = RunDecoder(listed, video, first_reader,
                       std::vector<int64_t>(listed.wanted.begin(), middle), /*by_timestamp=*/true,
                       deadline, first_options, Partner{&second_failed, /*prime_first=*/false},
                       pixels.empty() ? nullptr : pixels.data());
  } catch (const std::exception& e) {
    first = absl::ResourceExhaustedError(absl::StrCat("decoding failed: ", e.what()));
  }
  if (!first.ok()) first_failed.Cancel(first.status());
  second_thread.join();
  // A decoder stopped by the other's failure returns that failure.
  if (!first.ok()) return first.status();
  if (!second.ok()) return second.status();

  DecodedClip& clip = first->clip;
  const DecodedClip& rest = second->clip;
  clip.num_frames += rest.num_frames;
  if (options.frame_sink == nullptr) {
    pixels.resize(clip.num_frames * frame_floats);
    clip.pixels = std::move(pixels);
  }
  clip.frame_indices.insert(clip.frame_indices.end(), rest.frame_indices.begin(),
                            rest.frame_indices.end());
  clip.timestamps_seconds.insert(clip.timestamps_seconds.end(), rest.timestamps_seconds.begin(),
                                 rest.timestamps_seconds.end());
  clip.frames_decoded += rest.frames_decoded;
  clip.frames_decoded_on_gpu += rest.frames_decoded_on_gpu;
  if (rest.frames_decoded_on_gpu > 0) {
    clip.decoded_on = rest.decoded_on;
    clip.gpu_fallback.clear();
  }
  clip.seeks += rest.seeks;
  // The conversions overlap as the decoders do: the longer stands for both.
  clip.preprocess_seconds = std::max(clip.preprocess_seconds, rest.preprocess_seconds);
  clip.decoders = 2;
  first->done = first->done && second->done;
  // The pass ends with the decoder that finished last; what it waited for is what to leave out.
  if (second->finished > first->finished) {
    first->conversion_waiting_seconds = second->conversion_waiting_seconds;
  }
  return first;
}

// Where the pass splits between two decoders (ClipOptions::split_at_keyframes); 0: it does not.
// Not on NVDEC, where each decoder costs a GPU decoder's setting up, nor with a pool's decoders.
size_t SplitPoint(const ListedVideo& listed, const AVStream& video, bool by_timestamp,
                  const ClipOptions& options) {
  if (!by_timestamp || !options.seek_to_keyframes || !options.split_at_keyframes ||
      options.decoder_threads < 2 || TakesFromPool(options, *listed.stream.codec) ||
      (options.nvdec != nullptr && NvdecDevice::CanDecode(*listed.stream.codec)) ||
      static_cast<int64_t>(video.codecpar->width) * video.codecpar->height > kMaxSplitFramePixels) {
    return 0;
  }
  return SplitAtKeyframe(listed.table.keyframes, listed.wanted, kMaxLargerShare);
}

}  // namespace

absl::StatusOr<DecodedClip> DecodeListed(const ListedVideo& listed, const AVFormatContext& format,
                                         const PacketReaderFactory& open_reader,
                                         Clock::time_point start, Clock::time_point deadline,
                                         const ClipOptions& options) {
  const AVStream& video = *format.streams[listed.stream.index];
  const bool cpu_faster = options.nvdec != nullptr && options.cpu_when_faster &&
                          NvdecDevice::CpuDecodesFasterAlone(*video.codecpar);
  if (cpu_faster) {
    ClipOptions on_cpu = options;
    on_cpu.nvdec = nullptr;
    on_cpu.decoder_pool = nullptr;  // its decoders are NVDEC's, or one thread each
    on_cpu.cpu_when_faster = false;
    absl::StatusOr<DecodedClip> clip =
        DecodeListed(listed, format, open_reader, start, deadline, on_cpu);
    if (clip.ok()) clip->gpu_fallback = kCpuFasterChoice;
    return clip;
  }
  for (const bool by_timestamp : {!listed.table.pts.empty(), false}) {
    if (options.frame_sink != nullptr) {
      options.frame_sink->StartPass(static_cast<int64_t>(listed.wanted.size()));
    }
    auto reader = open_reader();
    if (!reader.ok()) return reader.status();
    const size_t split =
        (*reader)->SeeksExactly() ? SplitPoint(listed, video, by_timestamp, options) : 0;
    // A second reader that will not open costs the split only.
    absl::StatusOr<std::unique_ptr<PacketReader>> second_reader = std::unique_ptr<PacketReader>();
    if (split > 0) second_reader = open_reader();
    absl::StatusOr<DecoderRun> run =
        split > 0 && second_reader.ok()
            ? RunSideBySide(listed, video, **reader, **second_reader, split, deadline, options)
            : RunDecoder(listed, video, **reader, listed.wanted, by_timestamp, deadline, options,
                         Partner{}, /*frames_out=*/nullptr);
    if (!run.ok()) return run.status();
    if (!run->done && by_timestamp) continue;
    DecodedClip& clip = run->clip;
    if (clip.num_frames == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("no frame of the video could be decoded (", DescribeInput(format), ")"));
    }
    clip.decode_seconds = SecondsSince(start) - run->conversion_waiting_seconds;
    return std::move(clip);
  }
  return absl::InternalError("unreachable");
}

}  // namespace vidclf::media
