#include "media/video_encoder.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "media/av_util.h"

extern "C" {
#include <libavutil/opt.h>
}

namespace vidclf::media {

#if LIBAVFORMAT_VERSION_MAJOR < 61
using AvioWriteData = uint8_t*;  // FFmpeg before 7.0 declares the write buffer non-const
#else
using AvioWriteData = const uint8_t*;
#endif

// (These two are outside the anonymous namespace: VideoWriter::State holds them.)
// A growable, seekable in-memory output for the muxer (MP4 seeks back to write its index).
struct MemoryOutput {
  std::string bytes;
  int64_t position = 0;

  static int Write(void* opaque, AvioWriteData data, int size) {
    auto* self = static_cast<MemoryOutput*>(opaque);
    const auto end = static_cast<size_t>(self->position + size);
    if (end > self->bytes.size()) self->bytes.resize(end);
    std::memcpy(self->bytes.data() + self->position, data, size);
    self->position = static_cast<int64_t>(end);
    return size;
  }
  static int64_t Seek(void* opaque, int64_t offset, int whence) {
    auto* self = static_cast<MemoryOutput*>(opaque);
    const auto size = static_cast<int64_t>(self->bytes.size());
    switch (whence & ~AVSEEK_FORCE) {
      case AVSEEK_SIZE:
        return size;
      case SEEK_SET:
        break;
      case SEEK_CUR:
        offset += self->position;
        break;
      case SEEK_END:
        offset += size;
        break;
      default:
        return AVERROR(EINVAL);
    }
    if (offset < 0) return AVERROR(EINVAL);
    self->position = offset;
    return offset;
  }
};

struct MuxerDeleter {
  void operator()(AVFormatContext* format) const {
    if (format == nullptr) return;
    if (format->pb != nullptr) av_freep(&format->pb->buffer);
    avio_context_free(&format->pb);
    avformat_free_context(format);
  }
};
using MuxerPtr = std::unique_ptr<AVFormatContext, MuxerDeleter>;

namespace {

absl::Status Check(int result, absl::string_view what) {
  if (result >= 0) return absl::OkStatus();
  return AvError(absl::StatusCode::kInternal, what, result);
}

// Moves every packet the encoder has ready into the muxer.
absl::Status WritePackets(AVCodecContext* encoder, AVFormatContext* muxer, AVStream* stream,
                          AVPacket* packet) {
  while (true) {
    const int result = avcodec_receive_packet(encoder, packet);
    if (result == AVERROR(EAGAIN) || result == AVERROR_EOF) return absl::OkStatus();
    if (auto status = Check(result, "encoding failed"); !status.ok()) return status;
    av_packet_rescale_ts(packet, encoder->time_base, stream->time_base);
    packet->stream_index = stream->index;
    if (auto status = Check(av_interleaved_write_frame(muxer, packet), "muxing failed");
        !status.ok()) {
      return status;
    }
  }
}

}  // namespace

struct VideoWriter::State {
  MemoryOutput output;  // the muxer's AVIOContext points here: State never moves
  MuxerPtr muxer;
  CodecContextPtr encoder;
  AVStream* stream = nullptr;
  SwsContextPtr to_yuv;  // made for the first image, and again when an image's size changes
  int source_width = 0;
  int source_height = 0;
  FramePtr frame;
  PacketPtr packet;
  int64_t last_timestamp = -1;
  bool finished = false;
};

VideoWriter::VideoWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
VideoWriter::VideoWriter(VideoWriter&&) noexcept = default;
VideoWriter& VideoWriter::operator=(VideoWriter&&) noexcept = default;
VideoWriter::~VideoWriter() = default;

absl::StatusOr<VideoWriter> VideoWriter::Open(int width, int height, const EncodeOptions& options) {
  if (width <= 0 || height <= 0 || width % 2 != 0 || height % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("frames must have an even, positive size; got ", width, "x", height));
  }
  const AVCodec* codec = avcodec_find_encoder_by_name(options.codec.c_str());
  if (codec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("no encoder named ", options.codec));
  }
  auto state = std::make_unique<State>();
  AVFormatContext* raw_muxer = nullptr;
  if (auto status = Check(
          avformat_alloc_output_context2(&raw_muxer, nullptr, options.container.c_str(), nullptr),
          absl::StrCat("unknown container ", options.container));
      !status.ok()) {
    return absl::InvalidArgumentError(status.message());
  }
  state->muxer.reset(raw_muxer);
  AVFormatContext* muxer = state->muxer.get();
  constexpr int kIoBufferBytes = 64 * 1024;
  auto* io_buffer = static_cast<unsigned char*>(av_malloc(kIoBufferBytes));
  muxer->pb = avio_alloc_context(io_buffer, kIoBufferBytes, /*write_flag=*/1, &state->output,
                                 nullptr, &MemoryOutput::Write, &MemoryOutput::Seek);
  if (muxer->pb == nullptr) {
    av_free(io_buffer);
    return absl::ResourceExhaustedError("out of memory");
  }
  muxer->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_BITEXACT;

  state->encoder.reset(avcodec_alloc_context3(codec));
  AVCodecContext* encoder = state->encoder.get();
  if (encoder == nullptr) return absl::ResourceExhaustedError("out of memory");
  encoder->width = width;
  encoder->height = height;
  encoder->pix_fmt = AV_PIX_FMT_YUV420P;
  const int units =
      options.timestamps_per_second > 0 ? options.timestamps_per_second : options.frames_per_second;
  encoder->time_base = AVRational{1, units};
  encoder->framerate = AVRational{options.frames_per_second, 1};
  encoder->gop_size =
      options.keyframe_interval > 0 ? options.keyframe_interval : options.frames_per_second;
  encoder->thread_count = 1;  // one thread keeps the output bit-exact
  encoder->flags |= AV_CODEC_FLAG_QSCALE | AV_CODEC_FLAG_BITEXACT;
  encoder->global_quality = FF_QP2LAMBDA * options.quantizer;
  // Standard JPEG is full-range YUV; libavcodec's MJPEG encoder refuses limited range.
  const bool full_range = codec->id == AV_CODEC_ID_MJPEG;
  if (full_range) encoder->color_range = AVCOL_RANGE_JPEG;
  // libx264's macroblock-tree rate control made the bytes depend on which encodes ran before in
  // the process (the decoded frames too), so it is off: a second run would not match the first.
  const bool x264 = std::strcmp(codec->name, "libx264") == 0;
  if (x264) av_opt_set_int(encoder->priv_data, "mbtree", 0, 0);
  if (!options.keyframes_at_scene_cuts) {
    // libx264 takes it in its own parameters; libavcodec's encoders never detect a change that
    // exceeds this threshold.
    if (x264) {
      av_opt_set(encoder->priv_data, "x264-params", "scenecut=0", 0);
    } else {
      av_opt_set_int(encoder->priv_data, "sc_threshold", 1000000000, 0);
    }
  }
  if (muxer->oformat->flags & AVFMT_GLOBALHEADER) encoder->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  if (auto status = Check(avcodec_open2(encoder, codec, nullptr), "cannot open the encoder");
      !status.ok()) {
    return status;
  }
  state->stream = avformat_new_stream(muxer, nullptr);
  if (state->stream == nullptr) return absl::ResourceExhaustedError("out of memory");
  state->stream->time_base = encoder->time_base;
  if (auto status = Check(avcodec_parameters_from_context(state->stream->codecpar, encoder),
                          "cannot set the stream parameters");
      !status.ok()) {
    return status;
  }
  if (auto status = Check(avformat_write_header(muxer, nullptr), "cannot write the header");
      !status.ok()) {
    return status;
  }
  state->frame.reset(av_frame_alloc());
  state->packet.reset(av_packet_alloc());
  if (!state->frame || !state->packet) return absl::ResourceExhaustedError("out of memory");
  AVFrame* frame = state->frame.get();
  frame->format = AV_PIX_FMT_YUV420P;
  frame->width = width;
  frame->height = height;
  frame->color_range = encoder->color_range;
  if (auto status = Check(av_frame_get_buffer(frame, 0), "out of memory for a frame");
      !status.ok()) {
    return status;
  }
  return VideoWriter(std::move(state));
}

absl::Status VideoWriter::Add(const RgbImage& image, int64_t timestamp) {
  State& s = *state_;
  if (s.finished) return absl::FailedPreconditionError("the video is finished");
  if (image.width <= 0 || image.height <= 0 ||
      image.rgb.size() != static_cast<size_t>(3) * image.width * image.height) {
    return absl::InvalidArgumentError("an image must be packed RGB of a positive size");
  }
  if (timestamp <= s.last_timestamp) {
    return absl::InvalidArgumentError(
        absl::StrCat("timestamp ", timestamp, " is not after the last (", s.last_timestamp, ")"));
  }
  AVFrame* frame = s.frame.get();
  if (!s.to_yuv || image.width != s.source_width || image.height != s.source_height) {
    s.to_yuv.reset(sws_getContext(image.width, image.height, AV_PIX_FMT_RGB24, frame->width,
                                  frame->height, AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr, nullptr,
                                  nullptr));
    if (!s.to_yuv) return absl::ResourceExhaustedError("out of memory");
    if (s.encoder->color_range == AVCOL_RANGE_JPEG) {
      const int* bt601 = sws_getCoefficients(SWS_CS_ITU601);
      sws_setColorspaceDetails(s.to_yuv.get(), bt601, /*srcRange=*/1, bt601, /*dstRange=*/1,
                               /*brightness=*/0, /*contrast=*/1 << 16, /*saturation=*/1 << 16);
    }
    s.source_width = image.width;
    s.source_height = image.height;
  }
  if (auto status = Check(av_frame_make_writable(frame), "frame not writable"); !status.ok()) {
    return status;
  }
  const uint8_t* source[4] = {image.rgb.data(), nullptr, nullptr, nullptr};
  const int source_stride[4] = {3 * image.width, 0, 0, 0};
  sws_scale(s.to_yuv.get(), source, source_stride, 0, image.height, frame->data, frame->linesize);
  frame->pts = timestamp;
  s.last_timestamp = timestamp;
  if (auto status = Check(avcodec_send_frame(s.encoder.get(), frame), "encoding failed");
      !status.ok()) {
    return status;
  }
  return WritePackets(s.encoder.get(), s.muxer.get(), s.stream, s.packet.get());
}

absl::StatusOr<std::string> VideoWriter::Finish() {
  State& s = *state_;
  if (s.finished) return absl::FailedPreconditionError("the video is finished");
  s.finished = true;
  if (auto status = Check(avcodec_send_frame(s.encoder.get(), nullptr), "encoding failed");
      !status.ok()) {
    return status;
  }
  if (auto status = WritePackets(s.encoder.get(), s.muxer.get(), s.stream, s.packet.get());
      !status.ok()) {
    return status;
  }
  if (auto status = Check(av_write_trailer(s.muxer.get()), "cannot finish the file");
      !status.ok()) {
    return status;
  }
  avio_flush(s.muxer->pb);
  return std::move(s.output.bytes);
}

absl::StatusOr<std::string> EncodeVideo(const std::vector<RgbImage>& frames,
                                        const EncodeOptions& options) {
  if (frames.empty()) return absl::InvalidArgumentError("no frames to encode");
  const int width = frames[0].width;
  const int height = frames[0].height;
  for (const RgbImage& image : frames) {
    if (image.width != width || image.height != height) {
      return absl::InvalidArgumentError("all frames must be packed RGB of one size");
    }
  }
  absl::StatusOr<VideoWriter> writer = VideoWriter::Open(width, height, options);
  if (!writer.ok()) return writer.status();
  for (size_t i = 0; i < frames.size(); ++i) {
    if (auto status = writer->Add(frames[i], static_cast<int64_t>(i)); !status.ok()) return status;
  }
  return writer->Finish();
}

}  // namespace vidclf::media
