// Decodes a live feed (a camera's MPEG-TS, say) in one pass as its bytes arrive, handing out
// converted frames as they are decoded.
#ifndef VIDCLF_MEDIA_LIVE_DECODER_H_
#define VIDCLF_MEDIA_LIVE_DECODER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/cancellation.h"
#include "media/byte_stream.h"
#include "media/frame_buffer.h"
#include "media/frame_converter.h"
#include "media/input_options.h"
#include "media/nvdec_device.h"
#include "media/uri_allowlist.h"

namespace vidclf::media {

struct LiveDecodeOptions {
  // Resize, crop, normalisation and layout of each converted frame.
  PreprocessOptions preprocess;
  // Converts every embed_stride-th decoded frame (indices 0, k, 2k, ...); >= 1.
  int embed_stride = 1;
  // When > 0, instead of embed_stride: converts the first frame at or after each multiple of
  // 1 / sample_fps seconds of media time, however the frame rate varies.
  double sample_fps = 0;
  // Decoder threads; 0 lets libavcodec choose from the number of cores. One by default: a server
  // decodes many feeds at once, and frame threads delay each frame by one frame per thread.
  int decoder_threads = 1;
  // Feeds whose frames are larger than this in either dimension are refused
  // (RESOURCE_EXHAUSTED), before decoding when the container says so, else at the first such
  // frame.
  int max_frame_side = 8192;
  // The most samples the movie fragments of a fragmented MP4 may declare (FragmentGuard); as
  // DecodeClip allows by default.
  int64_t max_fragment_samples = 800000;
  // When set, decoding stops between packets once it is cancelled, with its reason. A decoder
  // waiting for bytes sees it when bytes come or the input is aborted: whoever cancels should
  // also abort the input. Must outlive the call.
  const CancellationToken* cancellation = nullptr;
  // Decodes on this GPU where it can (NvdecDevice::Attach); null: on the CPU. Must outlive the
  // call.
  const NvdecDevice* nvdec = nullptr;
  // Frames decoded on `nvdec` are handed out as NVDEC wrote them, in the GPU's memory
  // (ClipOptions::hand_over_gpu_pictures).
  bool hand_over_gpu_pictures = false;
};

// INVALID_ARGUMENT naming the field when `options` cannot be used.
absl::Status ValidateLiveDecodeOptions(const LiveDecodeOptions& options);

// A decoded frame handed out by DecodeLive.
struct LiveFrame {
  // Position among all the frames decoded from the feed, from 0.
  int64_t index = 0;
  // Presentation time in seconds from the first decoded frame's. From the frames' timestamps;
  // a feed whose first frame has none is timed by its frame rate (index / rate), and a frame
  // whose timestamp is missing or not after its predecessor's is placed one frame period after
  // it, so that the times always increase.
  double timestamp_seconds = 0;
  // The converted frame (FrameConverter::Output), valid only during the callback, or a GPU's
  // picture that holds its own reference (hand_over_gpu_pictures); null for a frame off the embed
  // stride, which is not converted.
  const FrameBuffer* pixels = nullptr;
  // When the bytes of the frame's own packet arrived in the input (ByteStream::ArrivalOf its last
  // byte, or of the last byte read when the container does not say where the packet lies): the
  // start of the frame's latency. Never before the Append that brought those bytes.
  ByteStream::Clock::time_point arrived;
};

// Decodes `input` in one pass, as its bytes arrive (no seeking, nothing read twice), and calls
// `on_frame` for every decoded frame, in presentation order, on the calling thread; only every
// options.embed_stride-th comes with pixels. Reads wait for bytes without a deadline: the caller
// ends a feed by finishing it, or stops it by aborting it (on cancellation, or when the feed has
// been idle too long). Containers that are demuxed front to back work: MPEG-TS, Matroska/WebM,
// fragmented or fast-start MP4, MPEG program streams (VOB), raw H.264, HEVC and MPEG video, MJPEG,
// Ogg, FLV, IVF, y4m. Damaged packets are skipped, as players do. The container is recognised from
// up to its first 64 KiB before any byte is read, so a kHeldBytes input's bound must be at least
// that. Returns:
//   OK                  the input ended (the decoder's last frames were flushed out)
//   the input's read_error(): its abort status, or RESOURCE_EXHAUSTED over its bound
//   the cancellation's reason
//   INVALID_ARGUMENT    bad options, or input that FFmpeg cannot demux or decode, with no video
//                       stream ("no video stream in input (format: mp3, streams: audio)"), with
//                       no decodable frame, or an MP4 whose moov box follows its media data
//   RESOURCE_EXHAUSTED  frames or fragments over the limits in `options`
//   the first error that `on_frame` returns, which stops decoding.
// Closes the input's reader side on return. Thread-safe: every call uses its own libav state.
absl::Status DecodeLive(ByteStream& input, const LiveDecodeOptions& options,
                        const std::function<absl::Status(const LiveFrame&)>& on_frame);

// DecodeLive for a whole video in memory, which may be any container libavformat reads (an MP4
// whose moov box comes last included): `bytes` must outlive the call. Errors as DecodeLive's.
absl::Status DecodeLiveMemory(absl::string_view bytes, const LiveDecodeOptions& options,
                              const std::function<absl::Status(const LiveFrame&)>& on_frame);

// How a source pulled from a URI is followed.
struct LiveSourceOptions {
  // A source that sends nothing for this long, opening or after, has dropped.
  ByteStream::Clock::duration stall_timeout = std::chrono::seconds(10);
  // Called once the source is open and its video stream found, with what it holds ("mpegts:
  // h264 320x240", say), before its first frame.
  std::function<void(absl::string_view description)> on_connected;
  // FFmpeg input options (media/input_options.h): rtsp_transport, say.
  InputOptions input_options;
};

// DecodeLive for a source the server pulls itself: `uri`, when `allowlist` allows it (see
// Demuxer::OpenUri for the rules). Frames are timed from the first one decoded on this
// connection, and arrive when their packet is read. Returns:
//   OK                  the source ended where its known size ends (a file, say)
//   UNAVAILABLE         the source could not be reached, sent nothing for the stall timeout, or,
//                       having no known size (a camera, a live HTTP stream), closed or broke:
//                       it may be worth following again
//   INVALID_ARGUMENT    also: input options that ValidateInputOptions refuses
//   the errors of DecodeLive and Demuxer::OpenUri otherwise.
absl::Status DecodeLiveUri(const std::string& uri, const UriAllowlist& allowlist,
                           const LiveSourceOptions& source, const LiveDecodeOptions& options,
                           const std::function<absl::Status(const LiveFrame&)>& on_frame);

}  // namespace vidclf::media

#endif  // VIDCLF_MEDIA_LIVE_DECODER_H_
