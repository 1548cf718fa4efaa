// Converts the single pictures of a live feed of frames (JPEG or PNG pictures, or raw RGB24
// frames from a camera) as the video path converts decoded frames.
#ifndef VIDCLF_MEDIA_IMAGE_DECODER_H_
#define VIDCLF_MEDIA_IMAGE_DECODER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/av_util.h"
#include "media/frame_converter.h"

namespace vidclf::media {

// Decodes pictures with libavcodec's mjpeg and png decoders, whose contexts it keeps between
// calls, and converts them with a FrameConverter, so that a picture gives the same floats as the
// same picture decoded from a video. Pictures may change size from one call to the next. As in an
// MJPEG stream, a JPEG that lacks a quantisation or Huffman table of its own is decoded with the
// one an earlier picture defined; a complete JPEG file defines all it uses, and decodes the same
// whatever came before. Not thread-safe: use one per feed.
class ImageFrameDecoder {
 public:
  // `preprocess` must pass ValidatePreprocessOptions. Pictures with a side over
  // `max_frame_side` are refused.
  explicit ImageFrameDecoder(const PreprocessOptions& preprocess, int max_frame_side = 8192);
  ImageFrameDecoder(const ImageFrameDecoder&) = delete;
  ImageFrameDecoder& operator=(const ImageFrameDecoder&) = delete;

  // Floats each call writes: 3 * crop_size * crop_size, in the layout `preprocess` asks for.
  int64_t output_floats() const { return converter_.output_floats(); }

  // Decodes a JPEG or PNG picture (told apart by its first bytes) and writes output_floats()
  // floats to `out`. Errors:
  //   INVALID_ARGUMENT    empty input, bytes that are neither JPEG nor PNG (the message says
  //                       which formats are accepted), a truncated or damaged picture
  //   RESOURCE_EXHAUSTED  a side over max_frame_side, refused before decoding when the
  //                       picture's header says its size
  absl::Status DecodeEncoded(absl::string_view bytes, float* out);

  // Converts a width x height RGB24 picture (3 bytes a pixel, rows top to bottom, no padding)
  // and writes output_floats() floats to `out`. INVALID_ARGUMENT when a side is not positive or
  // `bytes` is not width * height * 3 bytes long, RESOURCE_EXHAUSTED when a side is over
  // max_frame_side.
  absl::Status ConvertRgb24(absl::string_view bytes, int width, int height, float* out);

 private:
  // The decoder for `codec_id`, opened on first use and kept.
  absl::StatusOr<AVCodecContext*> Decoder(AVCodecID codec_id);
  // Decodes one picture with `decoder` into frame_.
  absl::Status DecodePicture(AVCodecContext* decoder, absl::string_view bytes,
                             absl::string_view format_name);

  const int max_frame_side_;
  FrameConverter converter_;
  CodecContextPtr jpeg_decoder_;
  CodecContextPtr png_decoder_;
  PacketPtr packet_;
  FramePtr frame_;  // a decoded picture, or a copy of the caller's RGB24 bytes
};

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_IMAGE_DECODER_H_
