#include "media/image_decoder.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "media/libav_settings.h"
#include "media/video_stream.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixfmt.h>
}

namespace vidclf::media {
namespace {

constexpr absl::string_view kJpegStart("\xFF\xD8\xFF", 3);
constexpr absl::string_view kPngSignature("\x89PNG\r\n\x1A\n", 8);

struct PictureSize {
  int64_t width;
  int64_t height;
};

// The big-endian unsigned integer of `count` bytes at `at`. (Named apart from the other files'
// readers of big-endian fields: a unity build compiles them in one translation unit.)
int64_t PictureHeaderField(absl::string_view bytes, size_t at, size_t count) {
  int64_t value = 0;
  for (size_t i = at; i < at + count; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

// The size in a PNG's IHDR chunk, which the signature is followed by.
std::optional<PictureSize> PngSize(absl::string_view png) {
  if (png.size() < 24 || png.substr(12, 4) != "IHDR") return std::nullopt;
  return PictureSize{PictureHeaderField(png, 16, 4), PictureHeaderField(png, 20, 4)};
}

// The size in a JPEG's frame header (an SOFn marker segment), found by walking the marker
// segments that come before it.
std::optional<PictureSize> JpegSize(absl::string_view jpeg) {
  size_t at = 2;  // past the start-of-image marker
  while (at + 4 <= jpeg.size() && static_cast<uint8_t>(jpeg[at]) == 0xFF) {
    const auto marker = static_cast<uint8_t>(jpeg[at + 1]);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    // C4 (DHT), C8 (JPG) and CC (DAC) share the range but are not frame headers.
    const bool frame_header =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (frame_header) {
      if (at + 9 > jpeg.size()) return std::nullopt;
      return PictureSize{PictureHeaderField(jpeg, at + 7, 2), PictureHeaderField(jpeg, at + 5, 2)};
    }
    if (marker == 0xDA) return std::nullopt;  // the scan starts: no frame header before it
    at += 2 + static_cast<size_t>(PictureHeaderField(jpeg, at + 2, 2));
  }
  return std::nullopt;
}

}  // namespace

ImageFrameDecoder::ImageFrameDecoder(const PreprocessOptions& preprocess, int max_frame_side)
    : max_frame_side_(max_frame_side),
      converter_(preprocess),
      packet_(av_packet_alloc()),
      frame_(av_frame_alloc()) {}

absl::Status ImageFrameDecoder::DecodeEncoded(absl::string_view bytes, float* out) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty picture: no bytes were sent");
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max() / 2)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the picture is ", bytes.size(), " bytes, more than a packet can hold"));
  }
  AVCodecID codec_id = AV_CODEC_ID_NONE;
  std::optional<PictureSize> size;
  absl::string_view format_name;
  if (absl::StartsWith(bytes, kJpegStart)) {
    codec_id = AV_CODEC_ID_MJPEG;
    size = JpegSize(bytes);
    format_name = "JPEG";
  } else if (absl::StartsWith(bytes, kPngSignature)) {
    codec_id = AV_CODEC_ID_PNG;
    size = PngSize(bytes);
    format_name = "PNG";
  } else {
    return absl::InvalidArgumentError(
        "the picture is neither JPEG nor PNG (judged from its first bytes); send JPEG or PNG "
        "pictures, or raw RGB24 frames with their width and height");
  }
  if (size.has_value()) {
    if (auto status = CheckFrameSize(size->width, size->height, max_frame_side_); !status.ok()) {
      return status;
    }
  }
  auto decoder = Decoder(codec_id);
  if (!decoder.ok()) return decoder.status();
  absl::Status status = DecodePicture(*decoder, bytes, format_name);
  if (status.ok()) {
    // Over the limit yet within max_pixels: a header the size check above could not read.
    status = CheckFrameSize(frame_->width, frame_->height, max_frame_side_);
  }
  if (status.ok()) status = converter_.Convert(*frame_, out);
  av_frame_unref(frame_.get());
  return status;
}

absl::Status ImageFrameDecoder::ConvertRgb24(absl::string_view bytes, int width, int height,
                                             float* out) {
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("an RGB24 frame of ", width, "x", height, " pixels: both sides must be > 0"));
  }
  if (auto status = CheckFrameSize(width, height, max_frame_side_); !status.ok()) return status;
  const int64_t expected = int64_t{3} * width * height;
  if (static_cast<int64_t>(bytes.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("an RGB24 frame of ", width, "x", height,
                                                   " pixels has ", expected, " bytes, not ",
                                                   bytes.size()));
  }
  // swscale's SIMD loads read past the end of rows and of the picture, so the bytes are copied
  // into a frame buffer that libavutil pads for them.
  frame_->format = AV_PIX_FMT_RGB24;
  frame_->width = width;
  frame_->height = height;
  const int result = av_frame_get_buffer(frame_.get(), 0);
  if (result < 0) {
    return AvError(absl::StatusCode::kResourceExhausted, "out of memory for the frame", result);
  }
  av_image_copy_plane(frame_->data[0], frame_->linesize[0],
                      reinterpret_cast<const uint8_t*>(bytes.data()), 3 * width, 3 * width, height);
  absl::Status status = converter_.Convert(*frame_, out);
  av_frame_unref(frame_.get());
  return status;
}

absl::StatusOr<AVCodecContext*> ImageFrameDecoder::Decoder(AVCodecID codec_id) {
  CodecContextPtr& decoder = codec_id == AV_CODEC_ID_MJPEG ? jpeg_decoder_ : png_decoder_;
  if (decoder) return decoder.get();
  if (!packet_ || !frame_) return absl::ResourceExhaustedError("out of memory");
  EnsureLibavConfigured();
  const AVCodec* codec = avcodec_find_decoder(codec_id);
  if (codec == nullptr) {
    return absl::InternalError(
        absl::StrCat("this FFmpeg has no ", avcodec_get_name(codec_id), " decoder"));
  }
  CodecContextPtr opened(avcodec_alloc_context3(codec));
  if (!opened) return absl::ResourceExhaustedError("out of memory for the decoder");
  opened->thread_count = 1;
  opened->max_pixels = static_cast<int64_t>(max_frame_side_) * max_frame_side_;
  // A damaged picture is an error, not a picture patched up by error concealment.
  opened->err_recognition = AV_EF_CRCCHECK | AV_EF_BITSTREAM | AV_EF_BUFFER | AV_EF_EXPLODE;
  const int result = avcodec_open2(opened.get(), codec, nullptr);
  if (result < 0) {
    return AvError(absl::StatusCode::kInternal,
                   absl::StrCat("cannot open the ", codec->name, " decoder"), result);
  }
  decoder = std::move(opened);
  return decoder.get();
}

absl::Status ImageFrameDecoder::DecodePicture(AVCodecContext* decoder, absl::string_view bytes,
                                              absl::string_view format_name) {
  // The packet owns a padded copy: decoders read a little past the end.
  int result = av_new_packet(packet_.get(), static_cast<int>(bytes.size()));
  if (result < 0) return AvError(absl::StatusCode::kResourceExhausted, "out of memory", result);
  std::memcpy(packet_->data, bytes.data(), bytes.size());
  // Without the key flag, libavcodec's PNG decoder takes a picture of the same size as a delta
  // from the one before it (MNG-style P-frames) and adds that one's pixels in.
  packet_->flags |= AV_PKT_FLAG_KEY;
  result = avcodec_send_packet(decoder, packet_.get());
  av_packet_unref(packet_.get());
  if (result >= 0) result = avcodec_receive_frame(decoder, frame_.get());
  // Each picture stands alone: nothing of this one may linger into the next.
  avcodec_flush_buffers(decoder);
  if (result == AVERROR(EAGAIN)) result = AVERROR_INVALIDDATA;  // no picture came out
  if (result < 0) {
    return AvError(absl::StatusCode::kInvalidArgument,
                   absl::StrCat("the ", format_name, " picture is damaged or truncated"), result);
  }
  return absl::OkStatus();
}

}  // namespace vidclf::media
