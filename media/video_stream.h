// The video stream of a demuxed input: finding it, holding its frame size to the limits, and
// opening its decoder. Shared by the clip decoder and the live decoder, so that both refuse the
// same inputs with the same messages and show frames the same way.
#ifndef VIDCLF_MEDIA_VIDEO_STREAM_H_
#define VIDCLF_MEDIA_VIDEO_STREAM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "media/av_util.h"
#include "media/demuxer.h"
#include "media/nvdec_device.h"

namespace vidclf::media {

// "format: mp3, streams: audio": what the input holds, for error messages.
std::string DescribeInput(const AVFormatContext& format);

// RESOURCE_EXHAUSTED when a side of a `width` x `height` frame is over `max_frame_side`.
absl::Status CheckFrameSize(int64_t width, int64_t height, int max_frame_side);

// Bytes enough to hold a y4m stream header or a PNM image header.
inline constexpr int64_t kRawHeaderBytes = 1024;

// Checks the picture size that a y4m stream header ("YUV4MPEG2 W640 H480 ...") or a PNM image
// header ("P6 640 480 255", PAM's "WIDTH 640") at the start of `head` declares. libavformat and
// the PNM decoder turn down sizes past their own bound (about 16384x16384) as invalid data
// before anyone can read the size, which would hide that a limit was hit. Other inputs pass.
absl::Status CheckRawHeaderFrameSize(absl::string_view head, int max_frame_side);

// What a whole video in memory must pass before libavformat reads it: not empty,
// CheckRawHeaderFrameSize on its head, and a FragmentGuard with `max_fragment_samples`.
absl::Status CheckWholeInput(absl::string_view bytes, int max_frame_side,
                             int64_t max_fragment_samples);

// What URI bytes must pass before libavformat reads them: CheckRawHeaderFrameSize on their head,
// and a FragmentGuard with `max_fragment_samples`.
UriInputChecks RawInputChecks(int max_frame_side, int64_t max_fragment_samples);

struct VideoStream {
  int index = -1;
  const AVCodec* codec = nullptr;
};

// Reads the streams' parameters (probing about 1 s of media) and picks the best video stream.
// Errors: INVALID_ARGUMENT when the streams cannot be read, there is no video stream ("no video
// stream in input (format: mp3, streams: audio)") or no decoder for it; RESOURCE_EXHAUSTED when
// its frames are over `max_frame_side`.
absl::StatusOr<VideoStream> FindVideoStream(AVFormatContext* format, int max_frame_side);

// How far to turn the picture clockwise to show it upright, from the container's display matrix
// (a phone held sideways writes one); 0 when there is none. For FrameConverter::set_rotation.
double ClockwiseRotation(const AVStream& stream);

// An opened decoder, and the NVDEC session it holds when it decodes on a GPU. One on a GPU is
// freed by its device (NvdecDevice::Close), off the thread that drops it.
struct VideoDecoder {
  VideoDecoder() = default;
  ~VideoDecoder();
  VideoDecoder(VideoDecoder&&) = default;
  VideoDecoder& operator=(VideoDecoder&&) = delete;

  CodecContextPtr context;
  NvdecDevice::Session nvdec;  // inactive: decodes on the CPU, for nvdec.cpu_reason()
  // Kept set up between clips (DecoderPool): never flushed (decoder_feed.h).
  bool keep_set_up = false;
  // Decoded another stream before: reads the parameter sets of the next with its first packet.
  bool decoded_another_stream = false;
  AVCodecContext* get() const { return context.get(); }
};

// Opens `codec` for `stream` with `threads` threads (0: libavcodec chooses) and pictures of at
// most max_frame_side² pixels, on `nvdec` where it can decode the stream (null: on the CPU).
// INVALID_ARGUMENT when the stream's parameters do not open it.
absl::StatusOr<VideoDecoder> OpenVideoDecoder(const AVStream& stream, const AVCodec* codec,
                                              int threads, int max_frame_side,
                                              const NvdecDevice* nvdec = nullptr);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_VIDEO_STREAM_H_
